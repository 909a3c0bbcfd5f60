// `forkflush probe`: will forking help here? A few short independent single runs, and their spread
// (method.md, "Where it helps": measure spread first). The spread is the sd of the runs' best
// scores relative to the gain they made; the threshold is PROBE_SPREAD in method.ts, a judgement.
import type { RunRecord } from './compare/results.js';
import { type Direction, goodness, sd } from './compare/stats.js';
import { PROBE_EPISODES_EACH, PROBE_GAIN_NOISE, PROBE_SPREAD } from './method.js';
import { formatNumber, shellQuote } from './text.js';

export type Recommendation = 'help likely' | 'little to gain' | 'too hard at this budget' | 'none yet';

export interface ProbeAnalysis {
  runs: number;
  /** Runs whose best has a score (the initial workspace's counts). */
  scored: number;
  initial: number | null;
  bests: (number | null)[];
  best: number | null;
  worst: number | null;
  range: number | null;
  sd: number | null;
  /** The gain the runs made: the best seen minus the initial score (the worst run's without one). */
  span: number | null;
  /** sd / span: the spread, relative to the gain (0 when there is no gain to speak of). */
  relativeSd: number | null;
  /** Runs that ended better than the initial workspace (any score, when it has none). */
  improved: number;
  threshold: number;
  recommendation: Recommendation;
  /** One sentence that says why, with the figures. */
  reason: string;
  /** The command to use next. */
  next: string;
}

/** The default budget of each probe run: PROBE_EPISODES_EACH serial episodes of the planned run. */
export function probeBudgetEach(planned: { total: number; episode: number }): number {
  return Math.min(planned.total, PROBE_EPISODES_EACH * planned.episode);
}

export function analyzeProbe(
  records: RunRecord[],
  o: {
    direction: Direction;
    initial: number | null;
    dir: string;
    planned: number | null;
    budgetEach: number;
    unit: string;
    /** Why no run did any work (local/compare.ts), when none did. */
    idle?: string;
    /** The probe's runs planned, when some did not end (interrupted, or stopped): it recommends nothing yet. */
    unfinishedOf?: number;
  },
): ProbeAnalysis {
  const bests = records.map((r) => r.best);
  const xs = bests.filter((b): b is number => b !== null);
  const g = (x: number) => goodness(x, o.direction);
  const best = xs.length > 0 ? xs.reduce((a, b) => (g(b) > g(a) ? b : a)) : null;
  const worst = xs.length > 0 ? xs.reduce((a, b) => (g(b) < g(a) ? b : a)) : null;
  const range = best !== null && worst !== null ? Math.abs(best - worst) : null;
  const spread = sd(xs);
  const noise = (x: number, from: number) =>
    Number.isInteger(x) && Number.isInteger(from) ? 0 : PROBE_GAIN_NOISE * Math.max(Math.abs(x), Math.abs(from));
  const gained = (x: number, from: number) => g(x) - g(from) > noise(x, from);
  const improved = xs.filter((x) => o.initial === null || gained(x, o.initial)).length;
  const floor = o.initial ?? worst;
  const span = best !== null && floor !== null ? Math.abs(best - floor) : null;
  const relativeSd = spread !== null && span !== null ? (span > 0 ? spread / span : 0) : null;
  const n = records.length;
  const f = (x: number | null) => (x === null ? '-' : formatNumber(x, 4));
  const dir = shellQuote(o.dir);
  const budget = o.planned !== null ? ` --budget ${formatNumber(o.planned, 6)}` : '';
  const each = `${formatNumber(o.budgetEach, 4)} ${o.unit}`;
  const base = {
    runs: n,
    scored: xs.length,
    initial: o.initial,
    bests,
    best,
    worst,
    range,
    sd: spread,
    span,
    relativeSd,
    improved,
    threshold: PROBE_SPREAD,
  };
  if (o.unfinishedOf !== undefined) {
    // Part of the runs says nothing of the spread of all of them.
    return {
      ...base,
      recommendation: 'none yet',
      reason: `Only ${n} of the ${o.unfinishedOf} runs planned ended: no recommendation from part of them.`,
      next: `forkflush probe ${dir} --resume`,
    };
  }
  if (o.idle) {
    // More budget buys the same: the agent is what to look at.
    return {
      ...base,
      recommendation: 'too hard at this budget',
      reason: `No run did any work (${o.idle}): a bigger budget would buy the same. Check the agent first.`,
      next: `forkflush run ${dir} --smoke`,
    };
  }
  if (improved === 0 || xs.length < 2 || relativeSd === null) {
    const why =
      improved === 0
        ? `none of the ${n} runs improved on the initial score (${o.initial === null ? 'none' : f(o.initial)}) with ${each} each`
        : `only ${xs.length} of the ${n} runs got a score with ${each} each, too few to measure a spread`;
    return {
      ...base,
      recommendation: 'too hard at this budget',
      reason: `${capital(why)}: at this budget there is no spread for forking to choose from. Probe again with more (or check the grader and the agent's logs).`,
      next: `forkflush probe ${dir}${budget} --budget-each ${formatNumber(o.budgetEach * 2, 4)}`,
    };
  }
  const figures =
    `the ${n} runs ended between ${f(worst)} and ${f(best)} (range ${f(range)}, sd ${f(spread)}), ` +
    `an sd of ${formatNumber(relativeSd * 100, 1)}% of the gain from ${o.initial === null ? 'the worst run' : `the initial ${f(o.initial)}`} to the best`;
  if (relativeSd >= PROBE_SPREAD) {
    return {
      ...base,
      recommendation: 'help likely',
      reason: `${capital(figures)}, at or above the ${PROBE_SPREAD * 100}% line: runs disagree, and a fork round keeps the best of K of them.`,
      next: `forkflush run ${dir}${budget}   (to measure it on this task first: forkflush compare ${dir}${budget} --strategies fork-and-flush,single-run,best-of-n --seeds 3)`,
    };
  }
  return {
    ...base,
    recommendation: 'little to gain',
    reason: `${capital(figures)}, under the ${PROBE_SPREAD * 100}% line: the runs agree, so forking would choose between near-equal branches and gain little for its shallower branches.`,
    next: `forkflush run ${dir}${budget} --strategy single-run`,
  };
}

/** What a probe will run (`--dry-run`): its runs, their cost and its share of the planned budget. */
export function probePlan(o: {
  runs: number;
  each: number;
  planned: number;
  unit: string;
  initial: number | null;
}): string {
  const all = o.runs * o.each;
  return (
    `${o.runs} single runs of ${formatNumber(o.each, 4)} ${o.unit} (${formatNumber(all, 4)} ${o.unit}, ` +
    `${Math.round((all * 100) / o.planned)}% of the planned ${formatNumber(o.planned, 4)}); initial score ${o.initial === null ? 'none' : formatNumber(o.initial, 4)}.`
  );
}

/** `forkflush probe`'s text: the runs, the figures, the recommendation and the next command. */
export function probeText(a: ProbeAnalysis): string {
  const f = (x: number | null) => (x === null ? '-' : formatNumber(x, 4));
  return [
    `runs: ${a.runs} (best scores ${a.bests.map(f).join(', ')}); initial score ${f(a.initial)}; improved: ${a.improved} of ${a.runs}`,
    `range ${f(a.range)}, sd ${f(a.sd)}, sd relative to the gain ${a.relativeSd === null ? '-' : `${formatNumber(a.relativeSd * 100, 1)}%`} (threshold ${a.threshold * 100}%)`,
    '',
    `recommendation: ${a.recommendation}`,
    a.reason,
    '',
    `next: ${a.next}`,
  ].join('\n');
}

function capital(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
