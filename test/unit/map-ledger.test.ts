// map.budget shared between the judge's calls: each call's allowance is its share of what is left,
// so the committed spend never passes the budget, even for a judge that reports nothing (charged
// its whole allowance), and a map whose calls fail as often as it tolerates still has room to ask
// them again.
import { describe, expect, it } from 'vitest';
import { Ledger } from '../../src/local/map-calls.js';

describe('the map budget', () => {
  it('never commits more than the budget, and a judge that reports nothing can retry a tenth of its calls', () => {
    const ledger = new Ledger(100, 0, { spec: 6, triplet: 1 });
    ledger.plan({ spec: 10, triplet: 200 });
    const steps = [...Array<'spec'>(10).fill('spec'), ...Array<'triplet'>(200).fill('triplet')];
    let inFlight: number[] = [];
    for (const [i, step] of steps.entries()) {
      // Four at once; every tenth call fails once and is asked again.
      for (const attempt of i % 10 === 9 ? [0, 1] : [0]) {
        const a = ledger.take(step);
        expect(a, `call ${i}, attempt ${attempt}`).not.toBeNull();
        inFlight.push(a as number);
        if (inFlight.length === 4) {
          for (const x of inFlight) ledger.settle(x, x);
          inFlight = [];
        }
        expect(ledger.spent).toBeLessThanOrEqual(100 + 1e-9);
      }
    }
    for (const x of inFlight) ledger.settle(x, x);
    expect(ledger.spent).toBeLessThanOrEqual(100 + 1e-9);
    expect(ledger.spent).toBeGreaterThan(90);
  });

  it('gives a spec more than a triplet, by what each is expected to cost', () => {
    const ledger = new Ledger(1000, 0, { spec: 30, triplet: 5 });
    ledger.plan({ spec: 2, triplet: 10 });
    const spec = ledger.take('spec') as number;
    const triplet = ledger.take('triplet') as number;
    expect(spec / triplet).toBeGreaterThan(5);
  });

  it('has nothing left once what the cached answers cost and the calls spent fill it', () => {
    const ledger = new Ledger(10, 4, { spec: 1, triplet: 1 });
    ledger.plan({ spec: 0, triplet: 1 }, 6);
    expect(ledger.take('triplet')).toBeNull();
  });
});
