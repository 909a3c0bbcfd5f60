import { BODY_MAX_CHARS, CHECK_OUTPUT_MAX_BYTES, GITHUB_ANNOTATIONS_MAX } from './bounds.js';
import { FAILURE_WHAT, GENERIC_FIX } from './failure.js';
import { describeContext, type EpisodeDetails } from './journal.js';
import { bestBranch, describeEpisodeId, lineageBranch } from './names.js';
import { scoreText, usageText } from './report.js';
import { allEpisodes, type Episode, type EpisodeResult, type RunState, setupFailed } from './state.js';
import { stoppingFailure } from './stop.js';
import { cutText, formatNumber, inertCodeSpan, inertOnGitHub, markdownTable, plainText } from './text.js';

/** Marks the one comment forkflush keeps editing on an issue. */
export function commentMarker(run: string): string {
  return `<!-- forkflush:${run} -->`;
}

export type RunPhase = 'running' | 'stopped' | 'finished';

/**
 * What the texts on GitHub say besides the run's state: where its work is (branches, or refs under
 * refs/forkflush/ in the default layout), and facts from its record.
 */
export interface GitHubView {
  /** The lineage and the best workspace, as people name them (a branch, or a full ref). */
  lineage: string;
  best: string;
  /** The issue the run belongs to. */
  issue?: number;
  /** The result pull request, once it is open. */
  resultPr?: number | null;
  /**
   * The grade of the initial workspace: asked (its job has not reported), done, lost (its job failed
   * or never reported); absent: never asked (older runs).
   */
  baseGrade?: 'asked' | 'done' | 'lost';
  /** What the issue's text or the starting command changed in the config, and where it came from. */
  overrides?: { text: string; source: string };
  /** Why the run stopped when nobody said `/autoresearch stop` (its round's run cancelled in Actions). */
  stopReason?: string;
  /** The work item (core/work.ts key) that failed when last tried, what it said and since when. */
  blocked?: { work: string; message: string; since: string };
  /** The last idea map drawn (`/autoresearch map`): its picture and its agreement line. */
  map?: { image: string; line: string };
  /** The files that run by themselves (CI, hooks, attributes) the result changes. */
  automation?: string[];
}

/** Layout 1's names (every ref a branch), for texts of runs that have no record (tests, old callers). */
export function branchView(state: RunState): GitHubView {
  return { lineage: lineageBranch(state.id, 0, state.lineages.length), best: bestBranch(state.id) };
}

/**
 * How agent contexts are kept, said plainly where it matters: unencrypted contexts are readable by
 * anyone who can read the repository; unkept ones make serial episodes start fresh, which is not
 * the method (a leader carries its context between its serial episodes).
 */
export function contextNote(state: RunState, privateRepository: boolean | undefined): string[] {
  const stores = new Set(allEpisodes(state).flatMap((e) => (e.result?.contextStore ? [e.result.contextStore] : [])));
  const setKey =
    'Make a key with `openssl rand -base64 32`, store it as the repository secret `FORKFLUSH_CONTEXT_KEY` and pass it to the worker (`context-key:`).';
  if (stores.has('none') || (stores.size === 0 && privateRepository === false)) {
    return [
      `Agent contexts are not kept in this public repository without \`FORKFLUSH_CONTEXT_KEY\`: serial episodes start with a fresh context instead of carrying the leader's, so this run is not the paper's method. ${setKey}`,
    ];
  }
  if (stores.has('plain')) {
    return [
      `Agent contexts (transcripts) are kept unencrypted on \`refs/forkflush/${state.id}/contexts/\`: anyone who can read this repository can read them. ${setKey}`,
    ];
  }
  return [];
}

/**
 * An episode's check run before its result: queued when its round is dispatched, in progress once
 * its job runs (the check links the job's log).
 */
