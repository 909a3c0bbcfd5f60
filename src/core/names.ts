// Every name forkflush gives on a forge, built and read back here: branches, refs, the worker's
// workflow-run titles and job names, check-run names. Names a person can read: the run, the round
// and the branch are in every ref. Each builder has its parser, and test/unit/names.test.ts
// round-trips them.

/** Whether a label's name is `label`: GitHub keeps one label per name whatever its case (`Autoresearch`). */
export function isLabel(name: string | undefined, label: string): boolean {
  return name?.toLowerCase() === label.toLowerCase();
}

/** The names forkflush uses on GitHub: its labels, and the worker workflow it dispatches per round. */
export const GITHUB = {
  label: 'autoresearch',
  doneLabel: 'autoresearch: done',
  /**
   * The label a person puts on the result pull request to let the repository's own workflows run
   * on it (README, "Agent code and your CI"): a deliberate choice, taken away when the result moves.
   */
  ciLabel: 'autoresearch: ci',
  /** The worker workflow (examples/workflows/forkflush.yml). */
  workflow: 'forkflush.yml',
  /** Actions mode's tick (examples/workflows/autoresearch-tick.yml): enabled only while a run needs it. */
  tickWorkflow: 'autoresearch-tick.yml',
  /** The check run that sums a run up, on the commit it starts from and then on its result. */
  check: 'forkflush',
} as const;

const RUN_ID = '[A-Za-z0-9][A-Za-z0-9._-]*';
const EPISODE_ID = 'r\\d+\\.b\\d+|base|map';

export function lineageBranch(run: string, lineage: number, lineages: number): string {
  return lineages === 1 ? `forkflush/${run}/lineage` : `forkflush/${run}/lineage-${lineage}`;
}

export function episodeBranch(run: string, round: number, branch: number): string {
  return `${roundBranchPrefix(run, round)}branch-${branch}`;
}

/** The prefix every branch of one round starts with (to list them in one call). */
export function roundBranchPrefix(run: string, round: number): string {
  return `forkflush/${run}/round-${round}/`;
}

export function bestBranch(run: string): string {
  return `forkflush/${run}/best`;
}

/** The round and branch an episode id names ("r2.b1"), or null for what is not one. */
export function parseEpisodeId(id: string): { round: number; branch: number } | null {
  const m = /^r(\d+)\.b(\d+)$/.exec(id);
  return m ? { round: Number(m[1]), branch: Number(m[2]) } : null;
}

/** "round 2, branch 1" or "initial workspace". */
export function describeEpisodeId(id: string): string {
  const e = parseEpisodeId(id);
  return e ? `round ${e.round}, branch ${e.branch}` : id === 'base' ? 'initial workspace' : id;
}

/** A run id from a time: 20261130-055201. */
export function runIdAt(date: Date): string {
  const iso = date.toISOString();
  return `${iso.slice(0, 10).replace(/-/g, '')}-${iso.slice(11, 19).replace(/:/g, '')}`;
}

/**
 * Where a GitHub run keeps its work (run.json's `refsLayout`).
 * - 1 (forkflush 0.1, and runs whose config asks for branch pull requests): every episode, the
 *   lineage and the best workspace are branches, so the repository's `push` workflows see each.
 * - 2 (the default): they are refs under refs/forkflush/<run>/, which no workflow triggers on and no
 *   checkout fetches; the worker fetches its episode's ref by name. Only the run's result becomes
 *   a branch, `forkflush/<run>/result`, with one pull request.
 */
export type RefsLayout = 1 | 2;

/** The full refs of a GitHub run's work, in its layout. */
export interface RunRefs {
  lineage(lineage: number, lineages: number): string;
  best: string;
  episode(round: number, branch: number): string;
  /** The prefix every ref of one round starts with (to list them in one call). */
  round(round: number): string;
  /** The branch the run's result pull request comes from (a name under refs/heads/). */
  resultBranch(lineage: number, lineages: number): string;
}

export function runRefs(run: string, layout: RefsLayout): RunRefs {
  if (layout === 1) {
    return {
      lineage: (lineage, lineages) => `refs/heads/${lineageBranch(run, lineage, lineages)}`,
      best: `refs/heads/${bestBranch(run)}`,
      episode: (round, branch) => `refs/heads/${episodeBranch(run, round, branch)}`,
      round: (round) => `refs/heads/${roundBranchPrefix(run, round)}`,
      resultBranch: (lineage, lineages) => lineageBranch(run, lineage, lineages),
    };
  }
  const work = `refs/forkflush/${run}`;
  return {
    lineage: (lineage, lineages) => `${work}/${lineages === 1 ? 'lineage' : `lineage-${lineage}`}`,
    best: `${work}/best`,
    episode: (round, branch) => `${work}/round-${round}/branch-${branch}`,
    round: (round) => `${work}/round-${round}/`,
    resultBranch: () => `forkflush/${run}/result`,
  };
}

