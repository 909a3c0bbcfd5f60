import { describe, expect, it } from 'vitest';
import { spent } from '../../src/core/budget.js';
import { STRATEGIES } from '../../src/core/config.js';
import { plan, planTable, planWarnings, simulate } from '../../src/core/plan.js';
import { randomFrom } from '../../src/core/rng.js';
import { config, simulateRandom } from './helpers.js';

describe('plan', () => {
  it('follows the paper: opening round, solo leader, two fork rounds, final', () => {
    const phases = plan(config());
    expect(phases.map((p) => [p.phase, p.kind, p.branches, p.rounds, p.budgetEach, p.cumulative])).toEqual([
      ['opening', 'fork', 4, 1, 24, 96],
      ['solo 1', 'serial', 1, 2, 18, 132],
      ['fork 1', 'fork', 4, 1, 24, 228],
      ['solo 2', 'serial', 1, 2, 18, 264],
      ['fork 2', 'fork', 4, 1, 24, 360],
      ['final', 'serial', 1, 2, 20, 400],
    ]);
    // Three rounds of four branches take 72% of the budget; the serial leader the other 28%.
    const branchShare = phases.filter((p) => p.kind === 'fork').reduce((s, p) => s + p.spend, 0) / 400;
    expect(branchShare).toBeCloseTo(0.72);
  });

  it.each(STRATEGIES)('%s plans to spend exactly the total', (strategy) => {
    for (const total of [1, 7.5, 100, 400, 12_345]) {
      const c = config(`strategy: ${strategy}\n`, { budget: total });
      const planned = plan(c).reduce((s, p) => s + p.spend, 0);
      expect(planned).toBeCloseTo(total, 6);
    }
  });

  it('best-of-n gives each of N lineages B/N; flush-only clears the context at the fork points', () => {
    const best = simulate(config('strategy: best-of-n\n'), (e) => ({ spent: e.allowance, score: 1 }));
    expect(best.lineages).toHaveLength(4);
    for (const l of best.lineages) expect(spent(best, l.index)).toBeCloseTo(100);
    const flush = simulate(config('strategy: flush-only\n'), (e) => ({ spent: e.allowance, score: 1 }));
    const fresh = flush.rounds.filter((r) => r.episodes[0]?.context === 'fresh');
    expect(fresh.map((r) => r.segment)).toEqual([0, 1, 2]);
    expect(flush.rounds.every((r) => r.episodes.length === 1)).toBe(true);
  });

  it('prints a table with phase, branches, budget each and cumulative spend', () => {
    const table = planTable(config());
    expect(table).toContain('strategy fork-and-flush, budget 400 tokens, K = 4');
    expect(table).toMatch(/opening\s+fork round\s+4\s+1\s+24\s+96\s+96 \(24%\)/);
    expect(table).toMatch(/final\s+serial\s+1\s+2\s+20\s+40\s+400 \(100%\)/);
  });
});

describe('actual spend', () => {
  // Agents rarely spend exactly their allowance: some stop early, some overrun by a call.
  it.each(STRATEGIES)('%s stays within one episode of the total, whatever the episodes spend', (strategy) => {
    for (let seed = 1; seed <= 60; seed++) {
      const random = randomFrom(seed);
      const k = 1 + Math.floor(random() * 4);
      const c = config(`strategy: ${strategy}\nfork: {branches: ${k}, at: [0.25, 0.5, 0.75], branch_budget: 0.05}\n`, {
        budget: 50 + Math.floor(random() * 1000),
      });
      const state = simulateRandom(c, seed);
      const used = spent(state);
      const episodeMax = Math.max(...state.rounds.flatMap((r) => r.episodes.map((e) => e.allowance)));
      // Agents here spend up to 1.1 of their allowance: the run can end past the total by at most
      // that overspend of its last round, and short of it by less than one episode.
      const lastRound = state.rounds.at(-1)?.episodes.reduce((n, e) => n + e.allowance, 0) ?? 0;
      expect(used - c.budget.total, `seed ${seed}`).toBeLessThanOrEqual(0.1 * lastRound + 1e-9);
      expect(used, `seed ${seed}`).toBeGreaterThan(c.budget.total - episodeMax - 1e-9);
    }
  });

  it('an agent that spends nothing cannot stall the run', () => {
    for (const strategy of STRATEGIES) {
      const state = simulate(config(`strategy: ${strategy}\n`), () => ({ spent: 0, score: 1 }));
      expect(state.status).toBe('finished');
      expect(state.rounds.length).toBeLessThan(100);
    }
  });

  it('fires every fork round even when overspending carries the run past a fork point', () => {
    const state = simulate(config(), (e) => ({ spent: e.allowance * 2, score: 1 }));
    expect(state.rounds.filter((r) => r.kind === 'fork').map((r) => r.phase)).toEqual(['opening', 'fork 1', 'fork 2']);
  });
});

describe('a grader that pipes its output', () => {
  it('gets a note: the graded code could write into the pipe; || and none do not', () => {
    const note = (command: string) =>
      planWarnings({ ...config(), grader: { ...config().grader, command } }).filter((w) =>
        w.startsWith('grader.command pipes'),
      );
    expect(note('node grade.mjs | tee grade.log')).toHaveLength(1);
    expect(note('python grade.py|tail -1')).toHaveLength(1);
    expect(note('node grade.mjs || echo 0')).toEqual([]);
    expect(note('node grade.mjs')).toEqual([]);
  });
});

describe('a budget in minutes and agent.timeout', () => {
  it('names agent.timeout when it stops episodes short of their minutes (a night of 600: 36-minute episodes cut at 30)', () => {
    const c = config();
    const night = { ...c, budget: { ...c.budget, total: 600, unit: 'minutes' as const, episode: 36 } };
    const timeout = (w: string) => w.includes('agent.timeout');
    expect(planWarnings(night).filter(timeout)).toEqual([
      'the largest episode gets 36 minutes, but agent.timeout (1800 s) stops every episode at 30: set agent.timeout to at least 2160',
    ]);
    expect(planWarnings({ ...night, agent: { ...night.agent, timeout: 2160 } }).filter(timeout)).toEqual([]);
    // Tokens are no time: the timeout only bounds a stuck agent.
    expect(planWarnings({ ...c, agent: { ...c.agent, timeout: 60 } }).filter(timeout)).toEqual([]);
  });
});

describe('settings the agent kind does not read', () => {
  it('agent.model, max_turns and args with the command agent are named', () => {
    const c = config();
    expect(planWarnings(c).filter((w) => w.includes('agent CLIs'))).toEqual([]);
    const set = { ...c, agent: { ...c.agent, kind: 'command' as const, model: 'm', args: ['--x'] } };
    expect(planWarnings(set).filter((w) => w.includes('agent CLIs'))).toEqual([
      'agent.model, agent.args are for agent CLIs: the command agent reads none of it (put it into agent.command), or set agent.kind to the CLI it is for',
    ]);
    const cli = { ...set, agent: { ...set.agent, kind: 'codex' as const } };
    expect(planWarnings(cli).filter((w) => w.includes('agent CLIs'))).toEqual([]);
  });
});
