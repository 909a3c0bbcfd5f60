// Setting up a local run: find the repository, read and check the config, the task and the
// templates, grade the initial workspace (initial-grade.ts), and write the run folder. Also: finding
// a run again.
import { randomInt } from 'node:crypto';
import { appendFile, chmod, mkdir, mkdtemp, readFile, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { RUNS_PER_SECOND_MAX } from '../core/bounds.js';
import {
  CONFIG_MISNAMED,
  CONFIG_PATH,
  type Config,
  type ConfigOverrides,
  misnamedConfig,
  parseConfig,
} from '../core/config.js';
import { UserError } from '../core/errors.js';
import { RUNS_FOLDER, runIdAt } from '../core/names.js';
import { plan, planWarnings } from '../core/plan.js';
import { loadTemplates } from '../core/prompts.js';
import { newRunState, type RunState } from '../core/state.js';
import { retryStopped } from '../core/stop.js';
import { formatNumber, shellQuote } from '../core/text.js';
import { Git } from '../io/git.js';
import { type Isolation, isolationFor } from '../worker/boundary.js';
import { LocalForge } from './forge.js';
import { gradeBase, notDeterministic } from './initial-grade.js';
import { preflight } from './preflight.js';
import { runPlaceProblems } from './run-place.js';
import { type RunInfo, RunStore } from './store.js';
import { copyTask } from './task-copy.js';

export interface StartOptions {
  dir: string;
  configFile?: string;
  overrides?: ConfigOverrides;
  seed?: number;
  concurrency?: number;
  keepRejected?: boolean;
  now: Date;
  /** Check everything and grade the initial workspace, then remove what was made: no run starts. */
  dryRun?: boolean;
  /** The environment the agent's allowlist is taken from (default: this process's). */
  env?: NodeJS.ProcessEnv;
}

export interface OpenRun {
  store: RunStore;
  forge: LocalForge;
  info: RunInfo;
  state: RunState;
  warnings: string[];
  /** How episodes are confined here. */
  isolation: Isolation;
}

export async function loadConfig(
  dir: string,
  configFile?: string,
  overrides?: ConfigOverrides,
): Promise<{ config: Config; file: string }> {
  const file = resolve(configFile ?? join(dir, CONFIG_PATH));
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const folder = await stat(dir).catch(() => null);
    if (folder && !folder.isDirectory())
      throw new UserError(`${dir} is not a folder: name the task's repository (or folder)`);
    if ((e as NodeJS.ErrnoException).code === 'EISDIR')
      throw new UserError(
        `${configFile ? `--config ${configFile}: ` : ''}${file} is a folder: name the config file itself`,
      );
    const above = configFile ? null : await configAbove(dir);
    for (const name of configFile ? [] : CONFIG_MISNAMED)
      if (await isFile(join(dir, name))) throw new UserError(`no config at ${file}: ${misnamedConfig(name)}`);
    if (above)
      throw new UserError(
        `no config at ${file}, but ${above} above it has one (${CONFIG_PATH}): name that folder instead, as in \`forkflush run ${shellQuote(above)}\``,
      );
    throw new UserError(
      configFile
        ? `no config at ${file}: check the file --config names, or leave --config out to use ${CONFIG_PATH} of the task's repository`
        : `no config at ${file}: create ${CONFIG_PATH} with \`forkflush init ${shellQuote(dir)}\` (it asks for the grader, ` +
            'the agent and the budget), or write it by hand (README, "Your own task"), or pass --config FILE',
    );
  }
  return { config: parseConfig(text, relative(process.cwd(), file) || file, overrides), file };
}

/** The nearest folder above `dir` with a config of its own (run from a subfolder of the task), or null. */
async function configAbove(dir: string): Promise<string | null> {
  for (let d = dirname(resolve(dir)); d !== dirname(d); d = dirname(d))
    if (await isFile(join(d, CONFIG_PATH))) return d;
  return null;
}

const isFile = (path: string) =>
  stat(path).then(
    (s) => s.isFile(),
    () => false,
  );

