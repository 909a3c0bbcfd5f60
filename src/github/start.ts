// Starting a GitHub run: the label (or `/autoresearch resume` on an issue without a run) reads the
// config, templates and worker workflow from the default branch, checks the repository's limit of
// runs, and saves the run's first record; then syncs, which dispatches the opening round.
import { PROBLEM_MAX_BYTES, PROBLEMS_SAID_MAX } from '../core/bounds.js';
import { fileItRuns } from '../core/commands.js';
import { CONFIG_MISNAMED, CONFIG_PATH, type Config, ConfigError, misnamedConfig, parseConfig } from '../core/config.js';
import { clip } from '../core/github-text.js';
import { forgeAlsoProtected } from '../core/globs.js';
import { runsPerRepoProblem } from '../core/limits.js';
import { GITHUB, issueRunId, type RefsLayout, runRefs, stateRef } from '../core/names.js';
import { loadTemplates } from '../core/prompts.js';
import { RecordError } from '../core/records.js';
import { mixSeed } from '../core/rng.js';
import { overridesInText, parseOverrides, type RunOverrides } from '../core/run-overrides.js';
import { untilPassed } from '../core/schedule.js';
import { remember, seenAny } from '../core/seen-events.js';
import { newRunState, type RunState } from '../core/state.js';
import { haltsOnGitHub, runStop } from '../core/stop.js';
import { visibleText } from '../core/text.js';
import { workerDrift, workerDriftText } from '../core/worker-drift.js';
import { workerTimeoutProblem } from '../core/worker-workflow.js';
import { amendOnce, type ChangeRequest, canWrite, wakeTick } from './amend.js';
import type { GitHubApi, GitHubRunRecord, StoredRun } from './api.js';
import { protectedDigest } from './observe.js';
import { ConflictError } from './requests.js';
import { setStopped } from './steer.js';
import { type SyncContext, syncOrYield, syncStored } from './sync.js';

export interface IssueRef {
  number: number;
  title: string;
  body: string | null;
  /** Who wrote the issue: overrides in its text count only from a writer. */
  author?: string;
}

/** Overrides asked for with the start (`/autoresearch start budget=50`), and who asked. */
export interface RequestedOverrides {
  words: string;
  /** Where they came from, as the status comment says it. */
  source: string;
}

/** What a new run starts from, read from the default branch. */
interface RunSetup {
  branch: string;
  private: boolean;
  config: Config;
  templates: GitHubRunRecord['templates'];
  /** The worker workflow's text. */
  worker: string;
  /** How it differs from the one this release writes, in what a run works with (said once). */
  workerDrift: string | null;
  /** The default branch's head commit. */
  base: string;
  /** The base commit's tree. */
  baseTree: string;
  /** What every result must keep of the base: its protected files, as one digest. */
  protectedDigest: string;
  /** The overrides applied to the config, echoed in the status comment. */
  overrides?: { text: string; source: string };
}

/**
 * Starts the run of an issue (or resumes a stopped one). Returns a message for the user on a
 * problem; `{ state: null }` when there was nothing to do (the event was acted on already, or
 * another handler saved first).
 */
export async function startRun(
  ctx: SyncContext,
  issue: IssueRef,
  asked: ChangeRequest,
  requested?: RequestedOverrides,
): Promise<{ problem: string } | { state: RunState | null }> {
  const run = issueRunId(issue.number);
  // 1. A run there already: resumed when stopped, else the event is only recorded.
  const existing = await ctx.api.loadRun(stateRef(run));
  if (existing) return startExisting(ctx, existing, asked);
  // 2. What the run starts from (the config with its overrides), or why it cannot start.
  const overrides = await overridesFor(ctx.api, issue, asked, requested);
  if (overrides !== null && 'problem' in overrides) return overrides;
  const setup = await readSetup(ctx.api, run, overrides, ctx.now);
  if ('problem' in setup) return setup;
  // 3. Its record, and its lineages at the base.
  const state = newRunState({
    id: run,
    seed: mixSeed(issue.number),
    config: setup.config,
    baseCommit: setup.base,
    baseScore: null,
  });
  const files = firstRecord(issue, asked, setup);
  const refs = runRefs(run, layoutFor(setup.config));
  for (const l of state.lineages) await ctx.api.createRef(refs.lineage(l.index, state.lineages.length), setup.base);
  // 4. Saved (of two handlers, one wins), then synced: the opening round is dispatched.
  try {
    const sha = await ctx.api.saveRun(stateRef(run), state, files, null, 'forkflush: new run');
    await wakeTick(ctx);
    return { state: await syncStored(ctx, { state, files, sha }) };
  } catch (e) {
    if (e instanceof ConflictError) return { state: null };
    throw e;
  }
}

