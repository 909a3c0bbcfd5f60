// The agent port: an adapter runs one bounded session, fresh or from a saved context, and says what it
// spent. The worker owns the workspace, grading and commits.
import type { Unit } from '../core/config.js';
import type { AgentFailure } from '../core/failure.js';
import type { AgentUsage, ExitReason } from '../core/state.js';
import type { Spawner } from '../io/process.js';

export interface AgentSession {
  /** The workspace: the agent's working directory and only write target. */
  workdir: string;
  prompt: string;
  promptFile: string;
  /** Empty for a fresh episode; the previous episode's context when it is carried or copied. */
  contextDir: string;
  /** Where the agent reports `{"spent": N}` (command agents). */
  usageFile: string;
  /** Agent output goes here. */
  logFile: string;
  /** The command that runs the grader and counts an evaluation. */
  gradeCommand: string;
  allowance: number;
  unit: Unit;
  seed: number;
  episodeId: string;
  /** Hard stop after this many milliseconds; `deadlineIsBudget` says the budget itself is time. */
  deadlineMs: number;
  deadlineIsBudget: boolean;
  /** The basics, the adapter's `passEnv` and agent.env (never a forge token); HOME and TMPDIR its own. */
  env: NodeJS.ProcessEnv;
  /** Aborts the session: reason "budget" (evaluations used up) or "interrupted". */
  signal: AbortSignal;
  /** Starts the agent's process (in the sandbox, if any); on return every process of it is gone. */
  spawn: Spawner;
  /** Whether `spawn` confines the session in forkflush's sandbox (an agent's own sandbox then stays off). */
  confined: boolean;
  /**
   * The keys forkflush's egress proxy holds for the session: masked in what is recorded of it (its
   * log, its words, its failure), should an upstream echo one past the proxy's mask.
   */
  keys?: string[];
}

export interface AgentOutcome {
  exit: ExitReason;
  /** Spend the agent reports, in the budget's unit (tokens and usd only). */
  reportedSpend: number | null;
  /** What the session used, where the agent tells (tokens in and out, cost, turns). */
  usage?: AgentUsage;
  /** Something the user should know, e.g. why the spend was estimated. */
  note?: string;
  seconds: number;
  /** Why it failed, where recognised (core/failure.ts): the worker retries a transient one. */
  failure?: AgentFailure;
  /** The last line of its final message, after a clean end: what it said when it changed nothing. */
  lastWords?: string;
}

export interface AgentAdapter {
  readonly kind: string;
  /** Environment variables the CLI needs (its keys, endpoints, switches): names, or prefixes with *. */
  readonly passEnv: readonly string[];
  /** Why the CLI surely cannot log in with this environment, saying how to; null when it can or cannot be told. */
  missingLogin(env: NodeJS.ProcessEnv): string | null;
  run(session: AgentSession): Promise<AgentOutcome>;
}

/** The variables of forkflush's agent contract, the same for every adapter (README, "The command agent"). */
const CONTRACT: Record<string, (s: AgentSession) => string> = {
  FORKFLUSH_PROMPT_FILE: (s) => s.promptFile,
  FORKFLUSH_CONTEXT_DIR: (s) => s.contextDir,
  FORKFLUSH_BUDGET: (s) => String(s.allowance),
  FORKFLUSH_BUDGET_UNIT: (s) => s.unit,
  FORKFLUSH_USAGE_FILE: (s) => s.usageFile,
  FORKFLUSH_GRADE: (s) => s.gradeCommand,
  FORKFLUSH_SEED: (s) => String(s.seed),
  FORKFLUSH_EPISODE: (s) => s.episodeId,
};

/** The names of forkflush's agent contract: the only FORKFLUSH_ variables an agent ever sees. */
export const CONTRACT_VARS = [
  ...Object.keys(CONTRACT),
  // The idea map's judge (README, "Idea maps"): which question, and the triplet's file.
  'FORKFLUSH_MAP_STEP',
  'FORKFLUSH_TRIPLET_FILE',
];

export function forkflushVars(s: AgentSession): Record<string, string> {
  return Object.fromEntries(Object.entries(CONTRACT).map(([name, value]) => [name, value(s)]));
}