export async function startRun(o: StartOptions): Promise<OpenRun> {
  // 1. The task's folder and config, and the repository it is in (if any).
  const taskDir = await taskFolder(o.dir);
  const { config, file: configFile } = await loadConfig(taskDir, o.configFile, o.overrides);
  const place = await runPlaceProblems(taskDir);
  if (place.length > 0) refuse(place);
  const warnings: string[] = [];
  const top = await gitTop(taskDir);
  const scratch = top !== taskDir;
  await excludeRunFolders(top ?? taskDir);
  // 2. The run's folder. A start that is refused, or fails, leaves none behind (nor a dry run's).
  const { id, store } = o.dryRun ? await dryRunStore(o.now) : await newRunFolder(taskDir, o.now);
  try {
    // 3. The repository at its last commit, and everything that cannot work said at once.
    const { repo, git, base } = await repositoryAtBase(taskDir, store, scratch, warnings);
    const { configPathInRepo, isolation } = await checkRepository(
      o,
      { taskDir, repo, scratch, config, configFile },
      warnings,
    );
    // 4. The task and the templates, as the last commit has them.
    const { task, templates } = await committedInputs(git, base, config, configFile);
    const info: RunInfo = {
      id,
      repo,
      taskDir,
      scratch,
      configFile,
      configPathInRepo,
      task,
      templates,
      concurrency: o.concurrency ?? config.fork.branches,
      keepRejected: o.keepRejected ?? false,
      startedAt: o.now.toISOString(),
    };
    warnings.push(...planWarnings(config));
    if (!o.dryRun) warnings.push(...(await otherRunsOfTask(taskDir, id)));
    if (isolation.warning) warnings.push(isolation.warning);
    // 5. The initial workspace graded, as a judge grades an episode.
    const forge = new LocalForge(repo, store, o.keepRejected === true);
    const baseGrade = await gradeBase(config, {
      repo,
      base,
      scratch,
      store,
      forge,
      isolation,
      env: o.env ?? process.env,
    });
    // Alone it took most of its time; side by side with its siblings' it would take longer.
    const side = Math.min(info.concurrency, Math.max(...plan(config).map((p) => p.branches)));
    if (baseGrade.score !== null && side > 1 && baseGrade.seconds > config.grader.timeout / 2)
      warnings.push(
        `the initial grading took ${formatNumber(baseGrade.seconds, 2)} s of grader.timeout's ${config.grader.timeout} s, alone; ` +
          `${side} branches are graded side by side and may each take longer and time out: raise grader.timeout, or run fewer at once (--concurrency)`,
      );
    const noisy = notDeterministic(baseGrade);
    if (noisy) warnings.push(noisy);
    // 6. The run's state, saved (a dry run's folder removed instead).
    const state = newRunState({
      id,
      seed: o.seed ?? randomInt(1, 2 ** 31),
      config,
      baseCommit: base,
      baseScore: baseGrade.score,
      ...(baseGrade.reason ? { baseReason: baseGrade.reason } : {}),
      baseGraderSeconds: Math.round(baseGrade.seconds * 1000) / 1000,
    });
    if (o.dryRun) {
      await rm(store.dir, { recursive: true, force: true });
      return { store, forge, info, state, warnings, isolation };
    }
    await store.init(info);
    await store.save(state);
    return { store, forge, info, state, warnings, isolation };
  } catch (e) {
    await rm(store.dir, { recursive: true, force: true });
    throw e;
  }
}

/** The config's path in the repository, and the preflight's checks: every problem refused at once. */
async function checkRepository(
  o: StartOptions,
  r: { taskDir: string; repo: string; scratch: boolean; config: Config; configFile: string },
  warnings: string[],
): Promise<{ configPathInRepo: string | null; isolation: Isolation }> {
  const { taskDir, repo, scratch, config, configFile } = r;
  const rel = relative(repo, scratch ? join(repo, relative(taskDir, configFile)) : configFile);
  const configPathInRepo = rel.startsWith('..') || rel.startsWith(sep) ? null : rel;
  const isolation = await isolationFor(config.sandbox.mode);
  const { problems, notes } = await preflight({
    repo,
    config,
    configPathInRepo: scratch ? null : configPathInRepo,
    scratch,
    env: o.env ?? process.env,
    sandbox: isolation.sandbox ? { sandbox: isolation.sandbox, private: [repo, RunStore.runsDir(taskDir)] } : null,
  });
  if (problems.length > 0) refuse(problems);
  warnings.push(...notes);
  return { configPathInRepo, isolation };
}

