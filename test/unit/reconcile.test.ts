import { describe, expect, it } from 'vitest';
import { spent } from '../../src/core/budget.js';
import {
  applyDecision,
  applyFinish,
  applyInterrupted,
  applyOpen,
  applyResult,
  reconcile,
} from '../../src/core/reconcile.js';
import { requestFork } from '../../src/core/schedule.js';
import { selectWinner } from '../../src/core/select.js';
import { type Episode, newRunState, type RunState } from '../../src/core/state.js';
import { config, result } from './helpers.js';

function fresh(extra = ''): RunState {
  return newRunState({ id: 't', seed: 7, config: config(extra), baseCommit: 'base', baseScore: 10 });
}

/** Opens the next round and gives its episodes these scores. */
function playRound(state: RunState, scores: (number | null)[]): RunState {
  const [open] = reconcile(state);
  if (open?.type !== 'open') throw new Error(`expected open, got ${open?.type}`);
  let s = applyOpen(state, open.round);
  open.round.episodes.forEach((e, i) => {
    s = applyResult(s, e.id, result(scores[i] ?? null, e.allowance, { commit: `commit-${e.id}` }));
  });
  const [decide] = reconcile(s);
  if (decide?.type !== 'decide') throw new Error('expected decide');
  return applyDecision(s, decide.round, decide.decision);
}

