// Starts of an episode that never ended (core/attempts.ts): counted, taken back, and the point
// where an episode that keeps killing the run is given up.
import { describe, expect, it } from 'vitest';
import { abandonedResult, chargeKilledStarts, recordStart, takeBackStart } from '../../src/core/attempts.js';
import { spent } from '../../src/core/budget.js';
import { MAX_UNFINISHED_STARTS } from '../../src/core/method.js';
import { applyInterrupted, applyOpen, applyResult, reconcile } from '../../src/core/reconcile.js';
import { parseRunState } from '../../src/core/records.js';
import { allEpisodes, newRunState, type RunState } from '../../src/core/state.js';
import { config, result } from './helpers.js';

/** A run with its opening round open (four episodes, r0.b0 to r0.b3). */
const BASE = 'b'.repeat(40);

function opened(): RunState {
  const s = newRunState({ id: '20261130-100000-t', seed: 7, config: config(), baseCommit: BASE, baseScore: 10 });
  const [open] = reconcile(s);
  if (open?.type !== 'open') throw new Error('expected open');
  return applyOpen(s, open.round);
}

const starts = (s: RunState) => allEpisodes(s).map((e) => e.unfinishedStarts);

describe('starts of an episode that never ended', () => {
  it('counts each start of the one episode, and takes one back when forkflush stopped the episode itself', () => {
    let s = opened();
    s = recordStart(s, 'r0.b1');
    s = recordStart(s, 'r0.b1');
    expect(starts(s)).toEqual([undefined, 2, undefined, undefined]);
    s = takeBackStart(s, 'r0.b1');
    expect(starts(s)).toEqual([undefined, 1, undefined, undefined]);
    // Back to none: the key goes, as if it had never been started (state.json stays as it was).
    s = takeBackStart(takeBackStart(s, 'r0.b1'), 'r0.b1');
    expect(starts(s)).toEqual([undefined, undefined, undefined, undefined]);
    expect(allEpisodes(s)[1]).not.toHaveProperty('unfinishedStarts');
  });

  it('leaves an episode with a result, and an unknown one, as they are', () => {
    const s = applyResult(opened(), 'r0.b0', result(5, 1, { commit: 'c0' }));
    expect(recordStart(s, 'r0.b0')).toEqual(s);
    expect(recordStart(s, 'r9.b9')).toEqual(s);
  });

  it(`gives an episode up at ${MAX_UNFINISHED_STARTS} killed starts, not before, and never one with a result`, () => {
    let s = opened();
    for (let i = 1; i < MAX_UNFINISHED_STARTS; i++) s = recordStart(s, 'r0.b0');
    s = chargeKilledStarts(s, 'r0.b0', false);
    expect(abandonedResult(allEpisodes(s)[0] as never)).toBeNull();
    s = chargeKilledStarts(recordStart(s, 'r0.b0'), 'r0.b0', false);
    const e = allEpisodes(s)[0];
    if (!e) throw new Error('no episode');
    expect(e).toMatchObject({ killedStarts: 3 });
    expect(e).not.toHaveProperty('unfinishedStarts');
    expect(abandonedResult(e)).toEqual({
      commit: BASE,
      score: null,
      reason:
        'started 3 times, and each time forkflush was killed before the episode ended (out of memory, a reboot, or a stop that did not finish in time): it is not started again',
      spent: 0,
      exit: 'crash',
      protectedChanged: [],
      agentSeconds: 0,
      graderSeconds: 0,
      wallSeconds: 0,
    });
    expect(abandonedResult({ ...e, result: result(1) })).toBeNull();
  });

  it("charges each killed start its allowance, as an estimate, once; a recovered result's attempt is not one", () => {
    let s = opened();
    const allowance = allEpisodes(s)[0]?.allowance as number;
    for (let i = 0; i < MAX_UNFINISHED_STARTS; i++) s = recordStart(s, 'r0.b0');
    s = applyInterrupted(s, 'r0.b0', 2.5);
    s = chargeKilledStarts(s, 'r0.b0', false);
    expect(spent(s)).toBe(2.5 + MAX_UNFINISHED_STARTS * allowance);
    expect(allEpisodes(s)[0]?.interruptedBasis).toBe('estimated');
    // A second resume charges nothing more for the same starts.
    expect(chargeKilledStarts(s, 'r0.b0', false)).toEqual(s);
    const e = allEpisodes(s)[0];
    const given = e && abandonedResult(e);
    if (!given) throw new Error('not given up');
    s = applyResult(s, 'r0.b0', given);
    expect(spent(s)).toBe(2.5 + MAX_UNFINISHED_STARTS * allowance);
    // The run goes on: the round waits for its other episodes, as for any result.
    expect(reconcile(s).map((a) => a.type)).toEqual(['run', 'run', 'run']);
    // Two starts, the last of which left its result on its branch: one is charged its allowance.
    const recovered = chargeKilledStarts(recordStart(recordStart(opened(), 'r0.b1'), 'r0.b1'), 'r0.b1', true);
    expect(spent(recovered)).toBe(allowance);
    expect(allEpisodes(recovered)[1]).toMatchObject({ killedStarts: 1 });
  });

  it('is kept in state.json, which refuses a count that is not a positive whole number', () => {
    const s = recordStart(opened(), 'r0.b2');
    const text = JSON.stringify(s);
    expect(allEpisodes(parseRunState(text, 'state.json'))[2]?.unfinishedStarts).toBe(1);
    expect(() => parseRunState(text.replace('"unfinishedStarts":1', '"unfinishedStarts":0.5'), 'state.json')).toThrow(
      /unfinishedStarts/,
    );
  });
});