/** Everything that cannot work, said at once (uncommitted inputs first: the task among them). */
function refuse(problems: string[]): never {
  throw new UserError(problems.join('\n'));
}

/** The repository the run works on (a copy in the run folder when the task is not one's root) and its HEAD. */
async function repositoryAtBase(taskDir: string, store: RunStore, scratch: boolean, warnings: string[]) {
  let repo = taskDir;
  if (scratch) {
    repo = store.path('repo');
    await copyTask(taskDir, repo, warnings);
    warnings.push(`${taskDir} is not the root of a git repository: the run works on a copy in ${repo}`);
  }
  const git = new Git(repo);
  const base = await git.revParse('HEAD');
  if (!base) throw new UserError(`${repo} has no commits yet: commit the task's files first, then run again`);
  const dirty = (await git.out(['status', '--porcelain', '--untracked-files=no'])).length > 0;
  if (dirty && !scratch)
    warnings.push('the repository has uncommitted changes: the run starts from the last commit (HEAD), without them');
  return { repo, git, base };
}

/** The task's text and the prompt templates, read from the commit the run starts from. */
async function committedInputs(git: Git, base: string, config: Config, configFile: string) {
  const show = async (path: string) => (await git.exec(['show', `${base}:${path}`], { check: false })).stdout;
  const exists = async (path: string) =>
    (await git.exec(['cat-file', '-e', `${base}:${path}`], { check: false })).exitCode === 0;
  if (!(await exists(config.task))) {
    refuse([
      `${relative(process.cwd(), configFile) || configFile}: task: ${config.task} is not in the repository's last commit; ` +
        'describe the task in that file, or set task: to the file that does',
    ]);
  }
  const task = await show(config.task);
  const loaded = await loadTemplates(
    config,
    async (path) => ((await exists(path)) ? show(path) : null),
    "the repository's last commit",
  );
  if ('problem' in loaded) return refuse([loaded.problem]);
  return { task, templates: loaded.templates };
}

/** Two runs of one task share the machine (and its agents' keys): said, not refused. */
async function otherRunsOfTask(taskDir: string, id: string): Promise<string[]> {
  const warnings: string[] = [];
  let unfinished: string | null = null;
  for (const other of (await RunStore.list(taskDir)).sort()) {
    if (other === id) continue;
    const store = RunStore.forRun(taskDir, other);
    const pid = await store.driver();
    // This process's own runs (a compare's, side by side) are not another run's.
    if (pid !== null && pid !== process.pid)
      warnings.push(
        `run ${other} of this task is running too (process ${pid}): the two share this machine's CPUs and your agent's quota`,
      );
    else if (pid === null && (await store.load().catch(() => null))?.status === 'running') unfinished = other;
  }
  // The newest run that nobody drives and that did not finish: a resume may be what was meant.
  if (unfinished)
    warnings.push(
      `run ${unfinished} of this task did not finish (stopped or interrupted); this is a new run. To go on with that one instead: forkflush resume ${shellQuote(taskDir)} --run ${unfinished}`,
    );
  return warnings;
}

/**
 * A new run's folder, named by the time (a suffix when another run started in the same second).
 * Made with an exclusive mkdir: two runs started at once never share one.
 */