/** A label on an issue whose run exists: a stopped run resumes, any other records the event. */
async function startExisting(
  ctx: SyncContext,
  existing: StoredRun,
  asked: ChangeRequest,
): Promise<{ problem: string } | { state: RunState | null }> {
  const run = existing.state.id;
  if (seenAny(existing.files.seen, asked.keys)) {
    ctx.log?.(`${run}: this event was acted on already; nothing to do`);
    return { state: null };
  }
  if (existing.files.stopped) {
    const busy = await runsPerRepo(ctx.api, existing.state.config, run, 'label the issue again');
    if (busy) return { problem: busy };
    return { state: await setStopped(ctx, existing, false, asked) };
  }
  // Running or finished: the event is recorded, so that a replay of it after a stop resumes nothing.
  const next = await amendOnce(ctx.api, existing, 'forkflush: labelled', asked.keys, (s) => s);
  const state = next ? await syncOrYield(ctx, next) : null;
  // Labelled again after its end ("another go"): told what does that, not passed over in silence.
  if (next && !next.files.stopped && next.state.status === 'finished')
    return {
      problem:
        "this issue's run is finished. `/autoresearch fork` runs one more fork round of it; a new issue starts a new run.",
    };
  return { state };
}

/**
 * The run's overrides: the start command's, else those of a `/autoresearch start ...` line in the
 * issue's text (only from an author with write access: they may raise what the run spends); null
 * for none; or why they cannot be, naming each key and what is valid.
 */
async function overridesFor(
  api: GitHubApi,
  issue: IssueRef,
  asked: ChangeRequest,
  requested: RequestedOverrides | undefined,
): Promise<{ given: RunOverrides; source: string } | null | { problem: string }> {
  const inText = requested ? null : overridesInText(issue.body ?? '');
  const words = requested?.words ?? inText;
  if (words === null) return null;
  const source = requested?.source ?? "the issue's text";
  const given = parseOverrides(words);
  if ('problems' in given)
    return {
      problem: `the overrides in ${source} are not valid, so no run started. Fix these and start it again:\n\n${problemList(given.problems)}`,
    };
  const author = issue.author;
  if (inText !== null && author !== asked.by && !canWrite(author ? await api.permission(author) : 'none')) {
    return {
      problem: `the issue's text asks for overrides (\`${given.text}\`), and its author${author ? ` @${author}` : ''} has no write access to this repository, so they were not taken. A writer can start the run with them: \`/autoresearch start ${given.text}\`.`,
    };
  }
  return { given, source };
}