export function episodeCheckPending(
  state: RunState,
  e: Episode,
  status: 'queued' | 'in_progress',
): { title: string; summary: string } {
  const round = state.rounds.find((r) => r.index === e.round);
  const unit = state.config.budget.unit;
  const title = `${e.id}: ${status === 'queued' ? 'waiting for its job' : 'running'}`;
  const summary = markdownTable(
    ['', ''],
    [
      ['round', `${e.round} (${round?.phase ?? ''}${round?.extra ? ', after the plan' : ''})`],
      ['context', describeContext(e) + (e.directive ? ', told to try a different approach' : '')],
      ['allowance', `${formatNumber(e.allowance, 2)} ${unit}`],
      ['started from', `\`${e.base.slice(0, 10)}\``],
      [
        'best so far',
        state.best ? `${scoreText(state.best.score)} (${describeEpisodeId(state.best.episode)})` : 'none',
      ],
    ],
  );
  return { title, summary };
}

/** The output of an episode's check run. */
export function checkRunOutput(
  state: RunState,
  e: Episode,
  r: EpisodeResult,
  details: EpisodeDetails | null,
): { title: string; summary: string; text: string; annotations?: CheckAnnotation[] } {
  const c = state.config;
  const setup = setupFailed({ result: r });
  const score = setup
    ? (r.reason ?? 'setup failed')
    : r.score === null
      ? `no score: ${r.reason ?? 'unknown'}`
      : `score ${scoreText(r.score)}`;
  const stopping = stoppingFailure(r);
  const title = cutText(
    plainText(
      stopping ? `${e.id}: the agent failed, the run stopped: ${FAILURE_WHAT[stopping.kind]}` : `${e.id}: ${score}`,
    ),
    255,
    '…',
  );
  const rows = [
    ['score', r.score === null ? `none: ${inertCodeSpan(r.reason ?? 'unknown')}` : scoreText(r.score)],
    ['direction', c.grader.direction],
    [
      'spent',
      `${formatNumber(r.spent, 2)} of ${formatNumber(e.allowance, 2)} ${c.budget.unit}` +
        (r.spentBasis === 'estimated' ? ' (an estimate: the agent reported no usage)' : ''),
    ],
    ['ended', setup ? 'setup failed: the agent did not run, and the round does not count this branch' : r.exit],
    ['context', describeContext(e) + (e.directive ? ', told to try a different approach' : '')],
    ['best so far', state.best ? `${scoreText(state.best.score)} (${describeEpisodeId(state.best.episode)})` : 'none'],
  ];
  if (r.failure)
    rows.push([
      'failure',
      `${r.failure.kind}: ${inertCodeSpan(r.failure.quote)}${stopping ? `; ${inertOnGitHub(plainText(stopping.fix ?? GENERIC_FIX[stopping.kind]))}` : ''}`,
    ]);
  if (r.retries && r.retries.length > 0)
    rows.push([
      'retries',
      r.retries
        .map((t) => `${t.kind} ${inertCodeSpan(t.quote)} (waited ${formatNumber(t.waitedSeconds, 1)} s)`)
        .join('; '),
    ]);
  if (r.usage)
    rows.push(['usage', usageText(r.usage) + (r.usage.pricedFrom ? ` (${inertCodeSpan(r.usage.pricedFrom)})` : '')]);
  rows.push(['wall time', `${formatNumber(r.wallSeconds, 1)} s (agent ${formatNumber(r.agentSeconds, 1)} s)`]);
  // The diff stat names the files the agent made.
  if (details?.diffStat) rows.push(['changes', inertCodeSpan(details.diffStat)]);
  if (r.note) rows.push(['note', inertCodeSpan(r.note)]);
  const summary = markdownTable(['', ''], rows);
  // Each line indented into a code block; the journal is the agent's, read from a commit.
  const journal = details?.journalTail.map((l) => `    ${inertOnGitHub(plainText(l))}`) ?? [];
  const text = journal.length > 0 ? `Latest journal entries (${c.journal}):\n\n${journal.join('\n')}` : '';
  const output = { title, summary: clip(summary, CHECK_OUTPUT_MAX_BYTES), text: clip(text, CHECK_OUTPUT_MAX_BYTES) };
  const annotations = protectedAnnotations(r);
  return annotations.length > 0 ? { ...output, annotations } : output;
}