/** A ref without `refs/heads/` when it is a branch: how people read it. */
export function refName(ref: string): string {
  return ref.startsWith('refs/heads/') ? ref.slice('refs/heads/'.length) : ref;
}

/**
 * The commit on which the worker records its grade of the initial workspace (a run's `base` job):
 * the base's tree, the base its parent, the grade in its trailers.
 */
export function baseGradeRef(run: string): string {
  return `refs/forkflush/${run}/base`;
}

/** The folder of a repository that holds its local runs (never copied, never recorded in a result). */
export const RUNS_FOLDER = '.forkflush';

/** The id a run's job that grades its initial workspace goes by (its matrix value, its job name). */
export const BASE_JOB = 'base';

/** The id the job that draws a run's idea map goes by (`/autoresearch map`: its matrix value, its job name). */
export const MAP_JOB = 'map';

/**
 * The commits of a GitHub run's idea map: map.json, map.svg (and map.png when the job could render
 * one) and the judge's answers under cache/, each commit's parent the previous one.
 */
export function mapRef(run: string): string {
  return `refs/forkflush/${run}/map`;
}

/** The title of the map job's workflow run (the worker workflow's `run-name`, its round input `map`). */
export function mapRunTitle(run: string): string {
  return `forkflush ${run} round ${MAP_JOB}`;
}

/** The run whose map job's workflow run has this title, or null. */
export function parseMapRunTitle(title: string): string | null {
  return new RegExp(`^forkflush (${RUN_ID}) round ${MAP_JOB}$`).exec(title)?.[1] ?? null;
}

// On a forge the run's own records live under refs/forkflush/, outside refs/heads, so a checkout
// of a branch never fetches them and the agent never sees them.

/** A commit whose tree holds `state.json` (the RunState) and `run.json` (task text, templates). */
export function stateRef(run: string): string {
  return `refs/forkflush/${run}/state`;
}

/** The run whose state ref this is, or null. */
export function parseStateRef(ref: string): string | null {
  return new RegExp(`^refs/forkflush/(${RUN_ID})/state$`).exec(ref)?.[1] ?? null;
}

/** A commit whose tree is the context folder an episode left behind. */
export function contextRef(run: string, episode: string): string {
  return `refs/forkflush/${run}/contexts/${episode}`;
}

/** The run id of the run an issue started. */
export function issueRunId(issue: number): string {
  return `issue-${issue}`;
}

/** The run an issue started, or null for any other run id. */
export function parseIssueRunId(run: string): number | null {
  const m = /^issue-(\d+)$/.exec(run);
  return m ? Number(m[1]) : null;
}

// The worker workflow names its runs and jobs with these (examples/workflows/forkflush.yml, whose
// `run-name` and job `name` must say the same: test/integration/workflows.test.ts checks it).

/** The title of a round's workflow run: the worker workflow's `run-name`. */
export function roundRunTitle(run: string, round: number): string {
  return `forkflush ${run} round ${round}`;
}

export function parseRoundRunTitle(title: string): { run: string; round: number } | null {
  const m = new RegExp(`^forkflush (${RUN_ID}) round (\\d+)$`).exec(title);
  return m ? { run: m[1] as string, round: Number(m[2]) } : null;
}

/** Whether a workflow run's title is one of this run's rounds. */
export function isRoundRunOf(title: string, run: string): boolean {
  return parseRoundRunTitle(title)?.run === run;
}

/** The name of an episode's worker job. */
export function episodeJobName(run: string, episode: string): string {
  return `forkflush ${run} ${episode}`;
}

export function parseEpisodeJobName(name: string): { run: string; episode: string } | null {
  const m = new RegExp(`^forkflush (${RUN_ID}) (${EPISODE_ID})$`).exec(name);
  return m ? { run: m[1] as string, episode: m[2] as string } : null;
}

/** The name of the check run that shows an episode's grade on its commit. */
export function checkRunName(episode: string): string {
  return `forkflush ${episode}`;
}

/** An episode's check run's external id: which run it belongs to, so a handler taking over finds it. */
export function checkExternalId(run: string, episode: string): string {
  return `${run}/${episode}`;
}
