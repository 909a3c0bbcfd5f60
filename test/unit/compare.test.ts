// The statistics of forkflush compare, from runs made up by the real schedule (core/plan.ts
// simulate) whose best scores are known exactly: the Table-1 rows and their normalization, ties,
// a strategy whose runs all failed, equal spend, the paired comparison, the plan and its variants.
import { describe, expect, it } from 'vitest';
import type { Variant } from '../../src/core/compare/config.js';
import { type CompareManifest, checkVariants, planCompare, samePlan } from '../../src/core/compare/plan.js';
import { compareText, renderCompareReport, significance, tableRows } from '../../src/core/compare/report.js';
import { compareResults, progressEstimate, runDone, runRecord } from '../../src/core/compare/results.js';
import { bootstrapInterval, normalizer, paired, sd, signTest } from '../../src/core/compare/stats.js';
import { type Config, parseConfig, type Strategy } from '../../src/core/config.js';
import { simulate } from '../../src/core/plan.js';
import type { RunState } from '../../src/core/state.js';

const CONFIG_TEXT =
  'grader: {command: node grade.mjs}\nagent: {command: node agent.mjs}\nbudget: {total: 400, unit: tokens, episode: 24}\n';
const withDirection = (d: string) => CONFIG_TEXT.replace('node grade.mjs}', `node grade.mjs, direction: ${d}}`);

/** A whole run of the strategy whose every episode scores `best` (null: none) and spends `share` of its allowance. */
function runState(direction: string, strategy: Strategy, seed: number, best: number | null, share = 1): RunState {
  const c = parseConfig(`${withDirection(direction)}strategy: ${strategy}\n`, 't.yml');
  return simulate(c, (e) => ({ spent: e.allowance * share, score: best }), seed);
}

/** A compare of these strategies whose run of seed i scored bests[strategy][i]. */
function comparison(
  bests: Partial<Record<Strategy, (number | null)[]>>,
  o: { direction?: 'maximize' | 'minimize'; initial?: number | null; variants?: Variant[] } = {},
): { manifest: CompareManifest; states: Map<string, RunState>; config: Config } {
  const direction = o.direction ?? 'maximize';
  const config = parseConfig(withDirection(direction), 't.yml');
  const manifest = planCompare({
    kind: 'compare',
    id: 'compare-test',
    createdAt: '2026-11-30T10:00:00.000Z',
    configFile: '/t/.github/autoresearch.yml',
    configText: CONFIG_TEXT,
    config,
    strategies: Object.keys(bests) as Strategy[],
    seeds: Math.max(...Object.values(bests).map((b) => b?.length ?? 0)),
    seed: 1,
    ...(o.variants ? { variants: o.variants } : {}),
  });
  const states = new Map<string, RunState>();
  for (const e of manifest.entries) {
    const best = bests[e.strategy]?.[e.seed - 1];
    if (best === undefined) continue;
    const st = runState(direction, e.strategy, e.seed, best);
    const id = `${e.strategy}-${e.variant}-${e.seed}`;
    const initial = o.initial === undefined ? null : o.initial;
    states.set(id, { ...st, id, base: { ...st.base, score: initial } });
    e.run = id;
    e.wallSeconds = 10 * e.seed;
  }
  return { manifest, states, config };
}

const results = (c: ReturnType<typeof comparison>) => compareResults(c.manifest, c.states, c.config);

