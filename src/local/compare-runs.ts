// The runs of a compare as they run: each entry's run opened (its own, one a crash left behind, or
// a new one), driven beside the others, and its outputs (results.json, report.md, chart.svg)
// written after each. compare.ts chooses the manifest and schedules the entries.
import { join } from 'node:path';
import { spent as spentOf } from '../core/budget.js';
import { chartGroups, compareChartData, renderCompareChartSvg } from '../core/compare/chart.js';
import type { Variant } from '../core/compare/config.js';
import { type CompareManifest, runOverrides, variantText } from '../core/compare/plan.js';
import { duration, renderCompareReport } from '../core/compare/report.js';
import { type CompareResults, compareResults, progressEstimate, runDone, runRecord } from '../core/compare/results.js';
import { type Config, ConfigError, parseConfig } from '../core/config.js';
import { UserError } from '../core/errors.js';
import type { RunState } from '../core/state.js';
import { runStop } from '../core/stop.js';
import { formatNumber } from '../core/text.js';
import { eventLine } from './progress.js';
import { readMap, writeReports } from './reports.js';
import { drive } from './runner.js';
import { type OpenRun, openRun, startRun } from './start.js';
import { RunStore, writeAtomic } from './store.js';

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
export function entryConfig(
  m: CompareManifest,
  i: number,
  states: Map<string, RunState>,
  inRepo: string | null,
): Config {
  const st = stateOf(m, i, states);
  if (st) return st.config;
  const e = m.entries[i] as CompareManifest['entries'][number];
  const v = m.variants.find((x) => x.name === e.variant) as Variant;
  return parseConfig(variantText(m, v, inRepo) ?? m.configText, `variant ${v.name}`, runOverrides(m, e.strategy));
}