describe('reconcile', () => {
  it('opens the opening round first, then runs each episode, then decides', () => {
    let s = fresh();
    const [open] = reconcile(s);
    expect(open?.type).toBe('open');
    if (open?.type !== 'open') return;
    expect(open.round.phase).toBe('opening');
    expect(open.round.episodes.map((e) => [e.id, e.context, e.base, e.allowance])).toEqual([
      ['r0.b0', 'fresh', 'base', 24],
      ['r0.b1', 'fresh', 'base', 24],
      ['r0.b2', 'fresh', 'base', 24],
      ['r0.b3', 'fresh', 'base', 24],
    ]);
    s = applyOpen(s, open.round);
    expect(reconcile(s).map((a) => a.type === 'run' && a.episode)).toEqual(['r0.b0', 'r0.b1', 'r0.b2', 'r0.b3']);
    s = applyResult(s, 'r0.b2', result(50, 24));
    expect(reconcile(s)).toHaveLength(3);
  });

  it('opens a round once when its trigger comes twice: the second reconcile asks for its episodes, not the round', () => {
    const s = playRound(fresh(), [1, 2, 3, 4]);
    const before = structuredClone(s);
    const [open] = reconcile(s);
    // Reconcile reads the state and never changes it: a duplicated trigger sees what the first saw.
    expect(s).toEqual(before);
    if (open?.type !== 'open') throw new Error('expected open');
    const opened = applyOpen(s, open.round);
    // The duplicate, after the first trigger's open was saved: no second open, the round's episodes instead.
    const again = reconcile(opened);
    expect(again.filter((a) => a.type === 'open')).toEqual([]);
    expect(again.map((a) => a.type === 'run' && a.episode)).toEqual(open.round.episodes.map((e) => e.id));
    // And an open that arrives twice is applied once.
    expect(applyOpen(opened, open.round)).toBe(opened);
  });

  it('adopts the best branch, then carries its context into the serial episodes', () => {
    const s = playRound(fresh(), [30, 70, null, 50]);
    expect(s.rounds[0]?.decision).toEqual({ winner: 'r0.b1', adopted: ['r0.b1'] });
    expect(s.lineages[0]).toEqual({ index: 0, head: 'commit-r0.b1', context: 'r0.b1' });
    expect(s.best).toEqual({ episode: 'r0.b1', commit: 'commit-r0.b1', score: 70 });
    const [next] = reconcile(s);
    if (next?.type !== 'open') throw new Error('expected open');
    expect(next.round.kind).toBe('serial');
    expect(next.round.episodes[0]).toMatchObject({ context: 'carry', contextFrom: 'r0.b1', base: 'commit-r0.b1' });
  });

  it('keeps the leader unchanged when no branch has a score', () => {
    const s = playRound(fresh(), [null, null, null, null]);
    expect(s.rounds[0]?.decision).toEqual({ winner: null, adopted: [] });
    expect(s.lineages[0]).toEqual({ index: 0, head: 'base', context: null });
    expect(s.best?.episode).toBe('base');
  });

  it('never lowers the best score when a later round regresses', () => {
    let s = playRound(fresh(), [30, 90, 10, 50]);
    s = playRound(s, [20]);
    s = playRound(s, [25]);
    expect(s.lineages[0]?.head).toBe('commit-r2.b0');
    expect(s.best).toEqual({ episode: 'r0.b1', commit: 'commit-r0.b1', score: 90 });
  });

  it('fork rounds start fresh and get directives on some branches; fork-only branches copy the context', () => {
    let s = playRound(fresh(), [1, 2, 3, 4]);
    s = playRound(s, [5]);
    s = playRound(s, [6]);
    const [fork] = reconcile(s);
    if (fork?.type !== 'open') throw new Error('expected open');
    expect(fork.round.phase).toBe('fork 1');
    expect(fork.round.episodes.every((e) => e.context === 'fresh' && e.contextFrom === null)).toBe(true);
    expect(fork.round.episodes.filter((e) => e.directive)).toHaveLength(2);
    expect(
      reconcile(fresh())
        .flatMap((a) => (a.type === 'open' ? a.round.episodes : []))
        .some((e) => e.directive),
    ).toBe(false);

    let o = newRunState({
      id: 't',
      seed: 7,
      config: config('strategy: fork-only\n'),
      baseCommit: 'base',
      baseScore: 0,
    });
    o = playRound(playRound(playRound(o, [1, 2, 3, 4]), [5]), [6]);
    const [copy] = reconcile(o);
    if (copy?.type !== 'open') throw new Error('expected open');
    expect(copy.round.episodes.every((e) => e.context === 'copy' && e.contextFrom === 'r2.b0')).toBe(true);
  });

  it('derives directives and seeds from the run seed only', () => {
    const a = playRound(playRound(playRound(fresh(), [1, 2, 3, 4]), [5]), [6]);
    const b = playRound(playRound(playRound(fresh(), [1, 2, 3, 4]), [5]), [6]);
    expect(reconcile(a)).toEqual(reconcile(b));
    const other = { ...a, seed: 8 };
    const seeds = (s: RunState) =>
      (reconcile(s)[0] as { round: { episodes: Episode[] } }).round.episodes.map((e) => e.seed);
    expect(seeds(other)).not.toEqual(seeds(a));
  });

  it('finishes when the budget is spent, and does nothing after', () => {
    let s = fresh('strategy: single-run\n');
    for (let i = 0; i < 100 && reconcile(s)[0]?.type === 'open'; i++) s = playRound(s, [i]);
    expect(reconcile(s)).toEqual([{ type: 'finish' }]);
    s = applyFinish(s);
    expect(reconcile(s)).toEqual([]);
  });

  it('refuses a result for a decided round and a decision before every result', () => {
    const s = playRound(fresh(), [1, 2, 3, 4]);
    expect(() => applyResult(s, 'r0.b0', result(5))).toThrow(/already decided/);
    const [open] = reconcile(s);
    if (open?.type !== 'open') throw new Error('expected open');
    const opened = applyOpen(s, open.round);
    expect(() => applyDecision(opened, 1, { winner: null, adopted: [] })).toThrow(/without a result/);
    expect(applyDecision(s, 0, { winner: 'r0.b0', adopted: ['r0.b0'] })).toBe(s);
  });
});

describe('selectWinner', () => {
  const ep = (branch: number, score: number | null, spent = 1): Episode => ({
    id: `r1.b${branch}`,
    round: 1,
    branch,
    lineage: 0,
    base: 'b',
    allowance: 1,
    context: 'fresh',
    contextFrom: null,
    directive: false,
    seed: 0,
    result: result(score, spent),
  });

  it('picks the best valid score by direction', () => {
    const eps = [ep(0, 3), ep(1, 9), ep(2, null), ep(3, -2)];
    expect(selectWinner(eps, 'maximize')?.branch).toBe(1);
    expect(selectWinner(eps, 'minimize')?.branch).toBe(3);
  });

  it("breaks ties by the lower branch, never by spend (partly the agent's word; a copier of a sibling spends nothing)", () => {
    expect(selectWinner([ep(0, 5, 3), ep(1, 5, 2), ep(2, 5, 0)], 'maximize')?.branch).toBe(0);
    expect(selectWinner([ep(2, 5), ep(1, 5)], 'maximize')?.branch).toBe(1);
  });

  it('never picks a branch without a valid score', () => {
    expect(selectWinner([ep(0, null), ep(1, Number.NaN)], 'maximize')).toBeNull();
  });
});