async function newRunFolder(taskDir: string, now: Date): Promise<{ id: string; store: RunStore }> {
  await mkdir(RunStore.runsDir(taskDir), { recursive: true });
  for (let n = 1; n <= RUNS_PER_SECOND_MAX; n++) {
    const id = n === 1 ? runIdAt(now) : `${runIdAt(now)}-${n}`;
    const store = RunStore.forRun(taskDir, id);
    try {
      await mkdir(store.dir, { mode: 0o700 });
      return { id, store };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
  throw new UserError(
    `${RunStore.runsDir(taskDir)} already holds ${RUNS_PER_SECOND_MAX} runs started in the same second`,
  );
}

/** A dry run's folder: a temporary one, removed when the checks are done. */
async function dryRunStore(now: Date): Promise<{ id: string; store: RunStore }> {
  const dir = await mkdtemp(join(tmpdir(), 'forkflush-dry-run-'));
  await chmod(dir, 0o700);
  return { id: runIdAt(now), store: new RunStore(dir) };
}

/** Opens an existing run: the one named, or the newest one of the folder. */
export async function openRun(dir: string, id?: string): Promise<OpenRun> {
  const taskDir = await taskFolder(dir);
  const ids = await RunStore.list(taskDir);
  if (ids.length === 0)
    throw new UserError(`${taskDir} has no forkflush runs yet: start one with \`forkflush run ${dir}\``);
  const chosen = id ?? ids.at(-1);
  if (!chosen || !ids.includes(chosen)) throw new UserError(`no run ${id} in ${taskDir}; runs: ${ids.join(', ')}`);
  const store = RunStore.forRun(taskDir, chosen);
  const info = await store.info();
  const state = await store.load();
  const isolation = await isolationFor(state.config.sandbox.mode);
  return {
    store,
    forge: new LocalForge(info.repo, store, info.keepRejected),
    info,
    state,
    warnings: isolation.warning ? [isolation.warning] : [],
    isolation,
  };
}

/**
 * Before a resume: the episodes that stopped the run (an agent failure a fix outside the config
 * cures, crashes that repeated, a round whose every setup failed) run again: their branches back
 * at their bases, their results cleared (what they spent kept) and saved. Returns their round, or
 * null when nothing a resume can retry stopped the run.
 */
export async function retryStop(open: OpenRun): Promise<number | null> {
  if (!retryStopped(open.state)) return null;
  // Under the run's lock, on the state as saved: another process may have driven it meanwhile.
  return open.store.locked(async () => {
    const saved = await open.store.load();
    const retried = retryStopped(saved);
    if (!retried) {
      open.state = saved;
      return null;
    }
    for (const e of retried.episodes) await open.forge.reopenEpisode(saved, e);
    await open.store.save(retried.state);
    open.state = retried.state;
    return retried.episodes[0]?.round ?? null;
  });
}

/** The task's folder, real: one with files to work on (a bare repository has none). */
export async function taskFolder(dir: string): Promise<string> {
  const s = await stat(dir).catch(() => null);
  if (!s?.isDirectory()) throw new UserError(`${dir} is not a folder: name the task's repository (or folder)`);
  const bare = await new Git(dir).exec(['rev-parse', '--is-bare-repository'], { check: false });
  if (bare.exitCode === 0 && bare.stdout.trim() === 'true')
    throw new UserError(
      `${dir} is a bare repository (no files to work on): clone it and name the clone, as in \`git clone ${shellQuote(dir)} task && forkflush run task\``,
    );
  return realpath(resolve(dir));
}

/** The top of the repository `dir` is in, or null for a folder in none; a repository git refuses is a UserError. */
async function gitTop(dir: string): Promise<string | null> {
  const git = new Git(dir);
  const r = await git.exec(['rev-parse', '--show-toplevel'], { check: false });
  if (r.exitCode !== 0) {
    // Not "no repository": a run on a copy of its files would land nothing in it.
    if (/dubious ownership/.test(r.stderr))
      throw new UserError(
        `git refuses the repository at ${dir}: it is owned by another user (git's safe.directory). Run forkflush as its owner, or trust it: git config --global --add safe.directory ${shellQuote(dir)}`,
      );
    return null;
  }
  const format = await git.exec(['rev-parse', '--show-object-format'], { check: false });
  if (format.exitCode === 0 && format.stdout.trim() !== 'sha1')
    throw new UserError(
      `the repository at ${dir} uses ${format.stdout.trim()} object names: forkflush works with SHA-1 repositories only. Run it on a copy of the task in a folder of its own (no repository: forkflush makes one), or in a SHA-1 clone`,
    );
  return realpath(r.stdout.trim());
}

/** Run folders never show up as changes in the user's repository. */
async function excludeRunFolders(top: string): Promise<void> {
  const git = new Git(top);
  const r = await git.exec(['rev-parse', '--git-path', 'info/exclude'], { check: false });
  if (r.exitCode !== 0) return;
  const file = resolve(top, r.stdout.trim());
  const text = await readFile(file, 'utf8').catch(() => '');
  if (text.split('\n').includes(`${RUNS_FOLDER}/`)) return;
  await mkdir(join(file, '..'), { recursive: true });
  await appendFile(file, `${text === '' || text.endsWith('\n') ? '' : '\n'}# forkflush run folders\n${RUNS_FOLDER}/\n`);
}
