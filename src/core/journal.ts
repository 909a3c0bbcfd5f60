// What the worker writes down after each episode: a journal line for the agents that come next,
// and commit trailers that make the commit itself the record of the episode's result.

import { FAILURE_QUOTE_MAX_CHARS } from './bounds.js';
import type { Config, Unit } from './config.js';
import { validFailure, validRetries, validUsage } from './records.js';
import { RESOURCES } from './resources.js';
import {
  type AgentUsage,
  EPISODE_EXITS,
  type Episode,
  type EpisodeExit,
  type EpisodeResult,
  type RecordedFailure,
} from './state.js';
import { cutText, formatNumber, inertOnGitHub, plainText, withoutWordJoiners } from './text.js';

export function describeContext(e: Episode): string {
  if (e.context === 'fresh') return 'fresh context';
  return e.context === 'carry' ? `context carried from ${e.contextFrom}` : `copy of ${e.contextFrom}'s context`;
}

/** One journal entry, appended to the journal after the agent's own notes. */
export function journalEntry(config: Config, phase: string, e: Episode, r: EpisodeResult): string {
  const score = r.score === null ? `no score (${r.reason ?? 'unknown'})` : `score ${formatNumber(r.score, 6)}`;
  const spent = `spent ${formatNumber(r.spent)} of ${formatNumber(e.allowance)} ${config.budget.unit}`;
  const extra = e.directive ? ', told to try a different approach' : '';
  return `- forkflush ${e.id} (${phase}, ${describeContext(e)}${extra}): ${score}; ${spent}; ended: ${r.exit}.`;
}

export function appendToJournal(existing: string, entry: string): string {
  const header = existing.trim() === '' ? '# Journal\n\n' : '';
  const sep = existing === '' || existing.endsWith('\n') ? '' : '\n';
  return `${header}${existing}${sep}${entry}\n`;
}

const TRAILERS = {
  run: 'Forkflush-Run',
  episode: 'Forkflush-Episode',
  score: 'Forkflush-Score',
  reason: 'Forkflush-Score-Reason',
  spent: 'Forkflush-Spent',
  unit: 'Forkflush-Unit',
  exit: 'Forkflush-Exit',
  protectedChanged: 'Forkflush-Protected-Changed',
  seconds: 'Forkflush-Seconds',
  note: 'Forkflush-Note',
  usage: 'Forkflush-Usage',
  sandbox: 'Forkflush-Sandbox',
  contextStore: 'Forkflush-Context',
  machineShort: 'Forkflush-Machine-Short',
  failure: 'Forkflush-Failure',
  retries: 'Forkflush-Retries',
  unchanged: 'Forkflush-Unchanged',
  spentBasis: 'Forkflush-Spent-Basis',
  earlierSpent: 'Forkflush-Earlier-Spent',
} as const;

/** The seal's trailer (worker/seal.ts writes and checks it). */
export const SEAL_TRAILER = 'Forkflush-Seal';

/** Every trailer this forkflush reads: another one comes from a newer worker. */
const KNOWN_TRAILERS = new Set<string>([...Object.values(TRAILERS), SEAL_TRAILER]);

/** The most an episode's result keeps of what its agent (or grader) wrote: see boundedResult. */
const BOUNDS = { text: 1000, paths: 50, path: 300, name: 200, retries: 10 };

/**
 * An episode's result with the fields an agent can fill cut to a size that fits everywhere they
 * are shown (a commit, a check run, an issue comment, a terminal): the reason and the note to
 * 1000 characters, the usage's strings (what the cost was priced from) to 200, a failure's quote
 * to 300 and its fix to 1000, the first 10 retries, all without control or bidi characters; the
 * protected paths to the first 50 of at most 300 characters each (the reason lists them all, cut,
 * and any one voids the score). The worker bounds each result it makes; the app each it reads
 * from a commit, which anyone with a token could have written. Idempotent. (Inert on GitHub only
 * where it is written there: a package name in a reason stays one a user can copy into a terminal.)
 */
export function boundedResult<
  T extends Pick<EpisodeResult, 'reason' | 'note' | 'usage' | 'protectedChanged' | 'failure' | 'retries'>,
