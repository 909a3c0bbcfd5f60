// Prices of tokens a CLI reports without a cost: cached input at its own price, and every model
// that an example, a default or a test names is in the table.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PRICED_MODELS, priceTokens } from '../../src/core/pricing.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('priceTokens', () => {
  it('prices by the longest matching model name', () => {
    expect(priceTokens('gpt-5-mini-2026-08', { input: 1_000_000, output: 1_000_000 }).costUsd).toBeCloseTo(2.25);
    expect(priceTokens('gpt-5', { input: 2_000_000, output: 0 }).costUsd).toBeCloseTo(2.5);
    expect(priceTokens('gemini-2.5-flash', { input: 0, output: 1_000_000 }).pricedFrom).toBe(
      'forkflush prices of 2026-11 for gemini-2.5-flash: $0.3/$0.075/$2.5 per million tokens in/cached in/out',
    );
  });

  it('prices cached input and cache writes at their own rates, so a cached session is not overcharged', () => {
    // An agent session reads most of its input from the cache: 90% here.
    const cached = priceTokens('gpt-5', { input: 1_000_000, cachedInput: 900_000, output: 0 }).costUsd;
    expect(cached).toBeCloseTo(0.1 * 1.25 + 0.9 * 0.125);
    expect(priceTokens('gpt-5', { input: 1_000_000, output: 0 }).costUsd / cached).toBeCloseTo(5.26, 1);
    // Anthropic: 100k fresh, 800k read, 100k written at 1.25x.
    const claude = priceTokens('claude-sonnet-4-5', {
      input: 1_000_000,
      cachedInput: 800_000,
      cacheWrite: 100_000,
      output: 0,
    });
    expect(claude.costUsd).toBeCloseTo(0.1 * 3 + 0.8 * 0.3 + 0.1 * 3.75);
    // Counts that do not add up never price below the fresh rate of what is left.
    expect(priceTokens('gpt-5', { input: 100, cachedInput: 500, output: 0 }).costUsd).toBeCloseTo((100 * 0.125) / 1e6);
  });

  it('prices an unknown model at the dearest entry, and says so', () => {
    const p = priceTokens('mystery-1', { input: 1_000_000, output: 1_000_000 });
    expect(p.costUsd).toBe(90);
    expect(p.pricedFrom).toContain('mystery-1 is not in the table');
  });

  it('knows every model the examples and the agent tests name', () => {
    const named = new Set<string>();
    for (const f of readdirSync(join(ROOT, 'examples', 'agents'))) {
      const m = /^\s*model:\s*(\S+)/m.exec(readFileSync(join(ROOT, 'examples', 'agents', f), 'utf8'));
      if (m?.[1]) named.add(m[1]);
    }
    // The agent tests' harnesses; the mock provider of opencode's is priced by opencode itself.
    const harnesses = join(ROOT, 'test', 'agents', 'contract');
    for (const f of readdirSync(harnesses)) {
      for (const m of readFileSync(join(harnesses, f), 'utf8').matchAll(/(?:MODEL = |model: )'([^']+)'/g)) {
        if (m[1] && !m[1].startsWith('mock/')) named.add(m[1]);
      }
    }
    expect(named.size).toBeGreaterThanOrEqual(8);
    for (const full of named) {
      // A provider's prefix (aider's openai/…, opencode's anthropic/…) is not part of the model's name.
      const model = full.replace(/^[a-z0-9_-]+\//i, '');
      expect(
        PRICED_MODELS.some((p) => model.startsWith(p)),
        `${model} is not in the price table`,
      ).toBe(true);
    }
  });
});
