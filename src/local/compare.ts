// `forkflush compare` (and the runs of `forkflush probe`): strategies x variants x seeds, each an
// ordinary local run (start.ts startRun, runner.ts drive) with its own id and refs. The plan is
// `.forkflush/<kind>-<id>/compare.json`, saved before and after every run, so an interrupted
// compare, run again, resumes its unfinished runs (openRun, drive) and starts only the missing
// ones. Runs share the episode limit: a run takes as many slots as it runs episodes at once (K,
// or 1 for the serial strategies), and runs start side by side while the slots allow.
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { RUNS_PER_SECOND_MAX } from '../core/bounds.js';
import { spent as spentOf } from '../core/budget.js';
import { chartGroups, compareChartData, renderCompareChartSvg } from '../core/compare/chart.js';
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
import { duration, renderCompareReport } from '../core/compare/report.js';
import { type CompareResults, compareResults, progressEstimate, runDone, runRecord } from '../core/compare/results.js';
import { type Config, parseConfig, type Strategy } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { runIdAt } from '../core/names.js';
import { RecordError } from '../core/records.js';
import type { RunState } from '../core/state.js';
import { runStop } from '../core/stop.js';
import { formatNumber } from '../core/text.js';
import { scheduleRuns } from './compare-schedule.js';
import { eventLine } from './progress.js';
import { readMap, writeReports } from './reports.js';
import { drive } from './runner.js';
import { loadConfig, type OpenRun, openRun, startRun } from './start.js';
import { RunStore, writeAtomic } from './store.js';

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
  /** 0 done; 1 no run got a score; 2 a run's setup cannot work; 130 interrupted. */
  code: number;
  message?: string;
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
  const s = await stat(o.dir).catch(() => null);
  if (!s?.isDirectory()) throw new UserError(`${o.dir} is not a folder: name the task's repository (or folder)`);
  const taskDir = await realpath(resolve(o.dir));
  const overrides = {
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    ...(o.branches !== undefined ? { branches: o.branches } : {}),
  };
  const { config, file } = await loadConfig(taskDir, o.configFile, overrides);
  const configText = await readFile(file, 'utf8');
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
  });
  const found = await unfinished(taskDir, o.kind, o.resume === true);
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
    [manifest, resumed] = [last, true];
  } else {
    const same = found.filter((m) => samePlan(m, wanted, o.seed !== undefined)).at(-1);
    if (same) [manifest, resumed] = [same, true];
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
  const { taskDir, created, base, configPathInRepo } = chosen;
  let { manifest } = chosen;
  const { resumed } = chosen;
  if (!resumed) {
    await mkdir(RunStore.runsDir(taskDir), { recursive: true });
    manifest = { ...manifest, id: await claimFolder(taskDir, o.kind, created) };
  }
  const dir = join(RunStore.runsDir(taskDir), manifest.id);
  // One process drives a compare: two would start the same missing run twice.
  const release = await new RunStore(dir).lock();
  for (const v of manifest.variants) {
    const text = variantText(manifest, v, configPathInRepo);
    if (text !== null) await writeFile(join(dir, `variant-${v.name}.yml`), text);
  }
  const m = manifest;
  let saving = Promise.resolve();
  const save = () => {
    saving = saving.then(() => writeAtomic(join(dir, 'compare.json'), `${JSON.stringify(m, null, 1)}\n`));
    return saving;
  };
  await save();

  const states = new Map<string, RunState>();
  for (const e of m.entries) {
    const st = e.run ? await loadState(taskDir, e.run) : null;
    if (st) states.set(st.id, st);
  }
  const limit = o.concurrency ?? base.fork.branches;
  const halt = new AbortController();
  const signal = o.signal ? AbortSignal.any([o.signal, halt.signal]) : halt.signal;
  const total = m.entries.length;
  const started = Date.now();
  const clock = () => {
    const t = Math.floor((Date.now() - started) / 1000);
    return `[${String(Math.floor(t / 60)).padStart(2, '0')}:${String(t % 60).padStart(2, '0')}]`;
  };
  const spentAtStart = new Map([...states].map(([id, st]) => [id, spentOf(st)]));
  const estimate = () => {
    const elapsedSeconds = (Date.now() - started) / 1000;
    const left = progressEstimate({
      manifest: m,
      states,
      spentAtStart,
      elapsedSeconds,
      budget: m.budget ?? base.budget.total,
    });
    if (left.runs === 0) return 'All runs are done.';
    const time = left.seconds === null ? '? (after the first spend)' : duration(left.seconds);
    return `${left.runs} left: about ${time} and ${formatNumber(left.spend, 2)} ${base.budget.unit} to go`;
  };
  let failure: { code: number; message: string } | null = null;
  let interrupted = false;
  let startLock = Promise.resolve() as Promise<unknown>;
  // A note every run gets (the plan's, the sandbox's) is said once.
  const noted = new Set<string>();
  // The outputs are written one set at a time, each from the states as they are then: runs that
  // finish together must not interleave their writes (an older set could land last).
  let written: Promise<unknown> = Promise.resolve();
  const outputs = (): Promise<CompareResults> => {
    const next = written.then(() => writeCompareOutputs(dir, m, states, base, taskDir));
    written = next.catch(() => {});
    return next;
  };

  const runEntry = async (i: number, width: number) => {
    const e = m.entries[i] as CompareManifest['entries'][number];
    const label = `run ${i + 1} of ${total} (${e.strategy}${m.variants.length > 1 ? `, ${e.variant}` : ''}, seed ${e.seed})`;
    // A run whose setup could not work (fixed since), or whose folder is gone, is started again.
    let open: OpenRun | null = e.run ? await openRun(taskDir, e.run).catch(() => null) : null;
    if (e.run && (!open || runStop(open.state)?.code === 2)) {
      e.abandoned = [...(e.abandoned ?? []), e.run];
      [open, e.run] = [null, null];
    }
    if (!open) {
      const variant = m.variants.find((v) => v.name === e.variant) as Variant;
      const configFile =
        variantText(m, variant, configPathInRepo) === null ? m.configFile : join(dir, `variant-${variant.name}.yml`);
      open = await adopt(taskDir, m, e, configFile);
      if (!open) {
        const start = startLock.then(() =>
          startRun({
            dir: taskDir,
            configFile,
            overrides: runOverrides(m, e.strategy),
            seed: e.seed,
            concurrency: width,
            now: o.now(),
            ...(o.env ? { env: o.env } : {}),
          }),
        );
        startLock = start.catch(() => {});
        open = await start;
      }
      e.run = open.state.id;
      await save();
      for (const w of open.warnings) if (!noted.has(w)) o.log(`${clock()} note: ${w}`);
      for (const w of open.warnings) noted.add(w);
    }
    states.set(open.state.id, open.state);
    spentAtStart.set(open.state.id, spentAtStart.get(open.state.id) ?? spentOf(open.state));
    if (runDone(open.state)) return;
    o.log(`${clock()} ${label}: ${open.state.rounds.length > 0 ? 'resumed' : 'started'} as run ${open.state.id}`);
    const t0 = Date.now();
    const result = await drive(open.state, {
      store: open.store,
      forge: open.forge,
      info: { ...open.info, concurrency: width },
      isolation: open.isolation,
      signal,
      onEvent: (ev) => {
        states.set(ev.state.id, ev.state);
        const line =
          ev.type === 'episode-done' || (ev.type === 'decided' && ev.round.kind === 'fork') ? eventLine(ev) : null;
        if (line) o.log(`${clock()}   #${i + 1} ${line}`);
      },
    }).finally(async () => {
      e.wallSeconds = Math.round((e.wallSeconds + (Date.now() - t0) / 1000) * 1000) / 1000;
      await save();
    });
    states.set(result.state.id, result.state);
    // A full disk stops the whole comparison, which `--resume` continues once there is space.
    if (result.problem) throw new Error(`${label}: ${result.problem}`);
    const { repo, taskDir: where, scratch } = open.info;
    await writeReports(open.store, result.state, { repo, taskDir: where, scratch });
    if (result.stopped && result.stopped.code === 2 && !failure) {
      failure = { code: 2, message: `${label}: ${result.stopped.message}` };
      halt.abort('setup');
    }
    if (result.interrupted) {
      if (!halt.signal.aborted) interrupted = true;
      return;
    }
    const best = result.state.best?.score;
    o.log(
      `${clock()} ${label} ${result.stopped ? `stopped: ${result.stopped.message}` : `finished: best ${best === undefined ? 'none' : formatNumber(best, 4)}`}, ` +
        `spent ${formatNumber(spentOf(result.state), 2)} ${base.budget.unit} in ${duration((Date.now() - t0) / 1000)}. ${estimate()}`,
    );
    await outputs();
  };

  // 3. The runs, scheduled in plan order.
  const pending = m.entries.map((_, i) => i).filter((i) => !runDone(stateOf(m, i, states)));
  o.log(
    `${m.kind} ${m.id}: ${total} runs, ${pending.length} to do; up to ${limit} episodes at once${resumed ? ' (resumed)' : ''}`,
  );
  const error = await scheduleRuns(
    m,
    pending,
    limit,
    (i) => Math.min(limit, runWidth(entryConfig(m, i, states, configPathInRepo))),
    runEntry,
    signal,
    halt,
  );
  m.wallSeconds = Math.round(((m.wallSeconds ?? 0) + (Date.now() - started) / 1000) * 1000) / 1000;
  await save();
  await release();
  if (error !== null) throw error;
  if (o.signal?.aborted) interrupted = true;
  const results = await outputs();
  const end = { manifest: m, results, config: base, folder: dir, resumed };
  if (failure) return { ...end, ...(failure as { code: number; message: string }) };
  return { ...end, code: interrupted ? 130 : results.runs.some((r) => r.best !== null) ? 0 : 1 };
}

