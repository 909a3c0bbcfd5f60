// The results of a comparison of strategies (and variants of the config) at equal budget, as the
// paper evaluates the method (method.md, Table 1, the ablation): what each run gave (from the run's
// own state), and the summary: mean, sd, best and worst per strategy, the min–max normalized means,
// and fork-and-flush against the baselines seed by seed. Pure: the plan is plan.ts, and the
// local shell (local/compare.ts) starts and drives the runs; this only reads their states.
import { charged, spent } from '../budget.js';
import type { Config, Strategy } from '../config.js';
import { nothingDone } from '../end-warnings.js';
import { PAPER_RESULTS } from '../method.js';
import { allEpisodes, type RunState } from '../state.js';
import { runStop } from '../stop.js';
import type { Variant } from './config.js';
import type { CompareEntry, CompareManifest } from './plan.js';
import { type Direction, goodness, mean, normalizer, type Paired, paired, sd } from './stats.js';

/**
 * finished; stopped: nothing scored in its opening round (done: resuming would not change that);
 * failed: its setup cannot work (an agent that cannot start), redone once the setup is fixed.
 */
/** `idle`: finished, but no agent did any work (core/stop.ts nothingDone): its score is the initial one, no measure. */
export type RunStatus = 'finished' | 'idle' | 'stopped' | 'failed' | 'unfinished' | 'not started';

export interface RunRecord {
  strategy: Strategy;
  variant: string;
  seed: number;
  run: string | null;
  /** The best score the run found (the initial workspace's included); null: none. */
  best: number | null;
  spent: number;
  /** Episodes that have a result. */
  episodes: number;
  wallSeconds: number;
  status: RunStatus;
  initial: number | null;
  budget: number | null;
  /** Whether it spent its budget within one episode (its largest allowance). */
  spendOk: boolean | null;
}

/** A run is done when it finished, or stopped because nothing scored (resuming would not change that). */
export function runDone(state: RunState | null): boolean {
  if (!state) return false;
  return state.status === 'finished' || runStop(state)?.code === 1;
}

export function runRecord(e: CompareEntry, state: RunState | null): RunRecord {
  const base = { strategy: e.strategy, variant: e.variant, seed: e.seed, run: e.run, wallSeconds: e.wallSeconds };
  if (!state) {
    return {
      ...base,
      best: null,
      spent: 0,
      episodes: 0,
      status: 'not started',
      initial: null,
      budget: null,
      spendOk: null,
    };
  }
  const episodes = allEpisodes(state);
  const total = state.config.budget.total;
  const used = spent(state);
  const tolerance = Math.max(0, ...episodes.map((x) => Math.max(x.allowance, charged(x) - x.allowance)));
  const stop = state.status === 'finished' ? null : runStop(state);
  const finished = state.status === 'finished' ? (nothingDone(state) === null ? 'finished' : 'idle') : null;
  const status: RunStatus = finished ?? (stop ? (stop.code === 1 ? 'stopped' : 'failed') : 'unfinished');
  return {
    ...base,
    best: status === 'idle' ? null : (state.best?.score ?? null),
    spent: Math.round(used * 1e6) / 1e6,
    episodes: episodes.filter((x) => x.result).length,
    status,
    initial: state.base.score,
    budget: total,
    spendOk: status === 'unfinished' || status === 'failed' ? null : Math.abs(used - total) <= tolerance + 1e-9,
  };
}

export interface SummaryRow {
  strategy: Strategy;
  variant: string;
  /** Runs done (finished, or stopped with no score). */
  runs: number;
  /** Of those, runs with a score. */
  scored: number;
  mean: number | null;
  sd: number | null;
  max: number | null;
  min: number | null;
  /** The min–max normalized mean (stats.ts normalizer); null without a range or a score. */
  normalized: number | null;
  /** Best first: ties share a rank. */
  rank: number;
  spent: { mean: number | null; min: number | null; max: number | null };
  /** Runs whose spend missed the budget by more than one episode. */
  spendFlagged: number;
  wallSeconds: { mean: number | null; total: number };
}

export interface Comparison {
  a: { strategy: Strategy; variant: string };
  b: { strategy: Strategy; variant: string };
  /** a's normalized mean over b's, minus 1 (the paper's +66%); null when b's is 0 or missing. */
  relative: number | null;
  /**
   * a's mean gain over the initial score, over b's, minus 1: the same question in score units, for
   * when b normalizes to 0 (every run of b was the comparison's worst); null without an initial score.
   */
  relativeGain: number | null;
  /** The paper's relative improvement for the same pair, where it states one. */
  paper: number | null;
  paired: Paired;
}

export interface CompareResults {
  version: 1;
  compare: string;
  kind: 'compare' | 'probe';
  direction: Direction;
  budget: { total: number; unit: string };
  /** The initial workspace's score (the same for every run). */
  initial: number | null;
  seeds: number[];
  strategies: Strategy[];
  variants: string[];
  /** Every planned run has finished. */
  complete: boolean;
  /** The compare's own wall time against its runs' together: the ideal is the runs' divided by the concurrency. */
  wall: { compare: number | null; runs: number };
  /** The scores normalization maps to 0 and 1 (the worst and the best run's). */
  normalization: { worst: number; best: number } | null;
  runs: RunRecord[];
  summary: SummaryRow[];
  comparisons: Comparison[];
}

