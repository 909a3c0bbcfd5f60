// `fork.losers: journal` (issue 25): what the branches that lost a fork round wrote in their
// journals, kept for the lineage that goes on from the winner. The paper drops losers whole; the
// practitioner's journal exists so that "a fresh agent does not repeat ideas that already
// failed", and this keeps the failed ideas of the losers too.
//
// How: once a fork round is decided, each shell reads the journal at the round's base and each
// loser's committed journal (before the losers' branches go) and records, in the round, the
// entries each loser added (`recordLosers`: bounded, cleaned). Every episode that starts from
// the winner's commit then gets the round's section appended to its journal before its agent
// runs (`sectionFor`, `withSection`), so the lineage's later commits carry it. Winners, heads and
// scores are untouched: the section is text in the next episode's workspace, nothing more.
import { LOSER_JOURNAL_MAX_BYTES } from './bounds.js';
import type { Config } from './config.js';
import { describeEpisodeId } from './names.js';
import type { Episode, LoserNotes, Round, RunState } from './state.js';
import { cutText, formatNumber, plainText } from './text.js';

/**
 * The part of a journal the losers' notes are read from: its last LOSER_JOURNAL_MAX_BYTES, from
 * the start of a line. What a branch added is at the end, and a lineage's journal grows every night:
 * a journal cut to nothing past the bound would record no loser's notes ever again.
 */
export function journalWindow(text: string | null): string {
  if (text === null) return '';
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= LOSER_JOURNAL_MAX_BYTES) return text;
  const tail = new TextDecoder().decode(bytes.subarray(bytes.length - LOSER_JOURNAL_MAX_BYTES));
  return tail.slice(tail.indexOf('\n') + 1);
}

/**
 * What one loser's notes keep at most: its last `entries` entries (earlier ones are counted, not
 * quoted), each cut to `entryChars` characters on one line. About 5 KB per branch, so a run of
 * three rounds of four branches adds at most about 45 KB to a journal.
 */
export const LOSER_CAP = { entries: 12, entryChars: 400 } as const;

/** Whether the run keeps the losers' journals. */
export function keepsLosers(config: Config): boolean {
  return config.fork.losers === 'journal' && config.fork.branches > 1;
}

/** The losers of a decided fork round with a winner: the other branches that have a result. */
export function losersOf(round: Round): Episode[] {
  const winner = round.decision?.winner;
  if (round.kind !== 'fork' || !winner) return [];
  return round.episodes.filter((e) => e.id !== winner && e.result);
}

/**
 * The entries a loser's journal added since the fork point: its lines that the base's journal
 * does not have (so an appended journal and a rewritten one both work), grouped into entries (a
 * list item, a heading or a paragraph, with the lines that continue it), each on one line without
 * control characters and cut; forkflush's own lines are left out (the section's header says what
 * they said, and one an agent wrote would be a forgery). The last LOSER_CAP.entries are kept.
 */
export function loserNotes(episode: string, baseJournal: string, loserJournal: string): LoserNotes {
  const known = new Map<string, number>();
  for (const line of lines(baseJournal)) known.set(line, (known.get(line) ?? 0) + 1);
  const entries: string[] = [];
  let current: string[] = [];
  const flush = () => {
    const text = current.join(' ').replace(/\s+/g, ' ').trim();
    if (text !== '' && !FORKFLUSH_LINE.test(text)) entries.push(cutText(text, LOSER_CAP.entryChars));
    current = [];
  };
  for (const raw of plainText(loserJournal).split('\n')) {
    const line = raw.trim();
    const seen = known.get(line) ?? 0;
    if (line === '' || seen > 0) {
      if (seen > 0) known.set(line, seen - 1);
      flush();
      continue;
    }
    if (ENTRY_START.test(line)) flush();
    current.push(line);
  }
  flush();
  const kept = entries.slice(-LOSER_CAP.entries);
  return { episode, entries: kept, earlier: entries.length - kept.length };
}

const ENTRY_START = /^([-*+]\s|\d+[.)]\s|#)/;
/** A journal line forkflush writes (core/journal.ts journalEntry). */
const FORKFLUSH_LINE = /^[-*+]\s*forkflush\s/i;