>(r: T): T {
  return {
    ...r,
    ...(r.reason !== undefined ? { reason: boundedText(r.reason, BOUNDS.text) } : {}),
    ...(r.note !== undefined ? { note: boundedText(r.note, BOUNDS.text) } : {}),
    ...(r.usage ? { usage: boundedUsage(r.usage) } : {}),
    ...(r.failure ? { failure: boundedFailure(r.failure) } : {}),
    ...(r.retries
      ? {
          retries: r.retries
            .slice(0, BOUNDS.retries)
            .map((t) => ({ ...t, quote: boundedText(t.quote, FAILURE_QUOTE_MAX_CHARS) })),
        }
      : {}),
    protectedChanged: r.protectedChanged.slice(0, BOUNDS.paths).map((p) => cutText(p, BOUNDS.path)),
  };
}

function boundedFailure(f: RecordedFailure): RecordedFailure {
  return {
    kind: f.kind,
    quote: boundedText(f.quote, FAILURE_QUOTE_MAX_CHARS),
    ...(f.fix !== undefined ? { fix: boundedText(f.fix, BOUNDS.text) } : {}),
  };
}

/**
 * One line (what an agent or grader wrote may hold line breaks, and a line of its own reads as
 * forkflush's), cleaned before the cut, so that bounding it again changes nothing.
 */
function boundedText(text: string, max: number): string {
  return cutText(plainText(text).replace(/\s*\n\s*/g, ' '), max);
}

function boundedUsage(u: AgentUsage): AgentUsage {
  return u.pricedFrom === undefined ? u : { ...u, pricedFrom: boundedText(u.pricedFrom, BOUNDS.name) };
}

/** What changed in an episode and the end of its journal, recorded in the commit body. */
export interface EpisodeDetails {
  diffStat: string;
  journalTail: string[];
  /** The workflow run that made the commit (GitHub), for the check run's link. */
  workflowRunUrl?: string;
}

/**
 * The commit message that records an episode's result. `unit` is the run's budget unit; null from
 * a worker that could not read the run's config (its result is a setup failure that spent nothing).
 */
