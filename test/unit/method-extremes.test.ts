// The method's pure core at the edges of what the config accepts: a budget of exactly one
// episode, a fork point whose round costs exactly what is left, strategies that end at the
// comparison's worst, scores near the largest double. Each row failed before its fix (found by a
// review of the method's edges); its comment says what went wrong then.
import { describe, expect, it } from 'vitest';
import { spent } from '../../src/core/budget.js';
import { planCompare } from '../../src/core/compare/plan.js';
import { compareText, improvementLine, tableRows } from '../../src/core/compare/report.js';
import { compareResults } from '../../src/core/compare/results.js';
import { parseConfig, type Strategy } from '../../src/core/config.js';
import { plan, simulate } from '../../src/core/plan.js';
import { analyzeProbe } from '../../src/core/probe.js';
import { reconcile } from '../../src/core/reconcile.js';
import { extraRefusal, requestFork } from '../../src/core/schedule.js';
import type { RunState } from '../../src/core/state.js';
import { probeRun } from './helpers.js';

const HEAD = 'grader: {command: node grade.mjs}\nagent: {command: node agent.mjs}\n';
const cfg = (extra: string) => parseConfig(`${HEAD}${extra}`, 't.yml');
/** A whole run where every episode spends exactly its allowance. */
const fullRun = (extra: string) => simulate(cfg(extra), (e) => ({ spent: e.allowance, score: 1 }));

describe('the schedule at the edges of the budget', () => {
  it('best-of-n with a budget of exactly one episode still runs each of its lineages', () => {
    // Before: budget {total: 6, episode: 6} with best-of-n (K = 4) plans no episode at all: each
    // lineage's share (1.5) is not above a quarter episode (1.5), so every lineage is skipped and
    // the run "finishes" at once, having spent 0 of 6. Each lineage should get its share (B/N).
    const c = cfg('budget: {total: 6, unit: usd, episode: 6}\nstrategy: best-of-n\n');
    expect(plan(c).reduce((s, p) => s + p.spend, 0)).toBeCloseTo(6, 6);
    const s = fullRun('budget: {total: 6, unit: usd, episode: 6}\nstrategy: best-of-n\n');
    expect(s.rounds.flatMap((r) => r.episodes.map((e) => e.lineage)).sort()).toEqual([0, 1, 2, 3]);
  });

  it('opens the fork round at the last fork point when what is left pays for it exactly', () => {
    // Before: fork.at [0.5, 0.9] of 10 usd, K = 4 branches of 0.25 each, budget.episode 4: after 9
    // spent, the 1 left is exactly the round's 4 x 0.25, yet the schedule finishes (what is left
    // is "not above a quarter of a serial episode"): the round at 0.9 never opens and 1 usd is
    // never spent. The quarter-episode rule is for serial remainders, not for a fork round.
    const extra = 'budget: {total: 10, unit: usd, episode: 4}\nfork: {at: [0.5, 0.9], branch_budget: 0.025}\n';
    const s = fullRun(extra);
    expect(s.rounds.filter((r) => r.kind === 'fork').map((r) => r.phase)).toEqual(['opening', 'fork 1', 'fork 2']);
    expect(spent(s)).toBeCloseTo(10, 6);
  });
});

describe('a fork round asked for after the plan, with a large K', () => {
  it('with K = 32 a fork the run accepts after its plan opens its round', () => {
    // Before: K = 32 (branch_budget 0.01, the most fork.at's default lets 32 branches have) of 400
    // tokens, budget.episode 24: `extraRefusal` accepts `/autoresearch fork` (schedule: none gives
    // 400 more), but `nextRound` opens nothing (each branch's 4 tokens is under a quarter episode,
    // 6), so the run finishes at once: the accepted request silently never runs. The scheduled fork
    // rounds of the same K run with 4 each; the asked one should too (or be refused, saying why).
    const s = fullRun('budget: {total: 400, unit: tokens, episode: 24}\nfork: {branches: 32, branch_budget: 0.01}\n');
    expect(s.rounds.filter((r) => r.kind === 'fork').every((r) => r.episodes.length === 32)).toBe(true);
    expect(extraRefusal(s, new Date('2026-11-30T03:00:00Z'))).toBeNull();
    const [next] = reconcile(requestFork({ ...s, status: 'finished' }));
    expect(next?.type === 'open' ? next.round.phase : next?.type).toBe('extra fork 1');
  });
});

// --- compare -------------------------------------------------------------------------------------

const CONFIG_TEXT = `${HEAD}budget: {total: 400, unit: tokens, episode: 24}\n`;