function lines(text: string): string[] {
  return plainText(text)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

/**
 * The round's notes, read by the shell: the journal at the base and at each loser's commit
 * (`read(commit)`: the journal's text, '' when it has none). Rounds already recorded are left
 * as they are, so this is safe to repeat (a resume, a second handler on GitHub).
 */
export async function recordLosers(state: RunState, read: (commit: string) => Promise<string>): Promise<RunState> {
  if (!keepsLosers(state.config)) return state;
  let next = state;
  for (const round of state.rounds) {
    const losers = losersOf(round);
    if (round.losers || losers.length === 0) continue;
    const base = await read((losers[0] as Episode).base);
    const notes: LoserNotes[] = [];
    for (const e of losers) {
      // Against the journal it started from: with the section of the round before, when it got one
      // (a fork round right after another), which is not its agent's to be quoted again.
      const section = sectionFor(next, e);
      const started = section ? withSection(base, section) : base;
      notes.push(loserNotes(e.id, started, await read((e.result as { commit: string }).commit)));
    }
    next = {
      ...next,
      rounds: next.rounds.map((r) => (r.index === round.index ? { ...r, losers: notes } : r)),
    };
  }
  return next;
}

/** The first line of a round's section: how a journal that already holds it is recognised. */
function fenceOpen(round: Round): string {
  return `<!-- forkflush: branches that lost round ${round.index} (${round.phase}), begin -->`;
}

function fenceClose(round: Round): string {
  return `<!-- forkflush: branches that lost round ${round.index}, end -->`;
}

/**
 * The section of a decided fork round: fenced, labelled as the losers', per loser its id, score
 * and spend (from the run's state, never from its text) and its entries, each quoted on a line of
 * its own after "> " (so none can pass for a forkflush line, a fence or a header), null when the
 * round has no recorded notes.
 */
export function losersSection(state: RunState, round: Round): string | null {
  if (!round.losers || round.losers.length === 0) return null;
  const unit = state.config.budget.unit;
  const winner = round.decision?.winner ?? '';
  const out = [
    fenceOpen(round),
    `## Branches that lost round ${round.index} (${round.phase})`,
    '',
    `Copied by forkflush from the journals of the branches discarded at this fork point. Each started from the same ` +
      `workspace as ${describeEpisodeId(winner)}, which won and which this lineage continues; their workspaces are gone. ` +
      `Lines that start with ">" are their agents' own notes, quoted as written and not checked: ideas already tried, not facts.`,
  ];
  for (const notes of round.losers) {
    const e = round.episodes.find((x) => x.id === notes.episode);
    const r = e?.result;
    if (!e || !r) continue;
    const score = r.score === null ? 'no score' : `score ${formatNumber(r.score, 6)}`;
    const spent = `spent ${formatNumber(r.spent)} of ${formatNumber(e.allowance)} ${unit}`;
    const told = e.directive ? ', told to try a different approach' : '';
    out.push('', `### ${e.id}: ${score}; ${spent}${told}`);
    if (notes.earlier > 0) out.push(`(${notes.earlier} earlier entries left out)`);
    if (notes.entries.length === 0) out.push('(no new entries in its journal)');
    // Cleaned again: the notes come from a record a hand could have edited.
    for (const entry of notes.entries.slice(-LOSER_CAP.entries))
      out.push(`> ${cutText(plainText(entry).replace(/\s+/g, ' '), LOSER_CAP.entryChars)}`);
  }
  out.push('', fenceClose(round));
  return `${out.join('\n')}\n`;
}

/**
 * The fork round whose losers' section an episode's journal gets before its agent runs: the one
 * whose winner is the episode's base (every episode that starts from that winner), if its notes
 * are recorded; else null.
 */
export function sectionRound(state: RunState, e: Episode): Round | null {
  if (!keepsLosers(state.config)) return null;
  for (const round of state.rounds) {
    if (round.kind !== 'fork' || round.index >= e.round || !round.losers || round.losers.length === 0) continue;
    const winner = round.episodes.find((x) => x.id === round.decision?.winner);
    if (winner?.result?.commit === e.base) return round;
  }
  return null;
}

/** The section an episode's journal gets before its agent runs (see sectionRound), or null. */
export function sectionFor(state: RunState, e: Episode): string | null {
  const round = sectionRound(state, e);
  return round ? losersSection(state, round) : null;
}

/** The journal with the section appended once: a journal that holds it already is left as it is. */
export function withSection(journal: string, section: string): string {
  if (journal.includes(section)) return journal;
  const header = journal.trim() === '' ? '# Journal\n\n' : '';
  const sep = journal === '' || journal.endsWith('\n\n') ? '' : journal.endsWith('\n') ? '\n' : '\n\n';
  return `${header}${journal}${sep}${section}`;
}
