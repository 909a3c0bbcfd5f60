// The state of one run, as the core sees it. Adapters persist it (a run folder locally, refs and
// check runs on GitHub); the core only reads it and returns a new one.
import type { Config } from './config.js';
import type { AgentFailure, TransientFailure } from './failure.js';
import type { Resource } from './resources.js';

/** How an episode's chat context begins (../shared/docs/method.md, "Definitions"). */
/** Where a charge comes from: counted or reported; an estimate; nothing, by the quick-failure rule. */
export type SpentBasis = 'measured' | 'estimated' | 'none';

export type ContextMode = 'fresh' | 'carry' | 'copy';
export type ExitReason = 'finished' | 'budget' | 'timeout' | 'crash';
/**
 * How an episode ended: as its agent did (ExitReason), or `setup`: the workspace could not be
 * prepared (setup: failed, or on GitHub the agent's CLI could not be installed), so the agent
 * never ran. A setup result spends nothing, has no score, and is never adopted.
 */
export type EpisodeExit = ExitReason | 'setup';
export const EPISODE_EXITS = [
  'finished',
  'budget',
  'timeout',
  'crash',
  'setup',
] as const satisfies readonly EpisodeExit[];
export type RoundKind = 'fork' | 'serial';

/** What an agent session used, where the agent reports it. */
export interface AgentUsage {
  inputTokens: number;
  outputTokens: number;
  /** Dollars: as the agent reported them, or priced from forkflush's table (see `pricedFrom`). */
  costUsd: number | null;
  turns: number | null;
  /** Set when the cost was computed from token counts: the model and prices used. */
  pricedFrom?: string;
}

export interface EpisodeResult {
  /** The commit that holds the graded workspace. */
  commit: string;
  /** The grader's score, or null when the episode has none (see `reason`). */
  score: number | null;
  reason?: string;
  /** What the agent actually spent, in the budget's unit. */
  spent: number;
  /** `setup`: the episode's setup failed and the agent never ran (`reason` says what failed). */
  exit: EpisodeExit;
  /** Protected paths the agent changed (restored before grading; the score is void). */
  protectedChanged: string[];
  agentSeconds: number;
  graderSeconds: number;
  /** Something the user should know about the episode (e.g. how its spend was estimated). */
  note?: string;
  /** Tokens, cost and turns, where the agent reports them. */
  usage?: AgentUsage;
  /** Seconds from the episode's start to its commit. */
  wallSeconds: number;
  /** How the agent and the grader were confined: "bubblewrap 0.8.0", or "off (why)". */
  sandbox?: string;
  /** On a forge: how the context the episode left is kept (encrypted, as plain files, or not at all). */
  contextStore?: 'encrypted' | 'plain' | 'none';
  /**
   * Why the agent could not start at all (not found, not executable). Written by earlier releases,
   * read as a `cli` failure (core/stop.ts); results now say so in `failure`.
   */
  agentNotStarted?: string;
  /**
   * The machine (not this branch's own limits) ran out of this while the judge graded it, on
   * both tries (core/resources.ts): no score, and its fork round is void rather than ranked.
   */
  machineShort?: Resource;
  /**
   * Why the agent failed, where that is known (core/failure.ts): a permanent kind, or a transient
   * one still failing after its tries (AGENT_TRIES), stops the run (core/stop.ts); `crash` is a
   * crash nobody recognised, which stops it only when crashes repeat.
   */
  failure?: RecordedFailure;
  /** The tries before the last one, each failed in a way that passes and waited for. */
  retries?: Retry[];
  /** The agent left the workspace as it found it: the snapshot's tree is the base's. */
  unchanged?: true;
  /** How `spent` is known when it is not measured (core/charge.ts): an estimate, or nothing charged. */
  spentBasis?: Exclude<SpentBasis, 'measured'>;
  /**
   * On GitHub, what the attempts of a re-run job before this one may have spent, an estimate
   * (core/charge.ts withEarlierAttempts): charged with the episode, apart from what its agent spent.
   */
  earlierSpent?: number;
}

/** An agent's failure as a result records it (the provider's wait is the worker's business). */
export type RecordedFailure = Omit<AgentFailure, 'retryAfterMs'>;

/** A try of an episode that failed in a way that passes, and the wait before the next one. */
export interface Retry {
  kind: TransientFailure;
  quote: string;
  waitedSeconds: number;
}

export interface Episode {
  /** `r<round>.b<branch>`: unique in a run. */
  id: string;
  round: number;
  branch: number;
  lineage: number;
  /** The commit the episode starts from. */
  base: string;
  allowance: number;
  context: ContextMode;
  /** The episode whose context this one carries or copies. */
  contextFrom: string | null;
  directive: boolean;
  /** What a person asked this fork round's branches to try (`/autoresearch fork <what>`, a review). */
  asked?: string;
  seed: number;
  result?: EpisodeResult;
  /** What earlier, interrupted or stopped attempts at this episode spent: charged too. */
  interruptedSpent?: number;
  /** Times it was started and forkflush never saw it end (it was killed): core/attempts.ts. */
  unfinishedStarts?: number;
  /** Of those, the ones settled on a resume: charged their allowance each (core/attempts.ts chargeKilledStarts). */
  killedStarts?: number;
  /** `interruptedSpent` is (partly) an estimate: an attempt whose agent reported no usage. */
  interruptedBasis?: 'estimated';
}

