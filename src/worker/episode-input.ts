import type { AgentAdapter } from '../agents/agent.js';
import type { Config } from '../core/config.js';
import type { Episode, EpisodeResult } from '../core/state.js';
import type { EpisodePlaces, Isolation } from './boundary.js';
import type { OwnRepo } from './cleanroom.js';
import type { JudgeMachine } from './grade.js';
import type { SetupCache } from './setup.js';

export interface EpisodeJob {
  runId: string;
  /** The job's workflow run on the web, recorded in the commit for the check run to link (GitHub). */
  workflowRunUrl?: string;
  config: Config;
  episode: Episode;
  phase: string;
  /** forkflush's own git view of the repository the commit goes into. */
  own: OwnRepo;
  /** The workspace (checked out at `episode.base` by `checkoutInto`), context, box and private places. */
  places: EpisodePlaces;
  /** The index `checkoutInto` wrote for the workspace: the snapshot starts from it. */
  checkoutIndex: string;
  /** forkflush's private folder for the episode (the agent's log, the judge's copy); not in the box. */
  scratchDir: string;
  prompt: string;
  agent: AgentAdapter;
  isolation: Isolation;
  /** Extra paths to protect (e.g. the config file the run was started with). */
  alsoProtected?: string[];
  /** Notes for the result from whoever prepared the episode (a context that could not be opened). */
  notes?: string[];
  /**
   * On GitHub, the attempts of this job before this one (a "Re-run failed jobs"): each may have run
   * the agent and pushed nothing, so the result is charged for them too (core/charge.ts withEarlierAttempts).
   */
  earlierAttempts?: number;
  /** On a forge: how the context the episode leaves will be kept (recorded in the result). */
  contextStore?: EpisodeResult['contextStore'];
  /** Seals the result commit's message, so that a result read back later is known to be forkflush's. */
  sealKey?: Buffer;
  /** Aborts the episode (Ctrl-C); the episode is then left without a result. */
  signal?: AbortSignal;
  /** The environment the agent's and the grader's allowlists are taken from. */
  env?: NodeJS.ProcessEnv;
  /** The wait before a retry (tests: no real waiting); agent-tries.ts abortableSleep by default. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /**
   * Why the workspace could not be prepared before setup even ran (on GitHub: the agent's CLI
   * could not be installed): the episode ends as a setup result, its agent never started.
   */
  setupProblem?: string;
  /** Locally, with setup.cache: what setup made for a base, shared by the episodes of that base. */
  setupCache?: SetupCache;
  /**
   * With fork.losers: journal, the section of the branches that lost the fork round the episode's
   * base won (core/losers.ts sectionFor): appended to the journal before the agent runs.
   */
  journalSection?: string;
  /** One line per step of the episode's preparation (the Action's job log). */
  log?: (line: string) => void;
  /** What the user should see while the agent runs, not only once it ended (a model API that cannot be reached). */
  warn?: (line: string) => void;
  /**
   * Called once setup is done and just before the agent starts: a local run saves the start there
   * (core/attempts.ts), so that a forkflush killed in setup, before anything was spent, is charged nothing.
   */
  agentStarting?: () => Promise<void>;
  /**
   * Filled in with what the agent spent once it is known: a local run charges that when a later
   * step fails unforeseen (a disk turned read-only), not a killed start's whole allowance.
   */
  charged?: Charged;
  /** How the judge watches the machine while it grades (grade.ts MACHINE; tests bring their own). */
  judgeMachine?: JudgeMachine;
  /** The other episodes on this machine (a local run's): a judge that timed out while one ran is graded again alone. */
  sharedMachine?: SharedMachine;
}

/** The machine as the episodes of one local run share it (local/shared-machine.ts). */
export interface SharedMachine {
  /** Whether another episode was in flight at any time from now to the call of what it returns. */
  othersSince(): () => boolean;
  /** Runs `fn` once no other episode is in flight, none starting meanwhile; rejects if `signal` stops the wait. */
  alone<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T>;
}

/** What an episode's agent spent, once known (a full disk after that still charges it). */
export interface Charged {
  spent: number | null;
  /** The agent reported no usage: `spent` is estimated by the time it ran (core/charge.ts). */
  estimated?: boolean;
}
