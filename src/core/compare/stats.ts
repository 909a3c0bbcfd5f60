// The few statistics a comparison needs, pure and seeded: mean, sample sd, min–max normalization,
// the paired differences of two strategies over the same seeds, a bootstrap interval of their mean
// and an exact sign test. Nothing here knows about runs; compare.ts feeds it numbers.
import { BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE } from '../method.js';
import { randomFrom } from '../rng.js';

export type Direction = 'maximize' | 'minimize';

export function mean(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const sum = xs.reduce((s, x) => s + x, 0);
  // Scores near the largest double (a grader's "infeasible") overflow the sum: each taken as its share.
  return Number.isFinite(sum) ? sum / xs.length : xs.reduce((s, x) => s + x / xs.length, 0);
}

/** The sample standard deviation (n - 1), as the paper's Table 1 reports it; null below two values. */
export function sd(xs: number[]): number | null {
  const m = mean(xs);
  if (m === null || xs.length < 2) return null;
  const plain = Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1));
  if (Number.isFinite(plain)) return plain;
  // Squares of huge deviations overflow: scaled by the largest one.
  const scale = Math.max(...xs.map((x) => Math.abs(x - m)));
  if (!Number.isFinite(scale)) return null;
  return scale * Math.sqrt(xs.reduce((s, x) => s + ((x - m) / scale) ** 2, 0) / (xs.length - 1));
}

/** Higher is better: the score as a maximizer reads it. */
export function goodness(score: number, direction: Direction): number {
  return direction === 'maximize' ? score : -score;
}

/** The better and the worse of two scores under the direction. */
export function bestOf(xs: number[], direction: Direction): number | null {
  if (xs.length === 0) return null;
  return direction === 'maximize' ? Math.max(...xs) : Math.min(...xs);
}

export function worstOf(xs: number[], direction: Direction): number | null {
  if (xs.length === 0) return null;
  return direction === 'maximize' ? Math.min(...xs) : Math.max(...xs);
}

/**
 * Min–max normalization over every scored run of a comparison: the worst run's score is 0, the best
 * run's 1, whatever the direction ((x - worst) / (best - worst)). Null when every run scored the
 * same (there is no range to normalize by). Linear, so the normalized mean is the mean's.
 */
export function normalizer(all: number[], direction: Direction): ((x: number) => number) | null {
  const best = bestOf(all, direction);
  const worst = worstOf(all, direction);
  if (best === null || worst === null || best === worst) return null;
  return (x) => (x - worst) / (best - worst);
}

export interface Paired {
  /** Seeds where both sides have a score. */
  pairs: number;
  /** Seeds where one side or both have none (left out). */
  unpaired: number;
  wins: number;
  losses: number;
  ties: number;
  /** The mean of the differences, positive when the first side is better (in score units). */
  difference: number | null;
  /** The bootstrap interval (CONFIDENCE) of that mean; null below three pairs. */
  interval: [number, number] | null;
  /** The two-sided exact sign test over the seeds that were not ties; null when all tied. */
  signP: number | null;
}

/**
 * Compares two strategies seed by seed: `a[seed]` against `b[seed]` (null: no score). Differences
 * are signed so that positive means `a` is better under the direction.
 */
export function paired(a: Map<number, number | null>, b: Map<number, number | null>, direction: Direction): Paired {
  const diffs: number[] = [];
  let unpaired = 0;
  for (const [seed, x] of a) {
    if (!b.has(seed)) continue;
    const y = b.get(seed) ?? null;
    if (x === null || y === null) {
      unpaired++;
      continue;
    }
    diffs.push(goodness(x, direction) - goodness(y, direction));
  }
  const wins = diffs.filter((d) => d > 0).length;
  const losses = diffs.filter((d) => d < 0).length;
  return {
    pairs: diffs.length,
    unpaired,
    wins,
    losses,
    ties: diffs.length - wins - losses,
    difference: mean(diffs),
    interval: diffs.length >= 3 ? bootstrapInterval(diffs) : null,
    signP: wins + losses > 0 ? signTest(wins, losses) : null,
  };
}

/**
 * The percentile bootstrap interval of the mean: resample the values with replacement
 * BOOTSTRAP_RESAMPLES times from a fixed seed, and take the middle CONFIDENCE of the means.
 */
export function bootstrapInterval(xs: number[], seed = BOOTSTRAP_SEED): [number, number] {
  const random = randomFrom(seed);
  const means: number[] = [];
  for (let i = 0; i < BOOTSTRAP_RESAMPLES; i++) {
    let s = 0;
    for (let j = 0; j < xs.length; j++) s += xs[Math.floor(random() * xs.length)] as number;
    means.push(s / xs.length);
  }
  means.sort((p, q) => p - q);
  const tail = (1 - CONFIDENCE) / 2;
  return [percentile(means, tail), percentile(means, 1 - tail)];
}

function percentile(sorted: number[], q: number): number {
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const a = sorted[lo] as number;
  const b = sorted[Math.min(lo + 1, sorted.length - 1)] as number;
  return a + (b - a) * (at - lo);
}

/** The two-sided exact sign test: the chance of a split at least this uneven if either side were as likely. */
export function signTest(wins: number, losses: number): number {
  const n = wins + losses;
  const k = Math.min(wins, losses);
  let tail = 0;
  for (let i = 0; i <= k; i++) tail += binomial(n, i);
  return Math.min(1, (2 * tail) / 2 ** n);
}

function binomial(n: number, k: number): number {
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}
