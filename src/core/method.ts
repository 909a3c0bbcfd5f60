// The method's numbers, and those of its timing rules, in one place. Each says where it comes from:
// the paper (../shared/docs/method.md, by section) or our own choice, and why. The config schema
// (its defaults and their descriptions), the schedule, the plan's warnings and the GitHub shell's
// deadlines read them here; nothing else in src/ should write one of these numbers again.

/** The strategies: fork-and-flush and the baselines it is measured against (method.md). */
export const STRATEGIES = ['fork-and-flush', 'single-run', 'best-of-n', 'fork-only', 'flush-only'] as const;

/** The units a budget is counted in (budget.unit). */
export const UNITS = ['usd', 'tokens', 'minutes', 'evaluations'] as const;
export type Unit = (typeof UNITS)[number];

/**
 * What the deadlines read of a config: the agent's, the grader's and setup's timeouts (seconds).
 * A shape of its own, so that this file imports nothing (config.ts reads its defaults here).
 */
export interface EpisodeTimeouts {
  agent: { timeout: number };
  grader: { timeout: number };
  setup?: { commands: readonly unknown[]; timeout: number } | undefined;
}

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
 * agent.timeout + 2 × grader.timeout (+ 2 × setup.timeout when there is a setup), plus the slack
 * for queueing.
 */
export function roundDeadlineMinutes(config: EpisodeTimeouts): number {
  return episodeLimitSeconds(config) / 60 + ROUND_DEADLINE_SLACK_MINUTES;
}

/**
 * The longest one episode may take, in seconds, by its limits: its setup (when there is one) in
 * the workspace and in the judge's checkout, the agent, and the gradings the deadline allows.
 */
export function episodeLimitSeconds(config: EpisodeTimeouts): number {
  const setup = config.setup && config.setup.commands.length > 0 ? SETUP_RUNS * config.setup.timeout : 0;
  return config.agent.timeout + DEADLINE_GRADINGS * config.grader.timeout + setup;
}

// GitHub: what one repository and one run may start (our choice: enough for a team's parallel
// work and a month of nightly rounds, and a stop for a config whose tiny episodes would dispatch
// rounds without end).

/** Runs running at once in one repository (limits.runs_per_repo). */
export const RUNS_PER_REPO = 3;

/** Rounds a run may open beyond what its plan needs: nightly and requested ones (limits.rounds). */
export const EXTRA_ROUNDS = 30;

// Setup (setup: in the config): what prepares a workspace before each episode.

/** The default limit of one setup (all of setup.commands), in seconds: our choice, room for a large `npm ci` or `pip install` without a cache. */
export const SETUP_TIMEOUT_SECONDS = 600;

/** Times setup runs for one episode: in its workspace before the agent, and in the judge's clean checkout before grading. */
export const SETUP_RUNS = 2;

// Agent failures (issue 20, core/failure.ts and core/stop.ts): when a broken agent stops the run,
// how a passing failure is retried, and what an agent that reports no usage is charged.

/**
 * Episodes in a row (by round, then branch) that crash, or run until agent.timeout, without
 * changing the workspace, after which the run stops (as it does when every branch of the first
 * fork round does): our choice.
 * One crash is bad luck and two may be one flaky tool; three in a row with nothing to show are an
 * agent that cannot work here, and every further one would only spend.
 */
export const CRASH_STREAK = 3;

/**
 * Tries of one episode's agent when it fails in a way that passes (a rate limit, an overloaded
 * provider, the network): our choice, a first try and two retries. Agent CLIs already retry a 429
 * or a 529 several times inside one try (Claude Code up to ten), so a try that ends in one means
 * minutes of refusal; a third in a row is treated as a failure that will not pass, and stops the run.
 */
export const AGENT_TRIES = 3;

/** The wait before the first retry, in seconds; each later one waits three times longer: our choice. */
export const RETRY_FIRST_WAIT_SECONDS = 15;

/**
 * The longest wait before a retry, in seconds, a provider's retry-after included: our choice. A
 * provider that asks for longer (an hourly or daily limit) is not waited for: the run stops and
 * says so, and a resume continues it.
 */
export const RETRY_MAX_WAIT_SECONDS = 300;

/** The least time a retry must have left after its wait, in seconds, to be worth starting: our choice. */
export const RETRY_LEAST_SECONDS = 30;

/**
 * A local run stopped by its provider's passing failure (a rate limit, an overload, the network),
 * its tries spent, waits this long and goes on by itself, once per wait, before it ends: a night's
 * run outlives an outage of about an hour and a half (our choice; failed tries spend next to nothing).
 */
export const OUTAGE_WAIT_MINUTES = [5, 20, 60];

/**
 * An agent that crashed within this many seconds, reported no usage and left the workspace as it
 * was is charged nothing: our choice. It failed before it could do a model turn's work (a refused
 * key answers in a second or two), and charging it its allowance made a broken setup spend the
 * whole budget (issue 20). Past it, or with a change, an unreported crash is charged its allowance
 * in proportion to the time it used, as an estimate (core/charge.ts).
 */
