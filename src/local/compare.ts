// `forkflush compare` (and the runs of `forkflush probe`): strategies x variants x seeds, each an
// ordinary local run (start.ts startRun, runner.ts drive) with its own id and refs. The plan is
// `.forkflush/<kind>-<id>/compare.json`, saved before and after every run, so an interrupted
// compare, run again, resumes its unfinished runs (openRun, drive) and starts only the missing
// ones. Runs share the episode limit: a run takes as many slots as it runs episodes at once (K,
// or 1 for the serial strategies), and runs start side by side while the slots allow. This file
// chooses the manifest and schedules its entries; compare-runs.ts runs each one and writes the outputs.
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { RUNS_PER_SECOND_MAX } from '../core/bounds.js';
import type { Variant } from '../core/compare/config.js';
import {
  type CompareManifest,
  checkVariants,
  parseManifest,
  planCompare,
  runOverrides,
  runWidth,
  samePlan,
  variantText,
} from '../core/compare/plan.js';
import { type CompareResults, compareResults, runDone } from '../core/compare/results.js';
import { type Config, parseConfig, type Strategy } from '../core/config.js';
import { nothingDone } from '../core/end-warnings.js';
import { UserError } from '../core/errors.js';
import { runIdAt } from '../core/names.js';
import { NewerRecordError, RecordError } from '../core/records.js';
import type { RunState } from '../core/state.js';
import { Git } from '../io/git.js';
import { CompareRuns, entryConfig, stateOf } from './compare-runs.js';
import { scheduleRuns } from './compare-schedule.js';
import { loadConfig, startRun, taskFolder } from './start.js';
import { RunStore } from './store.js';

export interface CompareOptions {
  kind: 'compare' | 'probe';
  dir: string;
  configFile?: string;
  strategies?: Strategy[];
  seeds?: number;
  seed?: number;
  variants?: Variant[];
  budget?: number;
  branches?: number;
  concurrency?: number;
  /** Continue the newest unfinished compare, whatever this command asks for. */
  resume?: boolean;
  dryRun?: boolean;
  /** A probe: the budget of the run it probes for. */
  planned?: number;
  now: () => Date;
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  /** Progress, one line at a time. */
  log: (line: string) => void;
}

export interface CompareOutcome {
  manifest: CompareManifest;
  results: CompareResults;
  config: Config;
  folder: string;
  resumed: boolean;
  /** 0 done; 1 no run got a score, or did any work; 2 a run's setup cannot work; 130 interrupted. */
  code: number;
  message?: string;
  /** Which finished runs did no work and why (`nothingDone`), when any did none: they are not scored. */
  idle?: string;
}

/** What a compare is about to do: its config, and the manifest it starts or resumes. */
interface ChosenCompare {
  taskDir: string;
  file: string;
  created: Date;
  manifest: CompareManifest;
  resumed: boolean;
  /** The config of the manifest's first strategy: the budget's unit, the branches. */
  base: Config;
  /** The config file's path in the repository, or null when it is outside. */
  configPathInRepo: string | null;
}

