// When a run stops before spending the rest of its budget, and when it must go on.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { planWarnings } from '../../src/core/plan.js';
import { applyDecision, applyOpen, applyResult, reconcile } from '../../src/core/reconcile.js';
import { setupFailure } from '../../src/core/setup-failure.js';
import { type EpisodeResult, newRunState, type RunState } from '../../src/core/state.js';
import { config, result } from './helpers.js';

function opening(baseScore: number | null, results: Partial<EpisodeResult>[], decide = true): RunState {
  let s = newRunState({ id: 't', seed: 1, config: config(), baseCommit: 'base', baseScore });
  const [open] = reconcile(s);
  if (open?.type !== 'open') throw new Error('expected open');
  s = applyOpen(s, open.round);
  open.round.episodes.forEach((e, i) => {
    const r = results[i];
    if (r) s = applyResult(s, e.id, result(null, 1, r));
  });
  if (!decide) return s;
  const [d] = reconcile(s);
  if (d?.type !== 'decide') throw new Error(`expected decide, got ${d?.type}`);
  return applyDecision(s, d.round, d.decision);
}

const noScore = (reason: string): Partial<EpisodeResult> => ({ score: null, reason });

describe('setupFailure', () => {
  it('stops with code 2 at the first episode whose agent could not start, even before the round ends', () => {
    const s = opening(null, [{ exit: 'crash', agentNotStarted: 'exit 127: nope: not found' }], false);
    const f = setupFailure(s);
    expect(f?.code).toBe(2);
    expect(f?.message).toContain('the agent could not start in r0.b0 (exit 127: nope: not found)');
    expect(f?.message).toContain('check agent.command');
  });

  it('stops with code 1 when neither the initial workspace nor the opening round got a score, naming the reasons', () => {
    const s = opening(null, [
      noScore('grader exit 1: Error: no module x'),
      noScore('grader exit 1: Error: no module x'),
      noScore('grader printed "oops", not a number'),
      noScore('grader timed out'),
    ]);
    const f = setupFailure(s);
    expect(f?.code).toBe(1);
    // Each distinct reason once, at most three.
    expect(f?.message).toContain(
      '(grader exit 1: Error: no module x; grader printed "oops", not a number; grader timed out)',
    );
  });

  it('goes on while the opening round is open, when one episode scored, or when the base had a score', () => {
    const all = [noScore('a'), noScore('b'), noScore('c'), noScore('d')];
    expect(setupFailure(opening(null, all.slice(0, 3), false))).toBeNull();
    expect(setupFailure(opening(null, [noScore('a'), { score: 3 }, noScore('c'), noScore('d')]))).toBeNull();
    expect(setupFailure(opening(5, all))).toBeNull();
  });
});

const withBudget = (budget: string, agent = '{command: node agent.mjs}') =>
  parseConfig(`grader: {command: node grade.mjs}\nagent: ${agent}\nbudget: ${budget}\n`, 'test.yml');

describe('planWarnings', () => {
  it('warns of an agent CLI episode below one step, of less than a token, and of fractional evaluations', () => {
    const cli = withBudget('{total: 0.2, unit: usd}', '{kind: claude-code}');
    expect(planWarnings(cli).join('\n')).toMatch(/the smallest episode gets 0\.0\d+ usd, less than one agent step/);
    const tiny = withBudget('{total: 10, unit: tokens}');
    expect(planWarnings(tiny)).toEqual([
      expect.stringMatching(/^the smallest episode gets 0\.\d+ tokens, less than one token/),
    ]);
    const evals = withBudget('{total: 54, unit: evaluations}');
    expect(planWarnings(evals).join('\n')).toMatch(/episodes get fractional evaluations \(3\.24, 2\.43/);
  });

  it('says nothing of a plan that makes sense', () => {
    expect(planWarnings(config())).toEqual([]);
    expect(planWarnings(withBudget('{total: 200, unit: evaluations}'))).toEqual([]);
  });
});