export interface Decision {
  /** The winning episode of a fork round (null: no branch had a score, the leader goes on unchanged). */
  winner: string | null;
  /** Episodes whose workspace became a lineage head. */
  adopted: string[];
  /** Why the round was not ranked (a branch's judge starved by the machine): no winner, nothing adopted. */
  voided?: string;
}

export interface Round {
  index: number;
  /** Which stretch of the schedule: 0 until the first fork point, 1 until the second, ... */
  segment: number;
  /** Human name of the phase: opening, solo 1, fork 1, ..., final. */
  phase: string;
  kind: RoundKind;
  episodes: Episode[];
  decision?: Decision;
  /** A fork round asked for beyond the schedule (a `fork` command, a nightly round). */
  extra?: boolean;
  /** With `fork.losers: journal`, once decided: what each losing branch added to its journal (core/losers.ts). */
  losers?: LoserNotes[];
}

/** What a losing branch of a fork round added to its journal since the fork point, bounded and cleaned. */
export interface LoserNotes {
  episode: string;
  /** Its last entries, oldest first, each one line. */
  entries: string[];
  /** Entries before those, left out. */
  earlier: number;
}

export interface Lineage {
  index: number;
  head: string;
  /** The episode whose context the leader carries on with (null: the next episode starts fresh). */
  context: string | null;
}

export interface Best {
  /** Episode id, or "base" for the initial workspace. */
  episode: string;
  commit: string;
  score: number;
}

export interface RunState {
  version: 1;
  id: string;
  seed: number;
  config: Config;
  /** The initial workspace and its grade (graderSeconds: how long grading it took). */
  base: { commit: string; score: number | null; reason?: string; graderSeconds?: number };
  lineages: Lineage[];
  rounds: Round[];
  best: Best | null;
  status: 'running' | 'finished';
  /** Fork rounds asked for beyond the schedule; each runs once, on top of the budget. */
  extraForks?: number;
  /** What each asked-for fork round is to try, by its number among them (1 for the first), when said. */
  forkAsks?: Record<string, string>;
}

export function newRunState(args: {
  id: string;
  seed: number;
  config: Config;
  baseCommit: string;
  baseScore: number | null;
  baseReason?: string;
  baseGraderSeconds?: number;
}): RunState {
  const lineageCount = args.config.strategy === 'best-of-n' ? args.config.fork.branches : 1;
  const { id, seed, config, baseCommit, baseScore, baseReason, baseGraderSeconds } = args;
  return {
    version: 1,
    id,
    seed,
    config,
    base: {
      commit: baseCommit,
      score: baseScore,
      ...(baseReason ? { reason: baseReason } : {}),
      ...(baseGraderSeconds !== undefined ? { graderSeconds: baseGraderSeconds } : {}),
    },
    lineages: Array.from({ length: lineageCount }, (_, index) => ({ index, head: baseCommit, context: null })),
    rounds: [],
    best: baseScore === null ? null : { episode: 'base', commit: baseCommit, score: baseScore },
    status: 'running',
  };
}

export function episodeId(round: number, branch: number): string {
  return `r${round}.b${branch}`;
}

export function allEpisodes(state: RunState): Episode[] {
  return state.rounds.flatMap((r) => r.episodes);
}

export function findEpisode(state: RunState, id: string): Episode | undefined {
  return allEpisodes(state).find((e) => e.id === id);
}

/** Is score a better than score b under the direction? */
export function isBetter(a: number, b: number, direction: Config['grader']['direction']): boolean {
  return direction === 'maximize' ? a > b : a < b;
}

/** Whether the episode's setup failed, so its agent never ran: a branch that did not try. */
export function setupFailed(e: Pick<Episode, 'result'>): boolean {
  return e.result?.exit === 'setup';
}

/**
 * The result of an episode that produced none: its job failed or never reported. Its workspace is
 * the base it started from (unchanged: such failures in a row stop the run, core/stop.ts
 * crashedRun), and it is charged its whole allowance, as an estimate, since what it spent is unknown.
 */
export function failedResult(e: Episode, reason: string): EpisodeResult {
  return {
    commit: e.base,
    score: null,
    reason,
    spent: e.allowance,
    exit: 'crash',
    protectedChanged: [],
    agentSeconds: 0,
    graderSeconds: 0,
    wallSeconds: 0,
    spentBasis: 'estimated',
    unchanged: true,
  };
}

/** Whether a result is one `failedResult` made: the episode's job gave none. */
export function gaveNoResult(r: EpisodeResult | undefined): r is EpisodeResult {
  return r?.exit === 'crash' && r.spentBasis === 'estimated' && r.wallSeconds === 0 && r.agentSeconds === 0;
}