/** The config, templates, worker workflow and base commit a new run needs, or why it cannot start. */
async function readSetup(
  api: GitHubApi,
  run: string,
  overrides: { given: RunOverrides; source: string } | null,
  now: Date,
): Promise<RunSetup | { problem: string }> {
  const repository = await api.repository();
  const branch = repository.defaultBranch;
  const text = await api.readFile(CONFIG_PATH, branch);
  if (text === null) {
    for (const name of CONFIG_MISNAMED)
      if ((await api.readFile(name, branch)) !== null)
        return {
          problem: `There is no \`${CONFIG_PATH}\` on \`${branch}\`: ${misnamedConfig(name)}, then label the issue again.`,
        };
    return {
      problem: `There is no \`${CONFIG_PATH}\` on \`${branch}\`: add one (see the forkflush README), then label the issue again.`,
    };
  }
  let config: Config;
  try {
    config = parseConfig(text, CONFIG_PATH, overrides?.given.config);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    const withOverrides = overrides ? ` with the overrides \`${overrides.given.text}\` (${overrides.source})` : '';
    return {
      problem: `\`${CONFIG_PATH}\` on \`${branch}\`${withOverrides} is not valid, so no run started. Fix these and label the issue again:\n\n${problemList(e.problems)}`,
    };
  }
  // A date already past (a slip of the year) would promise nightly rounds that never run.
  const ended = untilPassed(config, now);
  if (ended) return { problem: `${ended} (fix it on \`${branch}\`, then label the issue again).` };
  const loaded = await loadTemplates(config, (path) => api.readFile(path, branch), `\`${branch}\``);
  if ('problem' in loaded)
    return { problem: `${loaded.problem} (fix it on \`${branch}\`, then label the issue again).` };
  const missing = await missingScript(api, config, branch);
  if (missing) return { problem: missing };
  // Without the worker workflow the round's dispatch would fail on every trigger, saying nothing.
  const worker = await api.readFile(`.github/workflows/${GITHUB.workflow}`, branch);
  if (worker === null) return { problem: missingWorkerProblem(branch) };
  // An outdated one: stopped here, before anything is spent, when its jobs could not work.
  const drift = workerDrift(worker, api.release);
  if (drift.stop.length > 0) return { problem: workerDriftText(drift, branch) as string };
  // Checked here, not locked: two issues labelled at the same moment may both start.
  const busy = await runsPerRepo(api, config, run, 'label this issue again');
  if (busy) return { problem: busy };
  const base = await api.refSha(`refs/heads/${branch}`);
  if (!base) return { problem: `The default branch \`${branch}\` has no commits.` };
  // What every result must keep of the base: its protected files (checked against each result's tree).
  const globs = [...config.grader.protected, ...forgeAlsoProtected(CONFIG_PATH)];
  const { tree } = await api.commit(base);
  const baseFiles = await api.treeFiles(tree, globs);
  if (!baseFiles)
    return {
      problem: `\`${branch}\`'s tree is too large for GitHub to list whole, and \`grader.protected\` (with \`.github/workflows/**\`) reaches into too many of its folders to list them one by one: results could not be checked against it. Name the protected paths by their folders (\`tests/**\`, not \`**/test_*.py\`), then label the issue again.`,
    };
  return {
    branch,
    private: repository.private,
    config,
    templates: loaded.templates,
    worker,
    workerDrift: workerDriftText(drift, branch),
    base,
    baseTree: tree,
    protectedDigest: protectedDigest(baseFiles, globs),
    ...(overrides ? { overrides: { text: overrides.given.text, source: overrides.source } } : {}),
  };
}

/** The new run's record (run.json): the task, where it runs, who started it, what its results must keep. */
function firstRecord(issue: IssueRef, asked: ChangeRequest, setup: RunSetup): GitHubRunRecord {
  const task = visibleText(`# ${issue.title}\n\n${issue.body ?? ''}`);
  // Said in the status comment, once: a job Actions would stop before an episode is graded.
  const timeout = workerTimeoutProblem(setup.worker, setup.config);
  const warning = [timeout, setup.workerDrift].filter((w): w is string => w !== null);
  return {
    task: task.text,
    ...(task.hidden > 0 ? { hiddenInTask: task.hidden } : {}),
    templates: setup.templates,
    configPath: CONFIG_PATH,
    defaultBranch: setup.branch,
    issue: issue.number,
    commentId: null,
    stopped: false,
    dispatched: {},
    published: {},
    settled: [],
    finalPr: null,
    bestCommit: null,
    lastNightly: null,
    claims: {},
    protectedDigest: setup.protectedDigest,
    privateRepository: setup.private,
    startedBy: asked.by,
    seen: remember([], asked.keys),
    refsLayout: layoutFor(setup.config),
    // Graded once, by a job of the opening round's dispatch (action/base-job.ts).
    baseGrade: 'asked',
    baseTree: setup.baseTree,
    ...(warning.length > 0 ? { workerWarning: warning.join('\n\n') } : {}),
    ...(setup.overrides ? { overrides: setup.overrides } : {}),
  };
}