/** The manifest a compare runs: an unfinished one it resumes (asked, or the same plan), else a new one. */
async function chooseCompare(o: CompareOptions): Promise<ChosenCompare> {
  const taskDir = await taskFolder(o.dir);
  const overrides = {
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    ...(o.branches !== undefined ? { branches: o.branches } : {}),
  };
  const { config, file } = await loadConfig(taskDir, o.configFile, overrides);
  const configText = await readFile(file, 'utf8');
  // Runs compare only from one commit: a grader committed mid-compare would mix two scales.
  const head = await new Git(taskDir).exec(['rev-parse', '--verify', '--quiet', 'HEAD^{commit}'], { check: false });
  const baseCommit = head.exitCode === 0 ? head.stdout.trim() : undefined;
  const created = o.now();
  const wanted = planCompare({
    kind: o.kind,
    id: `${o.kind}-${runIdAt(created)}`,
    createdAt: created.toISOString(),
    configFile: file,
    configText,
    config,
    seed: o.seed ?? 1 + Math.floor(Math.random() * 2 ** 30),
    ...pick(o, ['strategies', 'seeds', 'variants', 'budget', 'branches', 'planned']),
    ...(baseCommit ? { baseCommit } : {}),
  });
  const { open: found, done } = await compares(taskDir, o.kind, o.resume === true);
  let manifest = wanted;
  let resumed = false;
  if (o.resume) {
    const last = found.at(-1);
    if (!last)
      throw new UserError(
        `${taskDir} has no unfinished ${o.kind} to resume: start one with forkflush ${o.kind} ${o.dir}`,
      );
    if (last.configText !== configText)
      throw new UserError(
        `${file} changed since ${o.kind} ${last.id} started: its runs must share one config; restore it, or start a new ${o.kind} (without --resume)`,
      );
    if (last.baseCommit !== undefined && last.baseCommit !== baseCommit)
      throw new UserError(
        `the task is at commit ${baseCommit?.slice(0, 7) ?? '(none)'}, not ${last.baseCommit.slice(0, 7)} where ${o.kind} ${last.id} started: its runs must start from one commit to compare; check that commit out to resume, or start a new ${o.kind} (without --resume)`,
      );
    [manifest, resumed] = [last, true];
  } else {
    const same = found.filter((m) => samePlan(m, wanted, o.seed !== undefined)).at(-1);
    if (same) [manifest, resumed] = [same, true];
    // The command again after its compare finished: a new one (an agent's runs differ even with the
    // same seeds), said with where the last one's results are, since it spends the plan's budget again.
    const ran = same ? undefined : done.filter((m) => samePlan(m, wanted, o.seed !== undefined)).at(-1);
    if (ran)
      o.log(
        `note: ${o.kind} ${ran.id} ran this plan to its end (${join(RunStore.runsDir(taskDir), ran.id, 'results.json')}); this is a new ${o.kind}${o.seed === undefined ? ', with new seeds' : ''}, spending its budget again`,
      );
  }
  const problems = checkVariants(manifest);
  if (problems.length > 0) throw new UserError(problems.join('\n'));
  const base = parseConfig(manifest.configText, file, runOverrides(manifest, manifest.strategies[0] as Strategy));
  const rel = relative(taskDir, file);
  const configPathInRepo = rel.startsWith('..') ? null : rel;
  return { taskDir, file, created, manifest, resumed, base, configPathInRepo };
}

/** A dry run: the checks a run makes before it spends, and the results as the compare would start them. */
async function dryRunCompare(o: CompareOptions, c: ChosenCompare): Promise<CompareOutcome> {
  const { taskDir, file, manifest, resumed, base, configPathInRepo } = c;
  const folder = join(RunStore.runsDir(taskDir), manifest.id);
  // The checks a run makes before it spends (committed files, the agent, the initial grade),
  // once, with the first variant's config (each variant's config was checked whole above).
  const first = manifest.variants[0];
  const text = first ? variantText(manifest, first, configPathInRepo) : null;
  const scratch = text === null ? null : await mkdtemp(join(tmpdir(), 'forkflush-variant-'));
  const configFile = scratch ? join(scratch, `variant-${first?.name}.yml`) : file;
  if (scratch && text !== null) await writeFile(configFile, text);
  const check = await startRun({
    dir: taskDir,
    configFile,
    overrides: runOverrides(manifest, manifest.strategies[0] as Strategy),
    now: o.now(),
    dryRun: true,
    ...(o.env ? { env: o.env } : {}),
  }).finally(() => (scratch ? rm(scratch, { recursive: true, force: true }) : undefined));
  for (const w of check.warnings) o.log(`note: ${w}`);
  const results = { ...compareResults(manifest, new Map(), base), initial: check.state.base.score };
  return { manifest, results, config: base, folder, resumed, code: 0 };
}

