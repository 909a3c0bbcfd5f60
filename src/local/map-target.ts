// Which runs `forkflush map` maps and where its outputs go: --run ID (the run's folder), --compare
// ID (the compare's or probe's folder), else the newest compare, else the newest run; the config
// its settings come from; and the report.md that shows the map once it is drawn.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type CompareManifest, parseManifest, runOverrides } from '../core/compare/plan.js';
import { type Config, parseConfig } from '../core/config.js';
import { UserError } from '../core/errors.js';
import type { MapRecord } from '../core/map/record.js';
import type { RunState } from '../core/state.js';
import { writeCompareOutputs } from './compare-runs.js';
import { writeReports } from './reports.js';
import { loadConfig } from './start.js';
import { type RunInfo, RunStore } from './store.js';

export interface MapRun {
  store: RunStore;
  info: RunInfo;
  state: RunState;
  /** The compare's variant of the run, when the compare has several. */
  variant: string | null;
}

export interface MapTarget {
  kind: MapRecord['target']['kind'];
  id: string;
  /** Where map.json, map.svg and map.png go: the run's or the compare's folder. */
  folder: string;
  runs: MapRun[];
  manifest?: CompareManifest;
}

/** The runs to map: --run, --compare, else the newest compare, else the newest run. */
export async function findTarget(
  taskDir: string,
  o: { run?: string; compare?: string; dir: string },
): Promise<MapTarget> {
  if (o.run && o.compare) throw new UserError('give --run or --compare, not both');
  const root = RunStore.runsDir(taskDir);
  const runIds = await RunStore.list(taskDir);
  if (o.run) {
    if (!runIds.includes(o.run))
      throw new UserError(`no run ${o.run} in ${taskDir}; runs: ${runIds.join(', ') || 'none yet'}`);
    return runTarget(taskDir, o.run);
  }
  const names = (await readdir(root).catch(() => [] as string[])).sort();
  const compares = [];
  for (const n of names) if (await stat(join(root, n, 'compare.json')).catch(() => null)) compares.push(n);
  const id = o.compare ?? compares.filter((n) => n.startsWith('compare-')).at(-1);
  if (o.compare && !compares.includes(o.compare))
    throw new UserError(`no compare ${o.compare} in ${taskDir}; compares: ${compares.join(', ') || 'none yet'}`);
  if (id) return compareTarget(taskDir, id);
  const newest = runIds.at(-1);
  if (!newest)
    throw new UserError(`${taskDir} has no forkflush runs yet: make one with forkflush run (or compare) ${o.dir}`);
  return runTarget(taskDir, newest);
}

async function runTarget(taskDir: string, id: string): Promise<MapTarget> {
  const store = RunStore.forRun(taskDir, id);
  return {
    kind: 'run',
    id,
    folder: store.dir,
    runs: [{ store, info: await store.info(), state: await store.load(), variant: null }],
  };
}

async function compareTarget(taskDir: string, id: string): Promise<MapTarget> {
  const folder = join(RunStore.runsDir(taskDir), id);
  const file = join(folder, 'compare.json');
  const manifest = parseManifest(await readFile(file, 'utf8'), file);
  const runs: MapRun[] = [];
  for (const e of manifest.entries) {
    if (!e.run) continue;
    const store = RunStore.forRun(taskDir, e.run);
    const state = await store.load().catch(() => null);
    const info = await store.info().catch(() => null);
    if (state && info) runs.push({ store, info, state, variant: manifest.variants.length > 1 ? e.variant : null });
  }
  if (runs.length === 0)
    throw new UserError(`${manifest.kind} ${id} has no runs yet: run it first (forkflush ${manifest.kind} --resume)`);
  return { kind: manifest.kind, id, folder, runs, manifest };
}

/** The config the map reads its settings from: --config, the compare's, the task's, else the first run's. */
export async function mapConfig(taskDir: string, target: MapTarget, configFile?: string): Promise<Config> {
  const file = configFile ?? target.manifest?.configFile ?? target.runs[0]?.info.configFile;
  if (configFile || (file && (await stat(file).catch(() => null)))) return (await loadConfig(taskDir, file)).config;
  return (await loadConfig(taskDir).catch(() => null))?.config ?? (target.runs[0] as MapRun).state.config;
}

/**
 * The run's or the compare's report.md again, now with the map's section, from their records as
 * they are now: the judge may have taken hours, and a run resumed meanwhile has moved on. One
 * driven meanwhile is its driver's to write (its next report shows the map).
 */
export async function refreshReports(taskDir: string, target: MapTarget): Promise<void> {
  const store = target.kind === 'run' ? (target.runs[0] as MapRun).store : new RunStore(target.folder);
  const release = await store.lock().catch((e: unknown) => {
    if (e instanceof UserError) return null;
    throw e;
  });
  if (!release) return;
  try {
    if (target.kind === 'run') {
      const r = (await runTarget(taskDir, target.id)).runs[0] as MapRun;
      await writeReports(r.store, r.state, { repo: r.info.repo, taskDir: r.info.taskDir, scratch: r.info.scratch });
      return;
    }
    const now = await compareTarget(taskDir, target.id);
    const m = now.manifest as CompareManifest;
    const base = parseConfig(
      m.configText,
      m.configFile,
      runOverrides(m, m.strategies[0] as CompareManifest['strategies'][number]),
    );
    const states = new Map(now.runs.map((r) => [r.state.id, r.state]));
    await writeCompareOutputs(now.folder, m, states, base, taskDir);
  } finally {
    await release();
  }
}