export function commitMessage(
  runId: string,
  unit: Unit | null,
  e: Pick<Episode, 'id'>,
  result: Omit<EpisodeResult, 'commit'>,
  details?: EpisodeDetails,
): string {
  // What an agent wrote is inert here: merged into the default branch, a commit's `fixes #12`
  // would close an issue, and its `@someone` would mention them.
  const r = boundedResult(result);
  const agentLine = (s: string) => inertOnGitHub(oneLine(plainText(s)));
  const score = r.score === null ? 'no score' : `score ${formatNumber(r.score, 6)}`;
  const body = details
    ? [
        `Changes: ${agentLine(details.diffStat) || 'none'}`,
        ...(details.journalTail.length > 0 ? ['Journal:', ...details.journalTail.map((l) => `  ${agentLine(l)}`)] : []),
        ...(details.workflowRunUrl ? [`Workflow run: ${oneLine(details.workflowRunUrl)}`] : []),
        '',
      ]
    : [];
  const lines = [
    `forkflush ${e.id}: ${score}, spent ${formatNumber(r.spent)}${unit ? ` ${unit}` : ''}`,
    '',
    ...body,
    `${TRAILERS.run}: ${runId}`,
    `${TRAILERS.episode}: ${e.id}`,
    `${TRAILERS.score}: ${r.score === null ? 'none' : String(r.score)}`,
    ...(r.reason ? [`${TRAILERS.reason}: ${agentLine(r.reason)}`] : []),
    `${TRAILERS.spent}: ${r.spent}`,
    ...(unit ? [`${TRAILERS.unit}: ${unit}`] : []),
    `${TRAILERS.exit}: ${r.exit}`,
    ...(r.protectedChanged.length > 0
      ? [`${TRAILERS.protectedChanged}: ${r.protectedChanged.map(agentLine).join(', ')}`]
      : []),
    ...(r.note ? [`${TRAILERS.note}: ${agentLine(r.note)}`] : []),
    ...(r.usage ? [`${TRAILERS.usage}: ${inertOnGitHub(JSON.stringify(r.usage))}`] : []),
    ...(r.sandbox ? [`${TRAILERS.sandbox}: ${oneLine(r.sandbox)}`] : []),
    ...(r.contextStore ? [`${TRAILERS.contextStore}: ${r.contextStore}`] : []),
    ...(r.machineShort ? [`${TRAILERS.machineShort}: ${r.machineShort}`] : []),
    ...(r.failure ? [`${TRAILERS.failure}: ${inertOnGitHub(JSON.stringify(r.failure))}`] : []),
    ...(r.retries && r.retries.length > 0 ? [`${TRAILERS.retries}: ${inertOnGitHub(JSON.stringify(r.retries))}`] : []),
    ...(r.unchanged ? [`${TRAILERS.unchanged}: yes`] : []),
    ...(r.spentBasis ? [`${TRAILERS.spentBasis}: ${r.spentBasis}`] : []),
    ...(r.earlierSpent ? [`${TRAILERS.earlierSpent}: ${r.earlierSpent}`] : []),
    `${TRAILERS.seconds}: ${[r.wallSeconds, r.agentSeconds, r.graderSeconds].map((s) => s.toFixed(3)).join(' ')}`,
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * An episode's result read back from a commit (a branch head after a crash, a job's push, a
 * result that landed on GitHub), or why the commit is not one: forkflush commits every result on
 * the episode's base, with trailers naming the run and the episode. The shells add their own
 * provenance checks (the seal locally and in the Action, protected paths on GitHub).
 */
export function resultFromCommit(
  runId: string,
  e: Pick<Episode, 'id' | 'base'>,
  commit: { sha: string; message: string; parents: string[] },
  unit?: string,
): { result: EpisodeResult } | { problem: string } {
  const short = commit.sha.slice(0, 7);
  const parsed = parseCommitMessage(commit.message, commit.sha);
  if (!parsed || parsed.runId !== runId || parsed.episode !== e.id) {
    return { problem: `its branch moved to ${short}, which is not a result of this episode` };
  }
  // A spend in another unit (a worker of another release, or of another config) is no spend of this run's.
  if (unit !== undefined && parsed.unit !== undefined && parsed.unit !== unit) {
    return {
      problem: `its result ${short} counts its spend in ${parsed.unit}, the run in ${unit}: a worker of another release or config wrote it`,
    };
  }
  if (commit.parents.length !== 1 || commit.parents[0] !== e.base) {
    return {
      problem: `its commit ${short} is not on the episode's base ${e.base.slice(0, 7)}: forkflush commits every result there`,
    };
  }
  return { result: parsed.result };
}

/** Reads an episode's result back from its commit message (null if it is not an episode commit). */
export function parseCommitMessage(
  message: string,
  commit: string,
): { runId: string; episode: string; unit?: string; result: EpisodeResult } | null {
  const fields = new Map<string, string>();
  for (const line of message.split('\n')) {
    const m = /^(Forkflush-[A-Za-z-]+): (.*)$/.exec(line);
    // Without the word joiners commitMessage put in to keep the text inert on GitHub.
    if (m) fields.set(m[1] as string, withoutWordJoiners(m[2] as string).trim());
  }
  const runId = fields.get(TRAILERS.run);
  const episode = fields.get(TRAILERS.episode);
  const spent = Number(fields.get(TRAILERS.spent));
  const exit = fields.get(TRAILERS.exit);
  const scoreText = fields.get(TRAILERS.score);
  const known = (EPISODE_EXITS as readonly string[]).includes(exit ?? '');
  // A newer worker's result (a trailer or an exit word this forkflush does not know): read as far
  // as it can be, and said; an exit not known is no score (what it means is not known here).
  const exitWord = known || /^[a-z][a-z-]{0,30}$/.test(exit ?? '');
  if (!runId || !episode || !Number.isFinite(spent) || spent < 0 || !exit || !exitWord || scoreText === undefined)
    return null;
  const unknown = [...fields.keys()].filter((k) => !KNOWN_TRAILERS.has(k));
  if (!known) unknown.push(`${TRAILERS.exit}: ${exit}`);
  const newer =
    unknown.length > 0
      ? `this result holds ${unknown.join(', ')}, which this forkflush does not read: a newer forkflush worker wrote it; update the app to the worker's release`
      : undefined;
  const score = known && scoreText !== 'none' ? Number(scoreText) : null;
  const [wall = 0, agent = 0, grader = 0] = (fields.get(TRAILERS.seconds) ?? '')
    .split(' ')
    .map((t) => (Number.isFinite(Number(t)) && Number(t) >= 0 ? Number(t) : 0));
  const reason = known ? fields.get(TRAILERS.reason) : newer;
  const changed = fields.get(TRAILERS.protectedChanged);
  const note = [fields.get(TRAILERS.note), known ? newer : undefined].filter(Boolean).join('; ');
  const usage = parseUsage(fields.get(TRAILERS.usage));
  const sandbox = fields.get(TRAILERS.sandbox);
  const store = fields.get(TRAILERS.contextStore);
  const contextStore = store === 'encrypted' || store === 'plain' || store === 'none' ? store : undefined;
  const short = fields.get(TRAILERS.machineShort);
  const machineShort = RESOURCES.find((r) => r === short);
  const failure = parseJson(fields.get(TRAILERS.failure), validFailure);
  const retries = parseJson(fields.get(TRAILERS.retries), validRetries);
  const basis = fields.get(TRAILERS.spentBasis);
  const spentBasis = basis === 'estimated' || basis === 'none' ? basis : undefined;
  const earlierSpent = Number(fields.get(TRAILERS.earlierSpent));
  const unit = fields.get(TRAILERS.unit);
  return {
    runId,
    episode,
    ...(unit ? { unit } : {}),
    // A commit's trailers may be any size: the app bounds them as the worker did.
    result: boundedResult({
      commit,
      score: score !== null && Number.isFinite(score) ? score : null,
      ...(reason ? { reason } : {}),
      ...(note ? { note } : {}),
      ...(usage ? { usage } : {}),
      spent,
      exit: known ? (exit as EpisodeExit) : 'crash',
      protectedChanged: changed ? changed.split(', ') : [],
      wallSeconds: wall,
      agentSeconds: agent,
      graderSeconds: grader,
      ...(sandbox ? { sandbox } : {}),
      ...(contextStore ? { contextStore } : {}),
      ...(machineShort ? { machineShort } : {}),
      ...(failure ? { failure } : {}),
      ...(retries && retries.length > 0 ? { retries } : {}),
      ...(fields.get(TRAILERS.unchanged) === 'yes' ? { unchanged: true as const } : {}),
      ...(spentBasis ? { spentBasis } : {}),
      ...(Number.isFinite(earlierSpent) && earlierSpent > 0 ? { earlierSpent } : {}),
    }),
  };
}

function parseUsage(text: string | undefined): AgentUsage | undefined {
  return parseJson(text, validUsage);
}

/** A trailer's JSON, checked against the record's schema (`valid`), or undefined. */
function parseJson<T>(text: string | undefined, valid: (v: unknown) => T | null): T | undefined {
  if (!text) return undefined;
  try {
    return valid(JSON.parse(text)) ?? undefined;
  } catch {
    return undefined;
  }
}

/** The details part of an episode's commit message (null when it has none). */
export function parseCommitDetails(message: string): EpisodeDetails | null {
  const lines = message.split('\n');
  const changes = lines.find((l) => l.startsWith('Changes: '));
  if (changes === undefined) return null;
  const start = lines.indexOf('Journal:');
  const journalTail: string[] = [];
  for (let i = start + 1; start >= 0 && i < lines.length && (lines[i] ?? '').startsWith('  '); i++) {
    journalTail.push((lines[i] as string).slice(2));
  }
  const diffStat = changes.slice('Changes: '.length);
  const run = lines.find((l) => l.startsWith('Workflow run: '))?.slice('Workflow run: '.length);
  return { diffStat: diffStat === 'none' ? '' : diffStat, journalTail, ...(run ? { workflowRunUrl: run } : {}) };
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}