export function stateOf(m: CompareManifest, i: number, states: Map<string, RunState>): RunState | null {
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

/** What of the compare's options its runs read. */
interface RunsOptions {
  now: () => Date;
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  log: (line: string) => void;
}

/** What the runs of one compare share while they run: the manifest, their states, and the compare's stop. */
interface CompareAt {
  m: CompareManifest;
  dir: string;
  taskDir: string;
  /** The config of the manifest's first strategy: the budget's unit, the branches. */
  base: Config;
  configPathInRepo: string | null;
}

/** The runs of a compare as they run side by side: each entry opened or started, driven, and reported. */
export class CompareRuns {
  /** Stops the other runs when one's setup cannot work. */
  readonly halt = new AbortController();
  readonly signal: AbortSignal;
  /** When this process began the runs, on the monotonic clock (wall clock steps do not move it). */
  readonly started = performance.now();
  failure: { code: number; message: string } | null = null;
  interrupted = false;
  private readonly spentAtStart: Map<string, number>;
  private saving = Promise.resolve();
  private startLock: Promise<unknown> = Promise.resolve();
  /** A note every run gets (the plan's, the sandbox's) is said once. */
  private readonly noted = new Set<string>();
  private written: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly o: RunsOptions,
    private readonly c: CompareAt,
    private readonly states: Map<string, RunState>,
  ) {
    this.signal = o.signal ? AbortSignal.any([o.signal, this.halt.signal]) : this.halt.signal;
    this.spentAtStart = new Map([...states].map(([id, st]) => [id, spentOf(st)]));
  }

  /** The manifest, saved one write at a time. */
  save(): Promise<void> {
    const { m, dir } = this.c;
    this.saving = this.saving.then(() => writeAtomic(join(dir, 'compare.json'), `${JSON.stringify(m, null, 1)}\n`));
    return this.saving;
  }

  /**
   * The outputs are written one set at a time, each from the states as they are then: runs that
   * finish together must not interleave their writes (an older set could land last).
   */
  outputs(): Promise<CompareResults> {
    const { m, dir, base, taskDir } = this.c;
    const next = this.written.then(() => writeCompareOutputs(dir, m, this.states, base, taskDir));
    this.written = next.catch(() => {});
    return next;
  }

  private clock(): string {
    const t = Math.floor((performance.now() - this.started) / 1000);
    return `[${String(Math.floor(t / 60)).padStart(2, '0')}:${String(t % 60).padStart(2, '0')}]`;
  }

  private estimate(): string {
    const { m, base } = this.c;
    const left = progressEstimate({
      manifest: m,
      states: this.states,
      spentAtStart: this.spentAtStart,
      elapsedSeconds: (performance.now() - this.started) / 1000,
      budget: m.budget ?? base.budget.total,
    });
    if (left.runs === 0) return 'All runs are done.';
    const time = left.seconds === null ? '? (after the first spend)' : duration(left.seconds);
    return `${left.runs} left: about ${time} and ${formatNumber(left.spend, 2)} ${base.budget.unit} to go`;
  }

  /** Entry i: its run opened (resumed, adopted or started), driven with `width` episodes at once, and reported. */
  async runEntry(i: number, width: number): Promise<void> {
    const { m, base } = this.c;
    const e = m.entries[i] as CompareManifest['entries'][number];
    const label = `run ${i + 1} of ${m.entries.length} (${e.strategy}${m.variants.length > 1 ? `, ${e.variant}` : ''}, seed ${e.seed})`;
    const open = await this.openEntry(e, width).catch((err: unknown) => {
      // A run that cannot start (a variant's agent not found, a config it makes invalid) would be
      // refused the same way on every try: the compare stops, naming the run, with the others kept.
      if (!(err instanceof UserError || err instanceof ConfigError)) throw err;
      if (!this.failure) this.failure = { code: 2, message: `${label}: ${err.message}` };
      this.halt.abort('setup');
      return null;
    });
    if (!open) return;
    this.states.set(open.state.id, open.state);
    this.spentAtStart.set(open.state.id, this.spentAtStart.get(open.state.id) ?? spentOf(open.state));
    if (runDone(open.state)) return;
    this.o.log(
      `${this.clock()} ${label}: ${open.state.rounds.length > 0 ? 'resumed' : 'started'} as run ${open.state.id}`,
    );
    const t0 = performance.now();
    const result = await drive(open.state, {
      store: open.store,
      forge: open.forge,
      info: { ...open.info, concurrency: width },
      isolation: open.isolation,
      signal: this.signal,
      ...(this.o.env ? { env: this.o.env } : {}),
      onEvent: (ev) => {
        this.states.set(ev.state.id, ev.state);
        const line =
          ev.type === 'episode-done' ||
          ev.type === 'episode-warning' ||
          (ev.type === 'decided' && ev.round.kind === 'fork')
            ? eventLine(ev)
            : null;
        if (line) this.o.log(`${this.clock()}   #${i + 1} ${line}`);
      },
    }).finally(async () => {
      e.wallSeconds = Math.round((e.wallSeconds + (performance.now() - t0) / 1000) * 1000) / 1000;
      await this.save();
    });
    this.states.set(result.state.id, result.state);
    // A full disk stops the whole comparison, which `--resume` continues once there is space.
    if (result.problem) throw new Error(`${label}: ${result.problem}`);
    const { repo, taskDir: where, scratch } = open.info;
    await writeReports(open.store, result.state, { repo, taskDir: where, scratch });
    // What every other run of the task would meet too: a setup or an agent that cannot work, a grader that scores nothing.
    const stop = result.stopped;
    if (stop && (stop.code === 2 || stop.graderScoredNothing) && !this.failure) {
      this.failure = { code: stop.code, message: `${label}: ${stop.message}` };
      this.halt.abort('setup');
    }
    if (result.interrupted) {
      if (!this.halt.signal.aborted) this.interrupted = true;
      return;
    }
    const best = result.state.best?.score;
    this.o.log(
      `${this.clock()} ${label} ${result.stopped ? `stopped: ${result.stopped.message}` : `finished: best ${best === undefined ? 'none' : formatNumber(best, 4)}`}, ` +
        `spent ${formatNumber(spentOf(result.state), 2)} ${base.budget.unit} in ${duration((performance.now() - t0) / 1000)}. ${this.estimate()}`,
    );
    await this.outputs();
  }

  /** The entry's run: its own, or (gone, or its setup could not work) one adopted or started anew. */
  private async openEntry(e: CompareManifest['entries'][number], width: number): Promise<OpenRun> {
    const { m, dir, taskDir, configPathInRepo } = this.c;
    // A run whose setup could not work (fixed since), or whose folder is gone, is started again.
    let open: OpenRun | null = e.run ? await openRun(taskDir, e.run).catch(() => null) : null;
    if (e.run && (!open || runStop(open.state)?.code === 2)) {
      e.abandoned = [...(e.abandoned ?? []), e.run];
      [open, e.run] = [null, null];
    }
    if (open) return open;
    const variant = m.variants.find((v) => v.name === e.variant) as Variant;
    const configFile =
      variantText(m, variant, configPathInRepo) === null ? m.configFile : join(dir, `variant-${variant.name}.yml`);
    open = await adopt(taskDir, m, e, configFile);
    if (!open) {
      const start = this.startLock.then(() =>
        startRun({
          dir: taskDir,
          configFile,
          overrides: runOverrides(m, e.strategy),
          seed: e.seed,
          concurrency: width,
          now: this.o.now(),
          ...(this.o.env ? { env: this.o.env } : {}),
        }),
      );
      this.startLock = start.catch(() => {});
      open = await start;
    }
    e.run = open.state.id;
    await this.save();
    for (const w of open.warnings) if (!this.noted.has(w)) this.o.log(`${this.clock()} note: ${w}`);
    for (const w of open.warnings) this.noted.add(w);
    return open;
  }
}