/** A compare whose run of seed i of each strategy scored bests[strategy][i] (every episode scores it). */
function comparison(
  bests: Partial<Record<Strategy, (number | null)[]>>,
  direction = 'maximize',
  initial: number | null = null,
) {
  const text = CONFIG_TEXT.replace('node grade.mjs}', `node grade.mjs, direction: ${direction}}`);
  const config = parseConfig(text, 't.yml');
  const manifest = planCompare({
    kind: 'compare',
    id: 'compare-extremes',
    createdAt: '2026-11-30T10:00:00.000Z',
    configFile: '/t/.github/autoresearch.yml',
    configText: text,
    config,
    strategies: Object.keys(bests) as Strategy[],
    seeds: Math.max(...Object.values(bests).map((b) => b?.length ?? 0)),
    seed: 1,
  });
  const states = new Map<string, RunState>();
  for (const e of manifest.entries) {
    const best = bests[e.strategy]?.[e.seed - 1];
    if (best === undefined) continue;
    const c = parseConfig(`${text}strategy: ${e.strategy}\n`, 't.yml');
    const st = simulate(c, (x) => ({ spent: x.allowance, score: best }), e.seed);
    const id = `${e.strategy}-${e.seed}`;
    states.set(id, { ...st, id, base: { ...st.base, score: initial } });
    e.run = id;
    e.wallSeconds = 10;
  }
  return compareResults(manifest, states, config);
}

describe('compare at the edges of its data', () => {
  it('never calls fork-and-flush an unbounded improvement over a baseline it tied at the bottom', () => {
    // Before: fork-and-flush and single-run both scored 1 on every seed (the comparison's worst,
    // normalized 0 both), best-of-n 2. The report says "fork-and-flush over single-run: unbounded
    // on the normalized mean": 0 over 0 is no improvement at all, and every seed tied.
    const r = comparison({ 'fork-and-flush': [1, 1, 1], 'single-run': [1, 1, 1], 'best-of-n': [2, 2, 2] });
    const c = r.comparisons.find((x) => x.b.strategy === 'single-run');
    expect(c?.paired).toMatchObject({ pairs: 3, ties: 3 });
    expect(improvementLine(c as NonNullable<typeof c>, r)).not.toMatch(/unbounded/);
  });

  it('never calls fork-and-flush an unbounded improvement when none of its runs got a score', () => {
    // Before: every fork-and-flush run ended with no score (counted in runs, not in scores), single-run
    // was the comparison's worst (normalized 0): the line claims "unbounded on the normalized mean"
    // for a strategy with no score at all. A strategy with no scored run has no improvement to state.
    const r = comparison({ 'fork-and-flush': [null, null, null], 'single-run': [1, 1, 1], 'best-of-n': [2, 2, 2] });
    const c = r.comparisons.find((x) => x.b.strategy === 'single-run');
    expect(r.summary.find((x) => x.strategy === 'fork-and-flush')).toMatchObject({ runs: 3, scored: 0 });
    expect(improvementLine(c as NonNullable<typeof c>, r)).not.toMatch(/unbounded/);
  });

  it('gives a finite mean and sd for runs that scored near the largest double (an infeasibility sentinel)', () => {
    // Before: a minimizing grader that prints 1.7e308 for an infeasible answer (parseScore accepts it,
    // the chart handles it) makes single-run's mean "Infinity" and its sd "NaN" in the table: the
    // sum overflows. The mean of 1.7e308 and 1.7e308 is 1.7e308, its sd 0.
    const r = comparison({ 'fork-and-flush': [5, 6], 'single-run': [1.7e308, 1.7e308] }, 'minimize');
    const text = compareText(r);
    expect(text).not.toMatch(/NaN|Infinity/);
    const row = tableRows(r).find((x) => x[1] === 'single-run');
    expect(row?.slice(3, 5)).toEqual(['1.7e+308', '0']);
  });
});

describe('probe at the edges of its data', () => {
  const rec = (best: number, seed: number) => probeRun(best, seed, 0.5);

  it('recommends no fork from a gain of 1e-12 over the initial score (rounding noise)', () => {
    // Before: three runs ended at the initial 0.5 and one at 0.5 + 1e-12 (a summation order's noise):
    // sd / gain is 50%, so the probe says "help likely": "The 4 runs ended between 0.5 and 0.5
    // (range 1e-12, sd 5e-13), an sd of 50% of the gain". A gain this small is no gain to fork for.
    const a = analyzeProbe(
      [0.5, 0.5, 0.5, 0.5 + 1e-12].map((b, i) => rec(b, i + 1)),
      { direction: 'maximize', initial: 0.5, dir: 't', planned: 400, budgetEach: 48, unit: 'tokens' },
    );
    expect(a.recommendation).not.toBe('help likely');
  });

  it('counts runs that lowered a large whole-number cost as improved (no rounding there)', () => {
    // Before (the noise bound of the row above, first at 1e-9 of the scores' size): a cost of
    // 3,000,000,000 cut to 2,999,999,997, ...998 and ...999, exact in a double, counted as no gain,
    // and the probe said "too hard at this budget" (found by the stop's self-review).
    const initial = 3_000_000_000;
    const a = analyzeProbe(
      [initial - 3, initial - 2, initial - 1].map((b, i) => ({ ...rec(b, i + 1), initial })),
      { direction: 'minimize', initial, dir: 't', planned: 20, budgetEach: 2, unit: 'usd' },
    );
    expect(a.improved).toBe(3);
    expect(a.recommendation).not.toBe('too hard at this budget');
  });
});