/** The results of a comparison from its manifest and its runs' states (by run id). */
export function compareResults(m: CompareManifest, states: Map<string, RunState>, config: Config): CompareResults {
  const direction = config.grader.direction;
  const records = m.entries.map((e) => runRecord(e, e.run ? (states.get(e.run) ?? null) : null));
  const done = (r: RunRecord) => r.status === 'finished' || r.status === 'stopped' || r.status === 'idle';
  const scores = records.filter((r) => done(r) && r.best !== null).map((r) => r.best as number);
  const norm = normalizer(scores, direction);
  const summary: SummaryRow[] = [];
  for (const v of m.variants) {
    for (const strategy of m.strategies) {
      const rs = records.filter((r) => r.strategy === strategy && r.variant === v.name && done(r));
      const xs = rs.flatMap((r) => (r.best === null ? [] : [r.best]));
      const avg = mean(xs);
      const spends = rs.map((r) => r.spent);
      summary.push({
        strategy,
        variant: v.name,
        runs: rs.length,
        scored: xs.length,
        mean: avg,
        sd: sd(xs),
        max: xs.length > 0 ? Math.max(...xs) : null,
        min: xs.length > 0 ? Math.min(...xs) : null,
        normalized: avg !== null && norm ? norm(avg) : null,
        rank: 0,
        spent: {
          mean: mean(spends),
          min: spends.length ? Math.min(...spends) : null,
          max: spends.length ? Math.max(...spends) : null,
        },
        spendFlagged: rs.filter((r) => r.spendOk === false).length,
        wallSeconds: { mean: mean(rs.map((r) => r.wallSeconds)), total: rs.reduce((s, r) => s + r.wallSeconds, 0) },
      });
    }
  }
  rankRows(summary, direction);
  const initial = records.find((r) => r.initial !== null)?.initial ?? null;
  const bySeed = (s: Strategy, v: string) =>
    new Map(records.filter((r) => r.strategy === s && r.variant === v && done(r)).map((r) => [r.seed, r.best]));
  const row = (s: Strategy, v: string) => summary.find((x) => x.strategy === s && x.variant === v);
  const comparisons: Comparison[] = [];
  const compare = (a: [Strategy, string], b: [Strategy, string], paper: number | null) => {
    const ra = row(...a);
    const rb = row(...b);
    if (!ra || !rb || ra.runs === 0 || rb.runs === 0) return;
    const relative = ra.normalized !== null && rb.normalized ? ra.normalized / rb.normalized - 1 : null;
    const gain = (x: number | null) =>
      x === null || initial === null ? null : goodness(x, direction) - goodness(initial, direction);
    const [ga, gb] = [gain(ra.mean), gain(rb.mean)];
    const relativeGain = ga !== null && gb !== null && gb > 0 ? ga / gb - 1 : null;
    comparisons.push({
      a: { strategy: a[0], variant: a[1] },
      b: { strategy: b[0], variant: b[1] },
      relative,
      relativeGain,
      paper,
      paired: paired(bySeed(...a), bySeed(...b), direction),
    });
  };
  for (const v of m.variants) {
    for (const base of ['single-run', 'best-of-n'] as const)
      compare(['fork-and-flush', v.name], [base, v.name], PAPER_RESULTS.improvement[base]);
  }
  const first = m.variants[0] as Variant;
  for (const v of m.variants.slice(1)) for (const s of m.strategies) compare([s, v.name], [s, first.name], null);
  return {
    version: 1,
    compare: m.id,
    kind: m.kind,
    direction,
    budget: { total: m.budget ?? config.budget.total, unit: config.budget.unit },
    initial,
    seeds: m.seeds,
    strategies: m.strategies,
    variants: m.variants.map((v) => v.name),
    complete: records.every(done),
    wall: {
      compare: m.wallSeconds ?? 0,
      runs: Math.round(records.reduce((t, r) => t + r.wallSeconds, 0) * 1000) / 1000,
    },
    normalization: norm
      ? {
          worst: direction === 'maximize' ? Math.min(...scores) : Math.max(...scores),
          best: direction === 'maximize' ? Math.max(...scores) : Math.min(...scores),
        }
      : null,
    runs: records,
    summary: sortRows(summary, direction),
    comparisons,
  };
}

/** Ranks rows best first by their mean (ties share a rank); rows without a score rank last. */
function rankRows(rows: SummaryRow[], direction: Direction): void {
  const sorted = sortRows(rows, direction);
  sorted.forEach((r, i) => {
    const prev = sorted[i - 1];
    r.rank = prev && prev.mean === r.mean ? prev.rank : i + 1;
  });
}

function sortRows(rows: SummaryRow[], direction: Direction): SummaryRow[] {
  const key = (r: SummaryRow) => (r.mean === null ? Number.NEGATIVE_INFINITY : goodness(r.mean, direction));
  return rows
    .map((r, i) => ({ r, i }))
    .sort((x, y) => key(y.r) - key(x.r) || x.i - y.i)
    .map(({ r }) => r);
}

/**
 * What is left of a comparison: its runs not done, the spend they still have, and the time that
 * should take at the pace of this session so far (seconds per unit of spend; null before any spend).
 */
export function progressEstimate(o: {
  manifest: CompareManifest;
  states: Map<string, RunState>;
  /** What each run had spent when this session began. */
  spentAtStart: Map<string, number>;
  elapsedSeconds: number;
  budget: number;
}): { runs: number; spend: number; seconds: number | null } {
  const states = [...o.states.values()];
  const pace = states.reduce((sum, st) => sum + spent(st) - (o.spentAtStart.get(st.id) ?? 0), 0);
  const left = o.manifest.entries.filter((e) => !runDone(e.run ? (o.states.get(e.run) ?? null) : null));
  const spend = left.reduce((sum, e) => {
    const st = e.run ? o.states.get(e.run) : undefined;
    return sum + Math.max(0, (st?.config.budget.total ?? o.budget) - (st ? spent(st) : 0));
  }, 0);
  const seconds = pace > 0 && o.elapsedSeconds > 0 ? (o.elapsedSeconds / pace) * spend : null;
  return { runs: left.length, spend, seconds };
}