describe('the Table-1 rows', () => {
  const c = comparison(
    { 'fork-and-flush': [80, 90, 100], 'single-run': [50, 60, 70], 'best-of-n': [60, 60, 90] },
    { initial: 0 },
  );
  const r = results(c);

  it('gives mean, sd (n - 1), best, worst and the min–max normalized mean, best first', () => {
    expect(tableRows(r)).toEqual([
      ['1', 'fork-and-flush', '3', '90', '10', '100', '80', '0.800'],
      ['2', 'best-of-n', '3', '70', '17.3205', '90', '60', '0.400'],
      ['3', 'single-run', '3', '60', '10', '70', '50', '0.200'],
    ]);
    expect(r.normalization).toEqual({ worst: 50, best: 100 });
    const ff = r.summary[0];
    expect(ff).toMatchObject({
      strategy: 'fork-and-flush',
      variant: 'as-is',
      runs: 3,
      mean: 90,
      sd: 10,
      max: 100,
      min: 80,
    });
    expect(ff?.normalized).toBeCloseTo(0.8, 12);
    expect(r.complete).toBe(true);
  });

  it('lists every run with its best, spend, episodes and wall time', () => {
    expect(r.runs).toHaveLength(9);
    const first = r.runs[0];
    expect(first).toMatchObject({
      strategy: 'fork-and-flush',
      variant: 'as-is',
      seed: 1,
      best: 80,
      status: 'finished',
      wallSeconds: 10,
    });
    expect(first?.spent).toBe(400);
    expect(first?.episodes).toBe(c.states.get('fork-and-flush-as-is-1')?.rounds.flatMap((x) => x.episodes).length);
  });

  it('puts fork-and-flush against single-run and best-of-n: relative on the normalized mean, seed by seed', () => {
    const [sr, bon] = r.comparisons;
    expect(sr?.b.strategy).toBe('single-run');
    expect(sr?.relative).toBeCloseTo(0.8 / 0.2 - 1, 12);
    expect(sr?.relativeGain).toBeCloseTo(90 / 60 - 1, 12);
    expect(sr?.paper).toBe(0.66);
    expect(sr?.paired).toMatchObject({
      pairs: 3,
      wins: 3,
      losses: 0,
      ties: 0,
      difference: 30,
      interval: [30, 30],
      signP: 0.25,
    });
    expect(bon?.relative).toBeCloseTo(0.8 / 0.4 - 1, 12);
    expect(bon?.paired).toMatchObject({ wins: 3, difference: 20 });
    expect(compareText(r)).toContain(
      'fork-and-flush over single-run: +300.0% on the normalized mean (the paper: +66.0%); +50.0% on the mean gain over the initial score.',
    );
    expect(significance(sr as NonNullable<typeof sr>, r)).toBe(
      "fork-and-flush was better than single-run on 3 of 3 seeds, worse on 0 (two-sided sign test p = 0.25); fork-and-flush's best is 30 better on average, " +
        '95% bootstrap interval of the difference 30 to 30: it excludes 0, so over these 3 seeds the difference is unlikely to be the luck of the seeds alone. ' +
        'With fewer than 5 seeds, read the interval as rough.',
    );
  });

  it('says every run spent its budget within one episode', () => {
    expect(r.runs.every((x) => x.spendOk === true)).toBe(true);
    expect(r.summary.every((x) => x.spendFlagged === 0 && x.spent.mean === 400)).toBe(true);
    expect(renderCompareReport(r)).toContain('Every run spent its budget of 400 tokens within one episode');
  });
});

describe('direction, ties and failures', () => {
  it('normalizes a minimized score with the best (lowest) at 1', () => {
    const r = results(
      comparison({ 'fork-and-flush': [10, 20, 30], 'single-run': [40, 50, 60] }, { direction: 'minimize' }),
    );
    expect(tableRows(r).map((row) => [row[1], row[5], row[6], row[7]])).toEqual([
      ['fork-and-flush', '10', '30', '0.800'],
      ['single-run', '40', '60', '0.200'],
    ]);
    expect(r.normalization).toEqual({ worst: 60, best: 10 });
    expect(r.comparisons[0]?.paired).toMatchObject({ wins: 3, difference: 30 });
  });

  it('gives tied strategies one rank, counts tied seeds, and has no sign test when all tie', () => {
    const r = results(comparison({ 'fork-and-flush': [5, 7], 'single-run': [5, 7], 'flush-only': [1, 2] }));
    expect(tableRows(r).map((row) => row.slice(0, 2))).toEqual([
      ['1', 'fork-and-flush'],
      ['1', 'single-run'],
      ['3', 'flush-only'],
    ]);
    expect(r.comparisons[0]?.paired).toMatchObject({
      pairs: 2,
      wins: 0,
      losses: 0,
      ties: 2,
      signP: null,
      interval: null,
    });
    expect(r.comparisons[0]?.relative).toBe(0);
  });

  it('keeps a strategy whose runs all failed: no score, ranked last, nothing to pair', () => {
    const r = results(comparison({ 'fork-and-flush': [3, 4, 5], 'single-run': [null, null, null] }));
    expect(tableRows(r)).toEqual([
      ['1', 'fork-and-flush', '3', '4', '1', '5', '3', '0.500'],
      ['2', 'single-run', '3 (3 no score)', '-', '-', '-', '-', '-'],
    ]);
    const c = r.comparisons[0] as NonNullable<(typeof r.comparisons)[0]>;
    expect(c.paired).toMatchObject({ pairs: 0, unpaired: 3 });
    expect(significance(c, r)).toBe(
      'No seed has a score for both fork-and-flush and single-run: there is nothing to compare.',
    );
    expect(
      // Finished with no score: idle (nothing to measure), counted in runs, not in the scores.
      r.runs.filter((x) => x.strategy === 'single-run').every((x) => x.best === null && x.status === 'idle'),
    ).toBe(true);
  });

  it('has no normalization when every run scored the same', () => {
    const r = results(comparison({ 'fork-and-flush': [2, 2], 'single-run': [2, 2] }));
    expect(r.normalization).toBeNull();
    expect(r.summary.map((x) => x.normalized)).toEqual([null, null]);
    expect(normalizer([2, 2], 'maximize')).toBeNull();
  });

  it('counts a resumable run as unfinished and leaves it out of the figures', () => {
    const c = comparison({ 'fork-and-flush': [3, 4], 'single-run': [1, 2] });
    const st = c.states.get('single-run-as-is-2') as RunState;
    c.states.set(st.id, { ...st, status: 'running', rounds: st.rounds.slice(0, 2) });
    const r = results(c);
    expect(r.complete).toBe(false);
    expect(r.runs.find((x) => x.run === st.id)).toMatchObject({ status: 'unfinished', spendOk: null });
    expect(r.summary.find((x) => x.strategy === 'single-run')).toMatchObject({ runs: 1, mean: 1 });
    expect(runDone(c.states.get(st.id) ?? null)).toBe(false);
  });
});