export interface CheckAnnotation {
  path: string;
  start_line: number;
  end_line: number;
  annotation_level: 'failure';
  title: string;
  message: string;
}

/**
 * One annotation per protected path the agent changed, on the file's first line: the commit holds
 * the base's version (forkflush restored it), and the annotation says why the branch has no score.
 */
function protectedAnnotations(r: EpisodeResult): CheckAnnotation[] {
  return r.protectedChanged.slice(0, GITHUB_ANNOTATIONS_MAX).map((path) => ({
    path: plainText(path).slice(0, 1000),
    start_line: 1,
    end_line: 1,
    annotation_level: 'failure',
    title: 'protected path changed',
    message:
      'The agent changed this protected path (grader.protected). forkflush restored it before grading, and the episode got no score.',
  }));
}

const utf8 = new TextEncoder();

/**
 * Text that fits in `maxBytes` of UTF-8, cut on a character's boundary with a marker: agent text
 * could be any length, and a body GitHub refuses would fail the whole step.
 */
export function clip(text: string, maxBytes: number): string {
  if (utf8.encode(text).length <= maxBytes) return text;
  const cut = '\n... (cut by forkflush)';
  let budget = maxBytes - utf8.encode(cut).length;
  let end = 0;
  for (const ch of text) {
    // A lone surrogate is sent as U+FFFD: 3 bytes, as any other code point below U+10000.
    const cp = ch.codePointAt(0) as number;
    const bytes = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (bytes > budget) break;
    budget -= bytes;
    end += ch.length;
  }
  return `${text.slice(0, end)}${cut}`;
}

/**
 * The conclusion of an episode's check run: success with a score, neutral without one; failure
 * when protected paths were changed, the episode's setup failed or its agent failed in a way that
 * stops the run (something to fix).
 */
export function checkConclusion(r: EpisodeResult): 'success' | 'neutral' | 'failure' {
  if (r.protectedChanged.length > 0 || setupFailed({ result: r }) || stoppingFailure(r)) return 'failure';
  return r.score === null ? 'neutral' : 'success';
}

export function episodePrTitle(state: RunState, e: Episode, r: EpisodeResult): string {
  return `forkflush ${state.id} ${e.id}: ${r.score === null ? 'no score' : `score ${scoreText(r.score)}`}`;
}

export function episodePrBody(state: RunState, e: Episode, r: EpisodeResult): string {
  const body = [
    `Episode ${e.id} of run \`${state.id}\`, round ${e.round} (${state.rounds[e.round]?.phase ?? ''}), ${describeContext(e)}.`,
    '',
    setupFailed({ result: r })
      ? `The agent did not run: ${inertCodeSpan(r.reason ?? 'setup failed')}.`
      : r.score === null
        ? `No score: ${inertCodeSpan(r.reason ?? 'unknown')}.`
        : `Score: **${scoreText(r.score)}** (${state.config.grader.direction}).`,
    `Spent ${formatNumber(r.spent, 2)} of ${formatNumber(e.allowance, 2)} ${state.config.budget.unit}; ended: ${r.exit}.`,
    '',
    'forkflush merges the best branch of each round into the lineage and closes the others.',
  ];
  return clip(body.join('\n'), BODY_MAX_CHARS);
}

export function loserComment(state: RunState, e: Episode, winner: Episode | null): string {
  const mine = scoreText(e.result?.score);
  if (setupFailed(e)) {
    const why = inertCodeSpan(e.result?.reason ?? 'setup failed');
    return clip(`Not adopted: this branch's setup failed, so its agent never ran (${why}).`, BODY_MAX_CHARS);
  }
  const round = state.rounds.find((r) => r.index === e.round);
  if (round?.decision?.voided)
    return clip(`Not adopted: round ${e.round} is ${round.decision.voided}.`, BODY_MAX_CHARS);
  if (!winner) return `Not adopted: no branch of round ${e.round} had a score (this one: ${mine}).`;
  return `Not adopted: this branch scored ${mine}; the winner of round ${e.round}, ${winner.id}, scored ${scoreText(winner.result?.score)} (${state.config.grader.direction}).`;
}

