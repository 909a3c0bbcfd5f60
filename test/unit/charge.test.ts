// What an episode is charged: measured where it can be, an estimate said as one where it cannot,
// and nothing for an agent that failed before it could spend.
import { describe, expect, it } from 'vitest';
import { type ChargeInput, chargeFor, type TryFacts, withEarlierAttempts } from '../../src/core/charge.js';
import { QUICK_FAILURE_SECONDS } from '../../src/core/method.js';

const tokens = (tries: TryFacts[], o: Partial<ChargeInput> = {}): ReturnType<typeof chargeFor> =>
  chargeFor({ unit: 'tokens', allowance: 24, limitSeconds: 1800, tries, evaluations: 0, unchanged: true, ...o });
const crash = (seconds: number, reportedSpend: number | null = null): TryFacts => ({
  seconds,
  reportedSpend,
  exit: 'crash',
});

describe('chargeFor', () => {
  it('charges what the agent reported, as measured, whatever its end', () => {
    expect(tokens([{ seconds: 0.2, reportedSpend: 7, exit: 'crash' }])).toEqual({ spent: 7, basis: 'measured' });
    // An overrun is charged as reported, past the allowance.
    expect(tokens([{ seconds: 9, reportedSpend: 30, exit: 'budget' }])).toEqual({ spent: 30, basis: 'measured' });
  });

  it('charges nothing, and says so, for a crash within the quick-failure time that reported nothing and changed nothing', () => {
    const c = tokens([crash(0.4)]);
    expect(c).toMatchObject({ spent: 0, basis: 'none' });
    expect(c.note).toContain('charged nothing: it failed after 0.4 s, before it could spend');
  });

  it('estimates a later crash, or one that changed the workspace, by the share of its time limit it used', () => {
    expect(tokens([crash(QUICK_FAILURE_SECONDS + 80)])).toMatchObject({ spent: 1.2, basis: 'estimated' });
    const changed = tokens([crash(0.4)], { unchanged: false });
    expect(changed.basis).toBe('estimated');
    expect(changed.spent).toBeCloseTo((24 * 0.4) / 1800, 6);
    expect(changed.note).toMatch(
      /^no usage reported: charged 0\.005333 tokens as an estimate \(crashed after 0\.4 s of its 1800 s/,
    );
    // Never more than the allowance.
    expect(tokens([crash(5000)], { unchanged: false }).spent).toBe(24);
  });

  it('charges an agent that ran its course without reporting its whole allowance, as an estimate', () => {
    expect(tokens([{ seconds: 3, reportedSpend: null, exit: 'finished' }])).toMatchObject({
      spent: 24,
      basis: 'estimated',
    });
    expect(tokens([{ seconds: 1800, reportedSpend: null, exit: 'timeout' }]).spent).toBe(24);
  });

  it('charges an interrupted attempt by its time, never its whole allowance for a second', () => {
    const c = tokens([{ seconds: 0.8, reportedSpend: null, exit: 'crash', interrupted: true }], { unchanged: false });
    expect(c.basis).toBe('estimated');
    expect(c.spent).toBeLessThan(0.02);
    expect(tokens([{ seconds: 0.8, reportedSpend: 3, exit: 'crash', interrupted: true }])).toEqual({
      spent: 3,
      basis: 'measured',
    });
  });

  it('adds up tries, each within what the ones before it left', () => {
    // A measured try, then an unreported one that ran its course: the rest of the allowance.
    const c = tokens([
      { seconds: 2, reportedSpend: 5, exit: 'crash' },
      { seconds: 40, reportedSpend: null, exit: 'finished' },
    ]);
    expect(c).toMatchObject({ spent: 24, basis: 'estimated' });
    // Quick failures, then a measured try: nothing for the first, the report for the last.
    expect(tokens([crash(0.2), crash(0.3), { seconds: 20, reportedSpend: 6, exit: 'finished' }])).toMatchObject({
      spent: 6,
      basis: 'measured',
    });
  });

  it("charges no less than the model answers forkflush's proxy relayed stated, and no more where the agent reported more", () => {
    const over = tokens([{ seconds: 9, reportedSpend: 2, meteredSpend: 15, exit: 'finished' }]);
    expect(over).toMatchObject({ spent: 15, basis: 'measured' });
    expect(over.note).toMatch(
      /proxy relayed stated 15 tokens in their answers and the agent reported 2: the larger charged/,
    );
    expect(tokens([{ seconds: 9, reportedSpend: 20, meteredSpend: 15, exit: 'finished' }])).toEqual({
      spent: 20,
      basis: 'measured',
    });
    // A quick crash that reported nothing but whose calls were answered spent what they stated.
    expect(tokens([{ seconds: 0.4, reportedSpend: null, meteredSpend: 3, exit: 'crash' }])).toMatchObject({
      spent: 3,
      basis: 'measured',
    });
    // An estimate above what the proxy saw stands (the agent may have spent elsewhere).
    expect(tokens([{ seconds: 9, reportedSpend: null, meteredSpend: 3, exit: 'finished' }])).toMatchObject({
      spent: 24,
      basis: 'estimated',
    });
  });

  it('measures minutes by the time and evaluations by the count, whatever was reported', () => {
    const tries = [crash(30, 99), { seconds: 90, reportedSpend: null, exit: 'finished' as const }];
    expect(
      chargeFor({ unit: 'minutes', allowance: 5, limitSeconds: 300, tries, evaluations: 0, unchanged: false }),
    ).toEqual({
      spent: 2,
      basis: 'measured',
    });
    expect(
      chargeFor({ unit: 'evaluations', allowance: 5, limitSeconds: 1800, tries, evaluations: 3, unchanged: false }),
    ).toEqual({ spent: 3, basis: 'measured' });
  });
});

describe('withEarlierAttempts', () => {
  const r = { spent: 3, note: 'its own note' };
  it('charges each attempt before a re-run its whole allowance, apart from what its agent spent, an estimate said as one', () => {
    expect(withEarlierAttempts(r, 0, 10, 'tokens')).toBe(r);
    expect(withEarlierAttempts(r, 1, 10, 'tokens')).toEqual({
      spent: 3,
      earlierSpent: 10,
      note: 'its own note; a re-run (attempt 2 of its workflow run): the attempt before it may have run the agent with no result recorded, charged its whole allowance (10 tokens in all, an estimate)',
    });
    expect(withEarlierAttempts({ spent: 0, note: undefined }, 2, 0.5, 'usd')).toMatchObject({
      earlierSpent: 1,
      note: 'a re-run (attempt 3 of its workflow run): each of the 2 attempts before it may have run the agent with no result recorded, charged its whole allowance (1 usd in all, an estimate)',
    });
  });
});
