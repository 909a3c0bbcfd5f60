// forkflush probe's figures and its recommendation, from known runs; the threshold is method.ts's.
import { describe, expect, it } from 'vitest';
import { PROBE_SPREAD } from '../../src/core/method.js';
import { analyzeProbe, probeBudgetEach, probeText } from '../../src/core/probe.js';
import { probeRun } from './helpers.js';

const rec = (best: number | null, seed: number) => probeRun(best, seed);
const probe = (bests: (number | null)[], o: { initial?: number | null; direction?: 'maximize' | 'minimize' } = {}) =>
  analyzeProbe(
    bests.map((b, i) => rec(b, i + 1)),
    {
      direction: o.direction ?? 'maximize',
      initial: o.initial === undefined ? 50 : o.initial,
      dir: 'my task',
      planned: 400,
      budgetEach: 48,
      unit: 'tokens',
    },
  );

describe('forkflush probe', () => {
  it('sees a clear spread: help likely', () => {
    const a = probe([60, 70, 80, 90]);
    expect(a).toMatchObject({ runs: 4, scored: 4, improved: 4, best: 90, worst: 60, range: 30, span: 40 });
    expect(a.sd).toBeCloseTo(12.9099, 4);
    expect(a.relativeSd).toBeCloseTo(12.9099 / 40, 4);
    expect(a.recommendation).toBe('help likely');
    expect(a.reason).toBe(
      'The 4 runs ended between 60 and 90 (range 30, sd 12.9099), an sd of 32.3% of the gain from the initial 50 to the best, at or above the 5% line: runs disagree, and a fork round keeps the best of K of them.',
    );
    expect(a.next).toBe(
      "forkflush run 'my task' --budget 400   (to measure it on this task first: forkflush compare 'my task' --budget 400 --strategies fork-and-flush,single-run,best-of-n --seeds 3)",
    );
  });

  it('sees runs that agree: little to gain', () => {
    const a = probe([90, 90.5, 90.2, 90.1]);
    expect(a.relativeSd).toBeLessThan(PROBE_SPREAD);
    expect(a.recommendation).toBe('little to gain');
    expect(a.reason).toMatch(
      /^The 4 runs ended between 90 and 90.5 \(range 0.5, sd 0.216\), an sd of 0.5% of the gain/,
    );
    expect(a.next).toBe("forkflush run 'my task' --budget 400 --strategy single-run");
  });

  it('sees no run improve: too hard at this budget', () => {
    const a = probe([50, 50, 50, 50]);
    expect(a).toMatchObject({ improved: 0, recommendation: 'too hard at this budget' });
    expect(a.reason).toBe(
      "None of the 4 runs improved on the initial score (50) with 48 tokens each: at this budget there is no spread for forking to choose from. Probe again with more (or check the grader and the agent's logs).",
    );
    expect(a.next).toBe("forkflush probe 'my task' --budget 400 --budget-each 96");
    expect(probe([null, null, null, null], { initial: null }).recommendation).toBe('too hard at this budget');
    expect(probe([null, 61, null, null], { initial: null })).toMatchObject({
      recommendation: 'too hard at this budget',
      scored: 1,
    });
  });

  it('turns round for minimize, and measures from the worst run without an initial score', () => {
    expect(probe([40, 30, 20, 10], { direction: 'minimize' })).toMatchObject({
      best: 10,
      worst: 40,
      span: 40,
      recommendation: 'help likely',
    });
    const a = probe([10, 20, 30, 40], { initial: null });
    expect(a).toMatchObject({ improved: 4, span: 30 });
    expect(a.reason).toContain('of the gain from the worst run to the best');
  });

  it('puts the line exactly at the threshold', () => {
    // sd of [0, 1] is 0.7071; the span from 0 to 1 is 1, or from 0 to 14.14 when the initial is lower.
    const at = (initial: number) =>
      probe(
        [0, 1].map((x) => x + 100),
        { initial },
      ).recommendation;
    expect(at(100 - (Math.SQRT1_2 / PROBE_SPREAD - 1))).toBe('help likely');
    expect(at(100 - (Math.SQRT1_2 / PROBE_SPREAD - 1) - 0.01)).toBe('little to gain');
  });

  it('gives each run two episodes of the planned run by default', () => {
    expect(probeBudgetEach({ total: 400, episode: 24 })).toBe(48);
    expect(probeBudgetEach({ total: 30, episode: 24 })).toBe(30);
  });

  it('prints the figures, the recommendation, why and what next', () => {
    expect(probeText(probe([60, 70, 80, 90])).split('\n')).toEqual([
      'runs: 4 (best scores 60, 70, 80, 90); initial score 50; improved: 4 of 4',
      'range 30, sd 12.9099, sd relative to the gain 32.3% (threshold 5%)',
      '',
      'recommendation: help likely',
      expect.stringMatching(/^The 4 runs/),
      '',
      expect.stringMatching(/^next: forkflush run 'my task'/),
    ]);
  });
});