export type Command = 'status' | 'stop' | 'resume' | 'fork' | 'start' | 'map';
export const COMMANDS: readonly Command[] = ['status', 'stop', 'resume', 'fork', 'start', 'map'];

/** The most of a person's words a fork round passes on to its branches (`/autoresearch fork <what>`, a review). */
export const FORK_ASK_MAX_CHARS = 4000;

/**
 * The command in a comment (`/autoresearch fork`), or an error that says what is wrong with it, or
 * null (no line starts with `/autoresearch`). The prefix and the word may be in any case, and
 * invisible characters pasted with them (a zero-width space from a chat) are dropped. `start` may
 * carry overrides (`/autoresearch start budget=50 branches=2`): its `args`; `fork` what its round's
 * branches are to try, on its line or the lines below (`/autoresearch fork try a tabu search`, to
 * the comment's end, at most FORK_ASK_MAX_CHARS). The others take nothing after them.
 */
export function parseCommand(body: string): { command: Command; args?: string } | { error: string } | null {
  const text = body.replace(PASTED_INVISIBLE, '');
  const line = /^[ \t]*\/autoresearch(?=\s|$)[ \t]*(.*)$/im.exec(text);
  if (!line) return null;
  const [word = 'status', ...rest] = (line[1] ?? '').trim().split(/\s+/).filter(Boolean);
  const command = word.toLowerCase();
  if (command === 'start' && rest.length > 0) return { command: 'start', args: rest.join(' ') };
  if (command === 'fork') {
    // The rest of its line after the word, and the lines below it.
    const own = (line[1] ?? '').trim().slice(word.length);
    const below = text.slice((line.index ?? 0) + line[0].length);
    const ask = `${own}${below}`.trim().slice(0, FORK_ASK_MAX_CHARS);
    return ask ? { command: 'fork', args: ask } : { command: 'fork' };
  }
  if (!(COMMANDS as readonly string[]).includes(command)) {
    // A look-alike letter (a Cyrillic о) reads as the word it mimics: say which character it is.
    const odd = [...word].find((c) => !/^[\x21-\x7e]$/.test(c));
    const code = `U+${(odd?.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
    const why = odd ? ` (it holds ${code}, which only looks like a plain letter)` : '';
    return {
      error: `unknown command \`${word.slice(0, 40)}\`${why}: use ${COMMANDS.map((c) => `\`/autoresearch ${c}\``).join(', ')}`,
    };
  }
  if (rest.length > 0)
    return {
      error: `\`/autoresearch ${command}\` takes nothing after it (got \`${rest.join(' ').slice(0, 40)}\`): write it alone on its line`,
    };
  return { command: command as Command };
}

/**
 * Characters a paste carries that show as nothing (zero-width spaces and joiners, the BOM, the
 * soft hyphen), where they touch a space or a line's ends: inside a word they may be its language's
 * (a Persian zero-width non-joiner) or an emoji's (a zero-width joiner).
 */
const INVISIBLE = '[\\u00ad\\u200b-\\u200f\\u2060-\\u2064\\ufeff]+';
const PASTED_INVISIBLE = new RegExp(`(?<=^|\\s|/autoresearch)${INVISIBLE}|${INVISIBLE}(?=\\s|$)`, 'gmi');

/**
 * Why a repository's own pull_request and push workflows should skip forkflush's branches: the
 * app's token opens and moves them, and unlike GITHUB_TOKEN's, those events run workflows, with
 * the repository's secrets, on code an agent wrote.
 */
export const PRIVILEGED_CI_NOTE =
  "forkflush's branches hold code an agent wrote, and the app's pull requests and pushes start this repository's `pull_request` and `push` workflows with its secrets: add `branches-ignore: ['forkflush/**']` to them, or gate them with an environment that needs a reviewer (README, \"Agent code and your CI\").";