describe('equal spend', () => {
  it('flags a run that finished short of its budget by more than one episode', () => {
    const c = comparison({ 'fork-and-flush': [3, 4], 'single-run': [1, 2] });
    const st = c.states.get('single-run-as-is-1') as RunState;
    c.states.set(st.id, { ...st, rounds: st.rounds.slice(0, 8) });
    const r = results(c);
    const flagged = r.runs.find((x) => x.run === st.id);
    const short = st.rounds.slice(0, 8).reduce((sum, x) => sum + (x.episodes[0]?.result?.spent ?? 0), 0);
    expect(flagged).toMatchObject({ spendOk: false, spent: Math.round(short * 1e6) / 1e6 });
    expect(r.summary.find((x) => x.strategy === 'single-run')?.spendFlagged).toBe(1);
    expect(compareText(r)).toContain(
      'FLAGGED: 1 run missed the budget of 400 tokens by more than one episode: single-run seed 1 spent 188.24.',
    );
  });

  it('claims equal compute only for the runs that ended: none before any has', () => {
    // Seed 2 has not started; seed 1 ran to its end.
    const some = comparison({ 'fork-and-flush': [3], 'single-run': [1] });
    for (const e of some.manifest.entries.filter((x) => x.seed === 1)) e.run = null;
    const none = results(some);
    expect(none.runs.every((x) => x.spendOk === null)).toBe(true);
    expect(compareText(none)).toContain('No run has ended yet: their spend is checked when they do.');
    expect(compareText(none)).not.toContain('at equal compute');
    const half = comparison({ 'fork-and-flush': [3, 4], 'single-run': [1, 2] });
    const entry = half.manifest.entries.find((x) => x.strategy === 'single-run' && x.seed === 2);
    if (entry) entry.run = null;
    expect(compareText(results(half))).toContain(
      'Every run that ended (3 of 4) spent its budget of 400 tokens within one episode: the comparison is at equal compute so far.',
    );
  });

  it('holds every strategy of the paper to the same budget within one episode, as planned', () => {
    for (const s of ['fork-and-flush', 'single-run', 'best-of-n', 'fork-only', 'flush-only'] as const) {
      const rec = runRecord(
        { strategy: s, variant: 'as-is', seed: 1, run: 'x', wallSeconds: 0 },
        runState('maximize', s, 1, 1, 0.8),
      );
      expect(rec.spendOk, s).toBe(true);
    }
  });
});

