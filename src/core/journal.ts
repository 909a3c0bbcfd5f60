// What the worker writes down after each episode: a journal line for the agents that come next,
// and commit trailers that make the commit itself the record of the episode's result.
import type { Config, Unit } from './config.js';
import type { AgentUsage, Episode, EpisodeResult, ExitReason } from './state.js';
import { formatNumber } from './text.js';

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
} as const;

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
  r: Omit<EpisodeResult, 'commit'>,
  details?: EpisodeDetails,
): string {
  const score = r.score === null ? 'no score' : `score ${formatNumber(r.score, 6)}`;
  const body = details
    ? [
        `Changes: ${oneLine(details.diffStat) || 'none'}`,
        ...(details.journalTail.length > 0 ? ['Journal:', ...details.journalTail.map((l) => `  ${oneLine(l)}`)] : []),
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
    ...(r.reason ? [`${TRAILERS.reason}: ${oneLine(r.reason)}`] : []),
    `${TRAILERS.spent}: ${r.spent}`,
    ...(unit ? [`${TRAILERS.unit}: ${unit}`] : []),
    `${TRAILERS.exit}: ${r.exit}`,
    ...(r.protectedChanged.length > 0 ? [`${TRAILERS.protectedChanged}: ${r.protectedChanged.join(', ')}`] : []),
    ...(r.note ? [`${TRAILERS.note}: ${oneLine(r.note)}`] : []),
    ...(r.usage ? [`${TRAILERS.usage}: ${JSON.stringify(r.usage)}`] : []),
    ...(r.sandbox ? [`${TRAILERS.sandbox}: ${oneLine(r.sandbox)}`] : []),
    ...(r.contextStore ? [`${TRAILERS.contextStore}: ${r.contextStore}`] : []),
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
): { result: EpisodeResult } | { problem: string } {
  const short = commit.sha.slice(0, 7);
  const parsed = parseCommitMessage(commit.message, commit.sha);
  if (!parsed || parsed.runId !== runId || parsed.episode !== e.id) {
    return { problem: `its branch moved to ${short}, which is not a result of this episode` };
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
): { runId: string; episode: string; result: EpisodeResult } | null {
  const fields = new Map<string, string>();
  for (const line of message.split('\n')) {
    const m = /^(Forkflush-[A-Za-z-]+): (.*)$/.exec(line);
    if (m) fields.set(m[1] as string, (m[2] as string).trim());
  }
  const runId = fields.get(TRAILERS.run);
  const episode = fields.get(TRAILERS.episode);
  const spent = Number(fields.get(TRAILERS.spent));
  const exit = fields.get(TRAILERS.exit) as ExitReason | undefined;
  const scoreText = fields.get(TRAILERS.score);
  if (!runId || !episode || !Number.isFinite(spent) || !exit || scoreText === undefined) return null;
  const score = scoreText === 'none' ? null : Number(scoreText);
  const [wall = 0, agent = 0, grader = 0] = (fields.get(TRAILERS.seconds) ?? '').split(' ').map(Number);
  const reason = fields.get(TRAILERS.reason);
  const changed = fields.get(TRAILERS.protectedChanged);
  const note = fields.get(TRAILERS.note);
  const usage = parseUsage(fields.get(TRAILERS.usage));
  const sandbox = fields.get(TRAILERS.sandbox);
  const store = fields.get(TRAILERS.contextStore);
  const contextStore = store === 'encrypted' || store === 'plain' || store === 'none' ? store : undefined;
  return {
    runId,
    episode,
    result: {
      commit,
      score: score !== null && Number.isFinite(score) ? score : null,
      ...(reason ? { reason } : {}),
      ...(note ? { note } : {}),
      ...(usage ? { usage } : {}),
      spent,
      exit,
      protectedChanged: changed ? changed.split(', ') : [],
      wallSeconds: wall,
      agentSeconds: agent,
      graderSeconds: grader,
      ...(sandbox ? { sandbox } : {}),
      ...(contextStore ? { contextStore } : {}),
    },
  };
}

function parseUsage(text: string | undefined): AgentUsage | undefined {
  if (!text) return undefined;
  try {
    const u = JSON.parse(text) as AgentUsage;
    return typeof u.inputTokens === 'number' && typeof u.outputTokens === 'number' ? u : undefined;
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