export const QUICK_FAILURE_SECONDS = 10;

// ------------------------------------------------------------------------------------------------
// compare and probe (issue 12): the paper's evaluation on the user's own task. The statistics are
// in core/compare*.ts and core/probe.ts; their numbers are here.

/**
 * The paper's aggregate figures (method.md, "The method"): min–max normalized means at equal
 * compute. The report prints them next to the task's own, as a reference, never as a target.
 */
export const PAPER_RESULTS = {
  /** Main result, 13 tasks: fork-and-flush against single-run and best-of-4. */
  main: { 'fork-and-flush': 0.78, 'single-run': 0.47, 'best-of-n': 0.54 },
  /** The relative improvements the paper states: 0.78 / 0.47 - 1 and 0.78 / 0.54 - 1. */
  improvement: { 'single-run': 0.66, 'best-of-n': 0.444 },
  /** The ablation, 11 tasks. */
  ablation: { 'single-run': 0.45, 'flush-only': 0.55, 'fork-only': 0.57, 'fork-and-flush': 0.71 },
} as const;

/** Seeds per strategy of a compare: our choice, the fewest for which a sign count can say much (5 of 5: p = 0.0625). */
export const COMPARE_SEEDS = 5;

/** The most seeds a compare may ask for: our choice, a bound on runs started by one command. */
export const MAX_COMPARE_SEEDS = 100;

/** Resamples of the bootstrap interval of a paired difference: our choice, steady to two digits. */
export const BOOTSTRAP_RESAMPLES = 10_000;

/** The bootstrap's seed: fixed, so the same runs always give the same report. */
export const BOOTSTRAP_SEED = 12;

/** The bootstrap interval's coverage: the usual 95%. */
export const CONFIDENCE = 0.95;

/**
 * Probe runs: the paper's K = 4. A fork round picks the best of K fresh branches, so K independent
 * runs show the spread a fork round would choose from.
 */
export const PROBE_RUNS = PAPER.branches;

/**
 * Each probe run's default budget, in serial episodes of the planned run (budget.episode): our
 * choice. Two is the shortest run with both halves of what varies: a fresh episode that picks an
 * approach, and a carried one that polishes it. At the paper's episode size (0.06 of B) four probe
 * runs cost 0.48 of the planned budget; `--budget-each` spends less.
 */
export const PROBE_EPISODES_EACH = 2;

/**
 * THE PROBE'S THRESHOLD, a judgement. The probe measures the sd of its runs' best scores relative
 * to the gain they made (the best seen minus the initial score). "help likely" at or above this,
 * "little to gain" below it; "too hard at this budget" when no run improved on the initial score.
 * Why 0.05 (method.md, "Where it helps"): the paper's example of a task where forking paid had
 * independent runs from 68.3 to 100 (an sd near a tenth of the scale), and the variance study
 * (MAX-3-SAT, §6.2) found the spread vanishing on trivial and on hopeless tasks, peaking at half
 * of a reference's attainment. A fork round keeps the best of K = 4 draws, about one sd (1.03 for
 * normal draws) above a single one, so below 0.05 a round buys under about 5% of the gain the runs
 * made themselves: half of the paper's high-variance example, and little next to a round's cost.
 */
export const PROBE_SPREAD = 0.05;

/**
 * A probe run's gain over the initial score at or below this share of the scores' size is rounding
 * (a sum taken in another order), not an improvement: our choice, far above a double's 1e-16 and
 * below a whole step of a count near 1e10. Whole-number scores, which do not round, are exempt.
 */
export const PROBE_GAIN_NOISE = 1e-11;

/**
 * On a runner, the longest the Action waits for the agent's CLI to install, in seconds: our
 * choice, far above the tens of seconds an npm install takes (it falls within the slack a round's
 * deadline allows, ROUND_DEADLINE_SLACK_MINUTES).
 */
export const AGENT_INSTALL_TIMEOUT_SECONDS = 600;

/**
 * How many times an episode is started without forkflush ever seeing it end (forkflush was killed
 * each time: an out-of-memory killer, a reboot, a stop that did not finish within its bound)
 * before it is given up, with a result that says so (core/attempts.ts): our choice. Once or twice
 * is bad luck that a resume repairs; a third time, the episode itself is what kills the run, and
 * resuming it again would never finish. A stop forkflush saw through (Ctrl-C, SIGTERM) does not count.
 */
export const MAX_UNFINISHED_STARTS = 3;

// ------------------------------------------------------------------------------------------------
// Idea maps (issue 24, `forkflush map`): where the agents searched, drawn as the paper draws it
// (method.md, "Idea maps"; the paper's §3, §6.1 and appendices E, F, H). The computation is in
// core/map/tste.ts, core/map/basins.ts, core/map/sample.ts and core/map/record.ts; its numbers are here.

