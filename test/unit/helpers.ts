import type { RunRecord } from '../../src/core/compare/results.js';
import { type Config, type ConfigOverrides, parseConfig } from '../../src/core/config.js';
import { simulate } from '../../src/core/plan.js';
import { applyDecision, applyOpen, applyResult, reconcile } from '../../src/core/reconcile.js';
import { randomFrom } from '../../src/core/rng.js';
import { type EpisodeResult, newRunState, type RunState } from '../../src/core/state.js';
import { stopReason } from '../../src/core/stop.js';

export function config(extra = '', overrides: ConfigOverrides = {}): Config {
  return parseConfig(
    `grader: {command: node grade.mjs}\nagent: {command: node agent.mjs}\nbudget: {total: 400, unit: tokens, episode: 24}\n${extra}`,
    'test.yml',
    overrides,
  );
}

export function result(score: number | null, spent = 1, extra: Partial<EpisodeResult> = {}): EpisodeResult {
  return {
    commit: `c${Math.random().toString(16).slice(2, 10)}`,
    score,
    spent,
    exit: 'finished',
    protectedChanged: [],
    agentSeconds: 0,
    graderSeconds: 0,
    wallSeconds: 0,
    ...extra,
  };
}

/** A whole simulated run where each episode spends a random share of its allowance. */
export function simulateRandom(c: Config, seed: number, lo = 0.5, hi = 1.1) {
  const random = randomFrom(seed);
  return simulate(
    c,
    (e) => ({ spent: e.allowance * (lo + (hi - lo) * random()), score: Math.round(random() * 100) }),
    seed,
  );
}

/** A run whose opening round got these results (null scores unless given), decided unless `decide` is false. */
export function openingRound(baseScore: number | null, results: Partial<EpisodeResult>[], decide = true): RunState {
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

/** The run carried on, a round for each result (scored 6 unless given), each decided unless a stop came first. */
export function laterRounds(s: RunState, results: Partial<EpisodeResult>[]): RunState {
  for (const r of results) {
    const [open] = reconcile(s);
    if (open?.type !== 'open') throw new Error(`expected open, got ${open?.type}`);
    s = applyOpen(s, open.round);
    for (const e of open.round.episodes) s = applyResult(s, e.id, result(6, 1, r));
    const [d] = reconcile(s);
    if (d?.type === 'decide' && stopReason(s) === null) s = applyDecision(s, d.round, d.decision);
  }
  return s;
}

/** A probe's finished run of seed `seed` that ended at `best`, from `initial`. */
export function probeRun(best: number | null, seed: number, initial = 50): RunRecord {
  return {
    strategy: 'single-run',
    variant: 'probe',
    seed,
    run: `r${seed}`,
    best,
    spent: 48,
    episodes: 2,
    wallSeconds: 3,
    status: 'finished',
    initial,
    budget: 48,
    spendOk: true,
  };
}
