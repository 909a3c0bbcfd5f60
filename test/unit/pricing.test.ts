import { describe, expect, it } from 'vitest';
import { priceTokens } from '../../src/agents/pricing.js';

describe('priceTokens', () => {
  it('prices by the longest matching model name', () => {
    expect(priceTokens('gpt-5-mini-2026-08', 1_000_000, 1_000_000).costUsd).toBeCloseTo(2.25);
    expect(priceTokens('gpt-5', 2_000_000, 0).costUsd).toBeCloseTo(2.5);
    expect(priceTokens('gemini-2.5-flash', 0, 1_000_000).pricedFrom).toBe(
      'forkflush prices of 2026-11 for gemini-2.5-flash: $0.3/$2.5 per million tokens in/out',
    );
  });

  it('prices an unknown model at the dearest entry, and says so', () => {
    const p = priceTokens('mystery-1', 1_000_000, 1_000_000);
    expect(p.costUsd).toBe(90);
    expect(p.pricedFrom).toContain('mystery-1 is not in the table');
  });
});
