// The one list of work both shells carry out: what is due after each decision, in which order,
// each item once, and the checks every shell shares.
import { describe, expect, it } from 'vitest';
import { applyResult, reconcile } from '../../src/core/reconcile.js';
import { type Episode, newRunState, type Round, type RunState } from '../../src/core/state.js';
import {
  advance,
  carryOut,
  dueWork,
  type ForgeWork,
  lineageMovedOutsideProblem,
  markDone,
  NOTHING_DONE,
  type WorkDone,
} from '../../src/core/work.js';
import { config, result } from './helpers.js';

const SHORT = 'fork: {branches: 2, at: [0.5], branch_budget: 0.15}\n';

function fresh(baseScore: number | null = 1): RunState {
  return newRunState({ id: 't', seed: 3, config: config(SHORT), baseCommit: 'base', baseScore });
}

/** A forge that writes down what it is asked to do. */
function recordingForge(): ForgeWork & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    openRound: async (_s, round, retaking) => void calls.push(`open ${round.index}${retaking ? ' (retaking)' : ''}`),
    publishResult: async (_s, e) => void calls.push(`publish ${e.id}`),
    settleRound: async (_s, round) => void calls.push(`settle ${round.index}`),
    moveBest: async (_s, commit) => void calls.push(`best ${commit}`),
    publishRun: async () => void calls.push('final'),
  };
}

/** Drives a run to its end as a shell does: advance, carry out what is due, run the episodes. */
async function drive(forge: ForgeWork, score: (e: Episode) => number | null) {
  let state = fresh();
  let done: WorkDone = NOTHING_DONE;
  const carry = async () => {
    for (const item of dueWork(state, done)) {
      await carryOut(forge, state, item);
      done = markDone(done, item);
    }
  };
  for (let i = 0; i < 100; i++) {
    state = advance(state).state;
    await carry();
    const pending = reconcile(state).flatMap((a) => (a.type === 'run' ? [a.episode] : []));
    if (pending.length === 0) return { state, done };
    for (const id of pending) {
      const e = state.rounds.flatMap((r) => r.episodes).find((x) => x.id === id) as Episode;
      state = applyResult(state, id, result(score(e), e.allowance, { commit: `c-${id}` }));
      await carry();
    }
  }
  throw new Error('did not finish');
}

describe('dueWork', () => {
  it('opens the first round, and nothing else, for a new run', () => {
    const s = advance(fresh(null)).state;
    expect(dueWork(s, NOTHING_DONE)).toEqual([{ type: 'open-round', key: 'dispatch:0', round: 0 }]);
  });

  it('asks for each item once, in order: results, the round settled, the next round, best, the end', async () => {
    const forge = recordingForge();
    const { state, done } = await drive(forge, (e) => e.round * 10 + e.branch);
    expect(state.status).toBe('finished');
    const episodes = state.rounds.flatMap((r) => r.episodes);
    // Each episode published once, each round opened and settled once, the run published once.
    expect(forge.calls.filter((c) => c.startsWith('publish')).sort()).toEqual(
      episodes.map((e) => `publish ${e.id}`).sort(),
    );
    for (const r of state.rounds) {
      expect(forge.calls.filter((c) => c === `open ${r.index}`)).toHaveLength(1);
      expect(forge.calls.filter((c) => c === `settle ${r.index}`)).toHaveLength(1);
      // A round is settled after all its results are published, and before the next one opens.
      const settled = forge.calls.indexOf(`settle ${r.index}`);
      for (const e of r.episodes) expect(forge.calls.indexOf(`publish ${e.id}`)).toBeLessThan(settled);
      if (r.index > 0)
        expect(forge.calls.indexOf(`open ${r.index}`)).toBeGreaterThan(forge.calls.indexOf(`settle ${r.index - 1}`));
    }
    expect(forge.calls.filter((c) => c === 'final')).toHaveLength(1);
    expect(forge.calls.at(-1)).toBe('final');
    // The best branch moved each time the best changed, last to the best commit.
    expect(forge.calls.filter((c) => c.startsWith('best')).at(-1)).toBe(`best ${state.best?.commit}`);
    expect(dueWork(state, done)).toEqual([]);
  });

  it('gives the same list again until an item is marked done (a replayed trigger repeats nothing done)', () => {
    let s = advance(fresh()).state;
    const [open] = s.rounds;
    for (const e of open?.episodes ?? []) s = applyResult(s, e.id, result(5, 1, { commit: `c-${e.id}` }));
    const first = dueWork(s, NOTHING_DONE);
    expect(dueWork(s, NOTHING_DONE)).toEqual(first);
    const done = first.reduce(markDone, NOTHING_DONE);
    expect(dueWork(s, done)).toEqual([]);
    expect(done).toEqual({ opened: [0], published: ['r0.b0', 'r0.b1'], settled: [], best: 'c-r0.b0', finished: false });
  });
});

describe('advance', () => {
  it('stops before a step when told to, and says which steps it took', () => {
    let s = advance(fresh()).state;
    for (const e of s.rounds[0]?.episodes ?? []) s = applyResult(s, e.id, result(null, e.allowance));
    const all = advance(s);
    expect(all.steps.map((a) => a.type)).toEqual(['decide', 'open']);
    const halted = advance(s, (_state, next) => next.type === 'open');
    expect(halted.steps.map((a) => a.type)).toEqual(['decide']);
    expect(halted.state.rounds).toHaveLength(1);
  });
});

describe('lineageMovedOutsideProblem', () => {
  const state = (() => {
    let s = advance(fresh()).state;
    for (const e of s.rounds[0]?.episodes ?? []) s = applyResult(s, e.id, result(e.branch, 1, { commit: `c-${e.id}` }));
    s = advance(s).state;
    for (const e of s.rounds[1]?.episodes ?? []) s = applyResult(s, e.id, result(9, 1, { commit: `c-${e.id}` }));
    return advance(s).state;
  })();
  const round0 = state.rounds[0] as Round;
  const winner = round0.episodes.find((e) => e.id === round0.decision?.winner) as Episode;

  it('accepts the adopted commit, and a commit a later round adopted', () => {
    expect(lineageMovedOutsideProblem(state, round0, winner, winner.result?.commit ?? null, 'L')).toBeNull();
    expect(lineageMovedOutsideProblem(state, round0, winner, 'c-r1.b0', 'L')).toBeNull();
  });

  it('names the ref and what it should be otherwise', () => {
    expect(lineageMovedOutsideProblem(state, round0, winner, 'f00d', 'forkflush/t/lineage')).toBe(
      'the lineage branch forkflush/t/lineage moved outside forkflush (expected base or c-r0.b1, found f00d): reset it to one of those commits, then resume',
    );
    expect(lineageMovedOutsideProblem(state, round0, winner, null, 'L')).toContain('found nothing');
  });
});
