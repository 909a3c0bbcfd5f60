// The method's numbers, and those of its timing rules, in one place. Each says where it comes from:
// the paper (../shared/docs/method.md, by section) or our own choice, and why. The config schema
// (its defaults and their descriptions), the schedule, the plan's warnings and the GitHub shell's
// deadlines read them here; nothing else in src/ should write one of these numbers again.
import type { Config, Unit } from './config.js';

/** The paper's defaults of a fork-and-flush run (method.md, "The schedule used in the paper"). */
export const PAPER = {
  /** K, branches per fork round: step 1, "K = 4 branches". */
  branches: 4,
  /** Fork points, as fractions of the budget spent: steps 2 to 4, "until ~0.33·B", "until ~0.66·B". */
  forkAt: [0.33, 0.66],
  /** Each branch's budget, as a fraction of the total: steps 1 and 3, "each ~0.06·B". */
  branchBudget: 0.06,
  /** One serial episode, as a fraction of the total: our choice (the paper sets none), a branch's depth. */
  episodeBudget: 0.06,
  /** Branches per round told to try a different approach: "Two of the K branches" (won 81 of 178: no effect). */
  directives: 2,
} as const;

/** The most branches a round may have: our choice, a bound on parallel jobs (the paper ran K = 4). */
export const MAX_BRANCHES = 64;

/** The default limit of one episode's agent, in seconds: our choice, half an hour of work per session. */
export const AGENT_TIMEOUT_SECONDS = 1800;

/** The default limit of one grading, in seconds: our choice, a grader is a quick deterministic check. */
export const GRADER_TIMEOUT_SECONDS = 60;

/**
 * Below this share of an episode budget, what is left of a stretch is not an episode of its own
 * but joins the last one: our choice, so agents that stop a little early do not trail ever smaller episodes.
 */
export const LEAST_EPISODE_SHARE = 0.25;

/** A serial stretch runs at most this many times the episodes that fill it: our choice, room for early stops. */
export const SERIAL_EPISODES_FACTOR = 2;

/** ... plus this many more: our choice, so even a stretch of one episode allows early stops. */
export const SERIAL_EPISODES_EXTRA = 2;

/**
 * The most episodes a serial stretch of `span` may run, so an agent that keeps stopping early,
 * having spent next to nothing, cannot stall a run.
 */
export function maxSerialEpisodes(span: number, episodeBudget: number): number {
  return SERIAL_EPISODES_FACTOR * Math.ceil(span / episodeBudget - 1e-9) + SERIAL_EPISODES_EXTRA;
}

/**
 * Salt of the seed that picks a round's directed branches: our choice, any constant at or above
 * MAX_BRANCHES, so the draw never shares a seed with a branch, `mixSeed(seed, round, branch)`.
 */
export const DIRECTIVE_SEED_SALT = 0xd1;

/**
 * What an episode usually costs at the least, per budget unit: our own rough figures, for the plan's
 * warnings only (a model call of a coding agent reads its tools and the task, a few thousand tokens
 * or a few cents; a grading is whole).
 */
export const LEAST_USEFUL_EPISODE: Readonly<Record<Unit, number>> = {
  tokens: 2000,
  usd: 0.02,
  minutes: 1,
  evaluations: 1,
};

/** Gradings a GitHub round's deadline allows beyond the agent's time: our choice, one still running, the judge's. */
export const DEADLINE_GRADINGS = 2;

/** Minutes a GitHub round's deadline allows beyond its episodes' limits: our choice, for queueing and job setup. */
export const ROUND_DEADLINE_SLACK_MINUTES = 30;

/** On GitHub, a claim older than this (minutes) was left by a handler that crashed: our choice, far above one sync. */
export const STALE_CLAIM_MINUTES = 10;

/**
 * Minutes after a round's dispatch on GitHub past which its missing results count as failed:
 * agent.timeout + 2 × grader.timeout, plus the slack for queueing.
 */
export function roundDeadlineMinutes(config: Pick<Config, 'agent' | 'grader'>): number {
  return (config.agent.timeout + DEADLINE_GRADINGS * config.grader.timeout) / 60 + ROUND_DEADLINE_SLACK_MINUTES;
}

// GitHub: what one repository and one run may start (our choice: enough for a team's parallel
// work and a month of nightly rounds, and a stop for a config whose tiny episodes would dispatch
// rounds without end).

/** Runs running at once in one repository (limits.runs_per_repo). */
export const RUNS_PER_REPO = 3;

/** Rounds a run may open beyond what its plan needs: nightly and requested ones (limits.rounds). */
export const EXTRA_ROUNDS = 30;