export async function runCompare(o: CompareOptions): Promise<CompareOutcome> {
  // 1. The manifest: resumed or new; a dry run stops after the checks.
  const chosen = await chooseCompare(o);
  if (o.dryRun) return dryRunCompare(o, chosen);
  const { taskDir, created, base, configPathInRepo, resumed } = chosen;
  let { manifest } = chosen;
  if (!resumed) {
    await mkdir(RunStore.runsDir(taskDir), { recursive: true });
    manifest = { ...manifest, id: await claimFolder(taskDir, o.kind, created) };
  }
  const dir = join(RunStore.runsDir(taskDir), manifest.id);
  // One process drives a compare: two would start the same missing run twice.
  const release = await new RunStore(dir).lock();
  // 2. The variants' config files, the manifest saved, and the states of the runs it has.
  for (const v of manifest.variants) {
    const text = variantText(manifest, v, configPathInRepo);
    if (text !== null) await writeFile(join(dir, `variant-${v.name}.yml`), text);
  }
  const m = manifest;
  const states = new Map<string, RunState>();
  for (const e of m.entries) {
    const st = e.run ? await loadState(taskDir, e.run) : null;
    if (st) states.set(st.id, st);
  }
  const runs = new CompareRuns(o, { m, dir, taskDir, base, configPathInRepo }, states);
  await runs.save();
  // 3. The runs, scheduled in plan order.
  const limit = o.concurrency ?? base.fork.branches;
  const pending = m.entries.map((_, i) => i).filter((i) => !runDone(stateOf(m, i, states)));
  o.log(
    `${m.kind} ${m.id}: ${m.entries.length} runs, ${pending.length} to do; up to ${limit} episodes at once${resumed ? ' (resumed)' : ''}`,
  );
  const error = await scheduleRuns(
    m,
    pending,
    limit,
    (i) => Math.min(limit, runWidth(entryConfig(m, i, states, configPathInRepo))),
    (i, width) => runs.runEntry(i, width),
    runs.signal,
    runs.halt,
  );
  // 4. The compare's wall time saved, its outputs written, and its exit code.
  m.wallSeconds = Math.round(((m.wallSeconds ?? 0) + (performance.now() - runs.started) / 1000) * 1000) / 1000;
  await runs.save();
  await release();
  if (error !== null) throw error;
  if (o.signal?.aborted) runs.interrupted = true;
  const results = await runs.outputs();
  const end = { manifest: m, results, config: base, folder: dir, resumed };
  if (runs.failure) return { ...end, ...runs.failure };
  if (runs.interrupted) return { ...end, code: 130 };
  // Runs in which no agent did any work (`run` exits 1 for one): left out of the table's figures,
  // and the compare is red, since a strategy must not win because the other's agents crashed.
  const ended = m.entries.flatMap((_, i) => stateOf(m, i, states) ?? []).filter((s) => s.status === 'finished');
  const idleRuns = results.runs.filter((r) => r.status === 'idle');
  const why = ended.map(nothingDone).find((w) => w !== null);
  const idle =
    idleRuns.length === 0
      ? undefined
      : `${idleRuns.length === ended.length ? `no run of the ${m.kind} did any work` : `${idleRuns.length} of the ${ended.length} runs of the ${m.kind} did no work`} (${idleRuns.map((r) => `${r.strategy}${m.variants.length > 1 ? ` ${r.variant}` : ''} seed ${r.seed}`).join(', ')}: ${why})`;
  if (idle) return { ...end, code: 1, idle };
  return { ...end, code: results.runs.some((r) => r.best !== null) ? 0 : 1 };
}

/**
 * The compares of this kind, oldest first: those with a run still to do, and those done. A damaged
 * manifest stops a resume (it may be the one to continue) and is passed over by a new compare.
 */
async function compares(
  taskDir: string,
  kind: string,
  resuming: boolean,
): Promise<{ open: CompareManifest[]; done: CompareManifest[] }> {
  const root = RunStore.runsDir(taskDir);
  const names = (await readdir(root).catch(() => [] as string[])).filter((n) => n.startsWith(`${kind}-`)).sort();
  const out: CompareManifest[] = [];
  const done: CompareManifest[] = [];
  for (const name of names) {
    const file = join(root, name, 'compare.json');
    const text = await readFile(file, 'utf8').catch(() => null);
    if (text === null) continue;
    let m: CompareManifest;
    try {
      m = parseManifest(text, file);
    } catch (e) {
      // A damaged manifest is passed over; a newer forkflush's compare is not started again beside.
      if (resuming || !(e instanceof RecordError) || e instanceof NewerRecordError) throw e;
      continue;
    }
    let left = false;
    for (const e of m.entries) if (!left && !runDone(e.run ? await loadState(taskDir, e.run) : null)) left = true;
    (left ? out : done).push(m);
  }
  return { open: out, done };
}

/** A new compare's folder, by the time (a suffix when another started in the same second). */
async function claimFolder(taskDir: string, kind: string, now: Date): Promise<string> {
  for (let n = 1; n <= RUNS_PER_SECOND_MAX; n++) {
    const id = `${kind}-${runIdAt(now)}${n === 1 ? '' : `-${n}`}`;
    try {
      await mkdir(join(RunStore.runsDir(taskDir), id), { mode: 0o700 });
      return id;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  throw new UserError(
    `${RunStore.runsDir(taskDir)} already holds ${RUNS_PER_SECOND_MAX} of them started in the same second`,
  );
}

export const loadState = (taskDir: string, id: string) =>
  RunStore.forRun(taskDir, id)
    .load()
    .catch(() => null);

function pick<T extends object, K extends keyof T>(o: T, keys: K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
}