describe('a round whose judge the machine starved', () => {
  /** The opening round with these results, decided. */
  function decided(results: ReturnType<typeof result>[]): RunState {
    const [open] = reconcile(fresh());
    if (open?.type !== 'open') throw new Error('expected open');
    let s = applyOpen(fresh(), open.round);
    open.round.episodes.forEach((e, i) => {
      s = applyResult(s, e.id, results[i] ?? result(null));
    });
    const [decide] = reconcile(s);
    if (decide?.type !== 'decide') throw new Error('expected decide');
    return applyDecision(s, decide.round, decide.decision);
  }

  it('is void: no winner, nothing adopted, the lineage unchanged, and the decision says why', () => {
    // r0.b1 would have won; r0.b2, its judge starved twice, might have scored anything.
    const s = decided([result(3), result(12), result(null, 1, { machineShort: 'processes' }), result(5)]);
    const round = s.rounds[0];
    expect(round?.decision).toEqual({
      winner: null,
      adopted: [],
      voided:
        'void: the machine ran out of resources while the judge graded r0.b2 (processes), on both tries; no branch is ranked',
    });
    expect(s.lineages[0]?.head).toBe('base');
    // What was graded stands: the best score found is still the best.
    expect(s.best?.score).toBe(12);
    // The run goes on from the same leader.
    const [next] = reconcile(s);
    expect(next?.type === 'open' && next.round.episodes.every((e) => e.base === 'base')).toBe(true);
  });

  it("is ranked as usual when a judge's failure was the branch's own", () => {
    const own = result(null, 1, {
      reason: 'the grader exited with code 2: fork: retry (for want of processes, within its own limits)',
    });
    const s = decided([result(3), result(9), own, result(5)]);
    expect(s.rounds[0]?.decision?.winner).toBe('r0.b1');
    expect(s.rounds[0]?.decision).not.toHaveProperty('voided');
  });

  it('never voids a serial round: it ranks nothing', () => {
    const state = newRunState({
      id: 't',
      seed: 7,
      config: config('strategy: single-run'),
      baseCommit: 'base',
      baseScore: 10,
    });
    const [open] = reconcile(state);
    if (open?.type !== 'open') throw new Error('expected open');
    let s = applyOpen(state, open.round);
    const e = open.round.episodes[0] as Episode;
    s = applyResult(s, e.id, result(null, e.allowance, { machineShort: 'memory', commit: 'c1' }));
    const [decide] = reconcile(s);
    expect(decide?.type === 'decide' && decide.decision).toEqual({ winner: null, adopted: [e.id] });
  });
});

describe('extra fork rounds', () => {
  it('a requested fork round comes next, on top of the budget, and the schedule goes on after it', () => {
    let s = playRound(fresh(), [1, 2, 3, 4]);
    s = requestFork(s);
    const [extra] = reconcile(s);
    if (extra?.type !== 'open') throw new Error('expected open');
    expect(extra.round).toMatchObject({ phase: 'extra fork 1', kind: 'fork', extra: true });
    expect(extra.round.episodes.map((e) => e.allowance)).toEqual([24, 24, 24, 24]);
    s = playRound(s, [9, 8, 7, 6]);
    expect(s.lineages[0]?.context).toBe('r1.b0');
    // The schedule picks up where it was: the serial stretch up to the first fork point.
    const [next] = reconcile(s);
    if (next?.type !== 'open') throw new Error('expected open');
    expect(next.round.phase).toBe('solo 1');
    expect(next.round.episodes[0]?.allowance).toBe(18);
  });

  it('a round asked for with words gives them to each of its branches, in place of the directive; the next one without words has none', () => {
    let s = playRound(fresh(), [1, 2, 3, 4]);
    s = requestFork(s, 'try a tabu search');
    s = requestFork(s);
    expect(s.forkAsks).toEqual({ 1: 'try a tabu search' });
    const [first] = reconcile(s);
    if (first?.type !== 'open') throw new Error('expected open');
    expect(first.round.episodes.map((e) => [e.asked, e.directive])).toEqual(
      first.round.episodes.map(() => ['try a tabu search', false]),
    );
    s = playRound(s, [9, 8, 7, 6]);
    const [second] = reconcile(s);
    if (second?.type !== 'open') throw new Error('expected open');
    expect(second.round.phase).toBe('extra fork 2');
    expect(second.round.episodes.some((e) => e.asked !== undefined)).toBe(false);
    expect(second.round.episodes.some((e) => e.directive)).toBe(true);
  });

  it('reopens a finished run for one more round', () => {
    let s = fresh('strategy: single-run\n');
    for (let i = 0; i < 100 && reconcile(s)[0]?.type === 'open'; i++) s = playRound(s, [i]);
    s = applyFinish(s);
    s = requestFork(s);
    expect(s.status).toBe('running');
    s = playRound(s, [1, 2, 3, 4]);
    expect(reconcile(s)).toEqual([{ type: 'finish' }]);
    expect(() =>
      requestFork(
        newRunState({ id: 't', seed: 1, config: config('strategy: best-of-n\n'), baseCommit: 'b', baseScore: 0 }),
      ),
    ).toThrow(/best-of-n has no single leader/);
  });
});