/** What a repository without the worker workflow is told, once, on the issue that would start a run. */
export function missingWorkerProblem(branch: string): string {
  return (
    `There is no \`.github/workflows/${GITHUB.workflow}\` on \`${branch}\`: it is the workflow whose jobs run the agents. ` +
    'Run `forkflush init --github` in a clone of this repository, commit and push the workflows it writes ' +
    `to \`${branch}\` (README, "On GitHub"), then label the issue again.`
  );
}

/**
 * Where a new run keeps its work: out of the repository's workflows' sight (2), unless its config
 * asks for a pull request per episode or per fork round's winner, which needs their branches (1).
 */
export function layoutFor(config: Config): RefsLayout {
  return config.pull_requests === 'episodes' || config.pull_requests === 'winners' ? 1 : 2;
}

/**
 * Why no other run may start or resume now (limits.runs_per_repo), or null: the repository's
 * runs that are running (not stopped, not finished), besides `self`, counted up to the limit. A
 * record that cannot be read (broken, or not sealed by this app) runs nothing, so it is not counted.
 */
export async function runsPerRepo(api: GitHubApi, config: Config, self: string, again: string): Promise<string | null> {
  const running: string[] = [];
  for (const run of await api.listRuns()) {
    if (run === self) continue;
    let stored: StoredRun | null;
    try {
      stored = await api.loadRun(stateRef(run));
    } catch (e) {
      if (e instanceof RecordError) continue;
      throw e;
    }
    // A run stopped by a person, or halted by its own stop (it waits for a resume, which checks
    // this limit again), runs nothing: it takes no other run's turn.
    const halted = stored && haltsOnGitHub(runStop(stored.state), stored.files.baseGrade === 'done');
    if (stored && !stored.files.stopped && !halted && stored.state.status !== 'finished') running.push(run);
    if (running.length >= config.limits.runs_per_repo) break;
  }
  return runsPerRepoProblem(config, running, again);
}

/**
 * The script grader.command or agent.command runs (`node grade.mjs`), when the default branch does
 * not have it: every branch would spend its allowance on an agent whose work no grading can score.
 * Every episode and the judge start from the commit; with setup commands, setup may make those, so
 * only the first setup command's own script, which nothing ran before, must be there.
 */
async function missingScript(api: GitHubApi, config: Config, branch: string): Promise<string | null> {
  const [firstSetup] = config.setup.commands;
  const commands =
    firstSetup !== undefined
      ? ([['setup.commands[0]', firstSetup]] as const)
      : ([
          ['grader.command', config.grader.command],
          ['agent.command', config.agent.kind === 'command' ? config.agent.command : undefined],
        ] as const);
  for (const [key, command] of commands) {
    const file = command ? fileItRuns(command) : null;
    if (file && !(await api.exists(file, branch)))
      return `\`${key}\` runs \`${file}\` (\`${command}\`), which is not on \`${branch}\`, where every branch and its grading start: commit it there (or correct \`${key}\`), then label the issue again.`;
  }
  return null;
}

/** Problems as a list for the issue: the first PROBLEMS_SAID_MAX, and how many more (a paragraph of unknown words makes hundreds). */
function problemList(problems: readonly string[]): string {
  const said = problems.slice(0, PROBLEMS_SAID_MAX).map((p) => `- ${clip(p, PROBLEM_MAX_BYTES)}`);
  const more = problems.length - said.length;
  return [...said, ...(more > 0 ? [`- and ${more} more`] : [])].join('\n');
}