/**
 * results.json, report.md and chart.svg of the compare, from its runs' states as they are; the
 * report shows the compare's idea map when `forkflush map` made one (map.json beside them).
 */
export async function writeCompareOutputs(
  dir: string,
  m: CompareManifest,
  states: Map<string, RunState>,
  base: Config,
  taskDir: string,
): Promise<CompareResults> {
  const results = compareResults(m, states, base);
  const options = { direction: base.grader.direction, budget: results.budget.total, variants: m.variants.length };
  const chart = compareChartData(chartGroups(m, states), options);
  const title = `${m.id}: best score so far versus spend, ${m.seeds.length} seed${m.seeds.length === 1 ? '' : 's'} per strategy`;
  await writeAtomic(join(dir, 'chart.svg'), renderCompareChartSvg(chart, { title, unit: base.budget.unit }));
  await writeAtomic(join(dir, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
  const map = await readMap(dir);
  await writeAtomic(
    join(dir, 'report.md'),
    renderCompareReport(results, { chartFile: 'chart.svg', taskDir, ...(map ? { map, mapFile: 'map.svg' } : {}) }),
  );
  return results;
}

/** The config a planned run starts with (a started one's own), for its width. */
function entryConfig(m: CompareManifest, i: number, states: Map<string, RunState>, inRepo: string | null): Config {
  const st = stateOf(m, i, states);
  if (st) return st.config;
  const e = m.entries[i] as CompareManifest['entries'][number];
  const v = m.variants.find((x) => x.name === e.variant) as Variant;
  return parseConfig(variantText(m, v, inRepo) ?? m.configText, `variant ${v.name}`, runOverrides(m, e.strategy));
}

function stateOf(m: CompareManifest, i: number, states: Map<string, RunState>): RunState | null {
  const run = m.entries[i]?.run;
  return run ? (states.get(run) ?? null) : null;
}

/**
 * A run this entry started just before a crash, before the manifest recorded it: one nobody else
 * claims, started after the compare, with the entry's seed, strategy and config file.
 */
async function adopt(
  taskDir: string,
  m: CompareManifest,
  e: CompareManifest['entries'][number],
  configFile: string,
): Promise<OpenRun | null> {
  const claimed = new Set(m.entries.flatMap((x) => [x.run, ...(x.abandoned ?? [])]));
  for (const id of await RunStore.list(taskDir)) {
    if (claimed.has(id)) continue;
    const store = RunStore.forRun(taskDir, id);
    const info = await store.info().catch(() => null);
    const st = await store.load().catch(() => null);
    if (!info || !st || info.startedAt < m.createdAt || info.configFile !== configFile) continue;
    if (st.seed === e.seed && st.config.strategy === e.strategy && runRecord(e, st).status !== 'failed')
      return openRun(taskDir, id);
  }
  return null;
}

/** The kind's compares in the task folder that have runs left to do, oldest first. */
/**
 * The compares of this kind with a run still to do, oldest first. A damaged manifest stops a
 * resume (it may be the one to continue) and is passed over by a new compare.
 */
async function unfinished(taskDir: string, kind: string, resuming: boolean): Promise<CompareManifest[]> {
  const root = RunStore.runsDir(taskDir);
  const names = (await readdir(root).catch(() => [] as string[])).filter((n) => n.startsWith(`${kind}-`)).sort();
  const out: CompareManifest[] = [];
  for (const name of names) {
    const file = join(root, name, 'compare.json');
    const text = await readFile(file, 'utf8').catch(() => null);
    if (text === null) continue;
    let m: CompareManifest;
    try {
      m = parseManifest(text, file);
    } catch (e) {
      if (resuming || !(e instanceof RecordError)) throw e;
      continue;
    }
    for (const e of m.entries) {
      if (!runDone(e.run ? await loadState(taskDir, e.run) : null)) {
        out.push(m);
        break;
      }
    }
  }
  return out;
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

const loadState = (taskDir: string, id: string) =>
  RunStore.forRun(taskDir, id)
    .load()
    .catch(() => null);

function pick<T extends object, K extends keyof T>(o: T, keys: K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
}