describe('the statistics', () => {
  it('sd is the sample sd; the sign test is exact and two-sided', () => {
    expect(sd([1])).toBeNull();
    expect(sd([2, 4, 4, 4, 5, 5, 7, 9])).toBeCloseTo(2.13809, 5);
    expect(signTest(5, 0)).toBe(0.0625);
    expect(signTest(4, 1)).toBe(0.375);
    expect(signTest(3, 3)).toBe(1);
  });

  it('the bootstrap interval is the same every time, and brackets the mean', () => {
    const xs = [1, -2, 3, 4, 0.5];
    const a = bootstrapInterval(xs);
    expect(bootstrapInterval(xs)).toEqual(a);
    expect(a[0]).toBeLessThan(1.3);
    expect(a[1]).toBeGreaterThan(1.3);
    expect(a[0]).toBeGreaterThanOrEqual(-2);
  });

  it('pairs by seed and leaves out seeds without a score on one side', () => {
    const p = paired(
      new Map([
        [1, 5],
        [2, null],
        [3, 4],
        [4, 9],
      ]),
      new Map([
        [1, 3],
        [2, 1],
        [3, 6],
        [4, 9],
      ]),
      'maximize',
    );
    expect(p).toMatchObject({ pairs: 3, unpaired: 1, wins: 1, losses: 1, ties: 1, difference: 0 });
  });
});

describe('the plan', () => {
  const config = parseConfig(CONFIG_TEXT, 't.yml');
  const plan = (over: Partial<Parameters<typeof planCompare>[0]> = {}) =>
    planCompare({
      kind: 'compare',
      id: 'c',
      createdAt: 'now',
      configFile: '/t/c.yml',
      configText: CONFIG_TEXT,
      config,
      seed: 7,
      ...over,
    });

  it('defaults to all five strategies and five seeds, seed by seed, one seed list for all', () => {
    const m = plan();
    expect(m.strategies).toEqual(['fork-and-flush', 'single-run', 'best-of-n', 'fork-only', 'flush-only']);
    expect(m.seeds).toEqual([7, 8, 9, 10, 11]);
    expect(m.entries.slice(0, 6).map((e) => `${e.strategy}:${e.seed}`)).toEqual([
      'fork-and-flush:7',
      'single-run:7',
      'best-of-n:7',
      'fork-only:7',
      'flush-only:7',
      'fork-and-flush:8',
    ]);
  });

  it("takes its defaults from the config's compare: key", () => {
    const c = parseConfig(
      `${CONFIG_TEXT}compare: {strategies: [single-run], seeds: 2, variants: [{name: k8, set: {fork.branches: 8}}]}\n`,
      't.yml',
    );
    const m = plan({ config: c });
    expect(m.entries.map((e) => `${e.strategy}:${e.variant}:${e.seed}`)).toEqual([
      'single-run:k8:7',
      'single-run:k8:8',
    ]);
  });

  it('is the same plan for the same command and config, whatever the seed unless one is given', () => {
    expect(samePlan(plan(), plan({ seed: 9 }), false)).toBe(true);
    expect(samePlan(plan(), plan({ seed: 9 }), true)).toBe(false);
    expect(samePlan(plan(), plan({ budget: 50 }), false)).toBe(false);
    expect(samePlan(plan(), plan({ configText: `${CONFIG_TEXT}# changed\n` }), false)).toBe(false);
  });

  it('checks each variant before anything runs', () => {
    const bad = plan({ variants: [{ name: 'wide', set: { 'fork.at': [1.5] } }], strategies: ['fork-and-flush'] });
    expect(checkVariants(bad)).toEqual([
      expect.stringMatching(
        /^variant wide: fork\.at\[0\] must be between 0 and 1 \(exclusive\), got 1\.5 \(with strategy fork-and-flush\)$/,
      ),
    ]);
    expect(checkVariants(plan({ variants: [{ name: 'g', set: { 'grader.command': 'x' } }] }))).toEqual([
      'variant g: grader.command cannot vary: scores from different graders cannot be compared',
    ]);
    expect(checkVariants(plan({ branches: 2, variants: [{ name: 'k', set: { fork: { branches: 8 } } }] }))).toEqual([
      'variant k sets fork.branches, which --branches would override: drop one of them',
    ]);
    expect(
      checkVariants(
        plan({
          variants: [
            { name: 'one', set: { 'fork.at': [0.5] } },
            { name: 'two', set: {} },
          ],
        }),
      ),
    ).toEqual([]);
  });

  it('estimates what is left from the pace of spend so far', () => {
    const c = comparison({ 'fork-and-flush': [3, 4], 'single-run': [1, 2] });
    const e = c.manifest.entries[3] as CompareManifest['entries'][number];
    c.states.delete(e.run as string);
    e.run = null;
    const est = progressEstimate({
      manifest: c.manifest,
      states: c.states,
      spentAtStart: new Map(),
      elapsedSeconds: 60,
      budget: 400,
    });
    expect(est).toEqual({ runs: 1, spend: 400, seconds: 20 });
  });
});
