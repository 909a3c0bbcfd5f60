import { type Config, type ConfigOverrides, parseConfig } from '../../src/core/config.js';
import { simulate } from '../../src/core/plan.js';
import { randomFrom } from '../../src/core/rng.js';
import type { EpisodeResult } from '../../src/core/state.js';

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