/** The paper's figures for its maps, printed beside a map's own as a reference, never as a target. */
export const PAPER_MAP = {
  /** Snapshots per run: each run's artifacts were sampled at 51 points. */
  snapshots: 51,
  /** Triplet judgments of a map of 5 runs x 51 snapshots: about 6,000. */
  judgments: 6000,
  runs: 5,
  /** Held-out agreement of the t-STE map: 0.81 to 0.87, mean 0.85. */
  agreement: { mean: 0.85, low: 0.81, high: 0.87 },
  /** Run membership alone on the same held-out triplets: 0.52 to 0.60; chance 0.50. */
  runIdentity: { low: 0.52, high: 0.6 },
  chance: 0.5,
  /** A selected fork branch jumped 43 median single-run steps into a new basin; rejected ones at most 1. */
  selectedJump: 43,
} as const;

/** Snapshots per run (map.snapshots): the paper's 51. A snapshot is an episode's commit. */
export const MAP_SNAPSHOTS = PAPER_MAP.snapshots;

/**
 * Triplet judgments per point of the map: the paper's 6,000 for 5 x 51 points (about 23.5 each),
 * so a map of another size asks as many per point (map.triplets sets the total instead).
 */
export const MAP_TRIPLETS_PER_POINT = PAPER_MAP.judgments / (PAPER_MAP.runs * PAPER_MAP.snapshots);

/** The share of judgments held out of the fit to measure agreement (map.held_out): the paper's 10%. */
export const MAP_HELD_OUT = 0.1;

/**
 * t-STE (van der Maaten and Weinberger, 2012) as the paper fits it, in two dimensions: the Student-t
 * kernel's degrees of freedom are the dimensions minus one (the authors' choice), so 1; gradient
 * descent with an adaptive step (grown by a tenth on a step that lowered the loss, halved and undone
 * otherwise, the authors' "bold driver"), a fixed number of steps so the result does not depend on
 * the machine. 1,000 steps: our choice, past where the loss settles on maps of the paper's size.
 */
export const TSTE = { dims: 2, alpha: 1, steps: 1000, grow: 1.1, shrink: 0.5, initialScale: 1e-4 } as const;

/** SOE (soft ordinal embedding, Terada and von Luxburg 2014), map.embedding: soe: the margin of its hinge. */
export const SOE_MARGIN = 1;

/**
 * Basins: average-linkage clustering of the embedding, cut at the number of clusters (2 to
 * MAX_BASINS) with the best mean silhouette. A best silhouette at or below this is "no substantial
 * structure" (Kaufman and Rousseeuw, 1990: 0.25 and below), so the map is one basin.
 */
export const BASIN_SILHOUETTE = 0.25;

/** The most basins a map is cut into: our choice, more than a picture can name apart. */
export const MAX_BASINS = 12;

/** The map's seed (triplets drawn, t-STE's start): fixed, so the same judgments give the same map. */
export const MAP_SEED = 24;

/** Judge calls at once: our choice, the paper's K, as many as a fork round runs. */
export const MAP_CONCURRENCY = PAPER.branches;

/**
 * The longest spec the map keeps, in characters: our choice, about a page and a half of text, as the
 * paper's specs are; three go into each triplet question. A longer one is cut there, with a mark.
 */
export const MAP_SPEC_MAX_CHARS = 12_000;

/**
 * What one judge call costs at most, roughly, per unit, for `--dry-run`'s estimate before any call
 * was made and for sharing the map's budget between calls: our own rough figures for an LLM judge
 * (a spec reads the workspace's code, a few tens of thousands of tokens; a triplet reads three specs).
 * After a few calls of a judge, the estimate is the mean of what its calls really spent.
 */
export const MAP_CALL_ESTIMATE = {
  spec: { tokens: 30_000, usd: 0.1, minutes: 1 },
  triplet: { tokens: 5_000, usd: 0.015, minutes: 0.25 },
} as const;

/** Calls of a step a judge must have made before their mean replaces MAP_CALL_ESTIMATE: our choice. */
export const MAP_ESTIMATE_FROM = 5;

/**
 * A judge that fails this many calls in a row (each after its one retry) is broken, not unlucky: the
 * map stops and quotes its error. Our choice: past any plausible run of bad luck.
 */
export const MAP_FAILURES_IN_A_ROW = 5;

/**
 * More failed calls of a step than this share (after the retries) makes the map fail (exit 1, the
 * error quoted) instead of being drawn from what was answered: our choice, the held-out share, so
 * the failures could not hide more than the agreement measures.
 */
export const MAP_MOST_FAILED = 0.1;

/** map.budget's default for a task budgeted in evaluations (a judge grades nothing): our choice, an hour of judge time. */
export const MAP_DEFAULT_MINUTES = 60;