describe('results are final', () => {
  it('the same result again changes nothing; a different one is refused', () => {
    const [open] = reconcile(fresh());
    if (open?.type !== 'open') throw new Error('expected open');
    const r = result(5, 2);
    const s = applyResult(applyOpen(fresh(), open.round), 'r0.b0', r);
    expect(applyResult(s, 'r0.b0', r)).toBe(s);
    expect(() => applyResult(s, 'r0.b0', result(9, 2))).toThrow(/already has a result/);
  });
});

describe('interrupted attempts', () => {
  it('are charged to the ledger, add up, and leave a finished episode alone', () => {
    let s = fresh();
    const [open] = reconcile(s);
    if (open?.type !== 'open') throw new Error('expected open');
    s = applyOpen(s, open.round);
    s = applyInterrupted(s, 'r0.b0', 2.5);
    s = applyInterrupted(s, 'r0.b0', 0.25);
    s = applyInterrupted(s, 'r0.b1', 0);
    expect(s.rounds[0]?.episodes.map((e) => e.interruptedSpent)).toEqual([2.75, undefined, undefined, undefined]);
    expect(spent(s)).toBe(2.75);
    s = applyResult(s, 'r0.b0', result(3, 10));
    expect(spent(s)).toBe(12.75);
    expect(applyInterrupted(s, 'r0.b0', 5)).toEqual(s);
    // The episode still runs: an interruption is not a result.
    expect(
      reconcile(s)
        .filter((a) => a.type === 'run')
        .map((a) => a.type === 'run' && a.episode),
    ).toEqual(['r0.b1', 'r0.b2', 'r0.b3']);
  });
});

describe('the best on a tie', () => {
  it("is the round's winner, not whichever branch finished first", () => {
    let s = fresh();
    const forkNext = () => reconcile(s).some((a) => a.type === 'open' && a.round.kind === 'fork');
    for (let i = 0; i < 8 && !forkNext(); i++) s = playRound(s, [1, 2, 3, 4]);
    const [open] = reconcile(s);
    if (open?.type !== 'open' || open.round.kind !== 'fork') throw new Error('expected a fork round');
    s = applyOpen(s, open.round);
    const [first, second, ...rest] = [...open.round.episodes].reverse();
    if (!first || !second) throw new Error('expected two branches');
    // The last branch finishes first with the top score; a lower branch ties it at the same cost.
    s = applyResult(s, first.id, result(99, first.allowance, { commit: `commit-${first.id}` }));
    s = applyResult(s, second.id, result(99, second.allowance, { commit: `commit-${second.id}` }));
    for (const e of rest) s = applyResult(s, e.id, result(1, e.allowance, { commit: `commit-${e.id}` }));
    expect(s.best?.episode).toBe(first.id);
    const [decide] = reconcile(s);
    if (decide?.type !== 'decide') throw new Error('expected decide');
    s = applyDecision(s, decide.round, decide.decision);
    expect(decide.decision.winner).toBe(second.id);
    expect(s.best).toEqual({ episode: second.id, commit: `commit-${second.id}`, score: 99 });
  });
});
