// The rounds after the plan (core/schedule.ts): their config (`schedule`), their own budget and
// end, and the words the plan and the issue say them in. Pure: no GitHub here.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/core/config.js';
import { planTable } from '../../src/core/plan.js';
import { applyDecision, applyResult, decide } from '../../src/core/reconcile.js';
import {
  extraRefusal,
  extraRounds,
  extraRoundsText,
  extraSpent,
  nextRound,
  requestFork,
} from '../../src/core/schedule.js';
import { newRunState, type RunState } from '../../src/core/state.js';
import { advance } from '../../src/core/work.js';
import { CONFIG } from './harness.js';

const PATH = '.github/autoresearch.yml';

function problems(text: string): string[] {
  try {
    parseConfig(text, PATH);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
}

/** A finished run of the plan: every episode spent its allowance and scored 1. */
function finished(schedule: string): RunState {
  const config = parseConfig(`${CONFIG}schedule: ${schedule}\n`, PATH);
  let state = newRunState({ id: 'issue-7', seed: 1, config, baseCommit: 'a'.repeat(40), baseScore: null });
  for (let guard = 0; guard < 100; guard++) {
    state = advance(state).state;
    if (state.status === 'finished') return state;
    state = spendOpenRound(state);
  }
  throw new Error('did not finish');
}

function spendOpenRound(state: RunState, spend = (allowance: number) => allowance): RunState {
  const open = state.rounds.find((r) => !r.decision);
  if (!open) return state;
  let next = state;
  for (const e of open.episodes) {
    next = applyResult(next, e.id, {
      commit: `${e.id.replace(/\D/g, '')}${'b'.repeat(40)}`.slice(0, 40),
      score: 1,
      spent: spend(e.allowance),
      exit: 'finished',
      protectedChanged: [],
      agentSeconds: 1,
      graderSeconds: 1,
      wallSeconds: 2,
    });
  }
  const round = next.rounds.find((r) => r.index === open.index) ?? open;
  return applyDecision(next, open.index, decide(next, round));
}

const DAY = new Date('2026-12-01T12:00:00Z');

describe('schedule in the config', () => {
  it('is none by default; a mapping gives the budget and the end', () => {
    expect(parseConfig(CONFIG, PATH).schedule).toBe('none');
    const c = parseConfig(`${CONFIG}schedule: { nightly: true, budget: 40, until: 2026-12-31 }\n`, PATH);
    expect(c.schedule).toEqual({ nightly: true, budget: 40, until: '2026-12-31' });
    expect(extraRounds(c)).toEqual({ nightly: true, budget: 40, until: '2026-12-31', rounds: null });
    // Asked-for rounds alone, with a budget of their own.
    expect(extraRounds(parseConfig(`${CONFIG}schedule: { budget: 5 }\n`, PATH))).toEqual({
      nightly: false,
      budget: 5,
      until: null,
      rounds: null,
    });
  });

  it('refuses nightly rounds without a budget or an end, at their place', () => {
    expect(problems(`${CONFIG}schedule: nightly\n`)).toEqual([
      `${PATH}:14:11: schedule: nightly needs a budget and an end: write it as a mapping, e.g. schedule: { nightly: true, budget: 100, rounds: 7 } (or until: YYYY-MM-DD instead of rounds)`,
    ]);
    expect(problems(`${CONFIG}schedule:\n  nightly: true\n  budget: 10\n`)).toEqual([
      `${PATH}:15:12: schedule.nightly needs an end: add schedule.until (the last day, YYYY-MM-DD) or schedule.rounds (how many rounds in all)`,
    ]);
    expect(problems(`${CONFIG}schedule:\n  nightly: true\n  rounds: 3\n`)).toEqual([
      `${PATH}:15:3: schedule.budget is required (a number)`,
    ]);
    expect(problems(`${CONFIG}schedule: { budget: 10, until: 2026-13-01 }\n`)).toEqual([
      `${PATH}:14:32: schedule.until must be a date, YYYY-MM-DD, got "2026-13-01"`,
    ]);
    expect(problems(`${CONFIG}schedule: { budget: 0 }\n`)).toEqual([
      `${PATH}:14:21: schedule.budget must be above 0, got 0`,
    ]);
  });

  it('is in the plan', () => {
    const c = parseConfig(`${CONFIG}schedule: { nightly: true, budget: 40, rounds: 7 }\n`, PATH);
    expect(planTable(c)).toMatch(
      /\n\non GitHub, after the plan: one fork round of the leader a night, and rounds asked for with \/autoresearch fork, 2 branches of up to 15 tokens each, 40 tokens in all, at most 7 rounds$/,
    );
    expect(extraRoundsText(parseConfig(CONFIG, PATH))).toBeNull();
  });
});

describe('the rounds after the plan', () => {
  it('never spend past schedule.budget: each opens with what is left, none when too little is', () => {
    let state = finished('{ nightly: true, budget: 35, rounds: 10 }');
    const allowances: number[][] = [];
    for (let i = 0; i < 5; i++) {
      if (extraRefusal(state, DAY) !== null) break;
      state = advance(requestFork(state)).state;
      const open = state.rounds.find((r) => !r.decision);
      if (!open) break;
      allowances.push(open.episodes.map((e) => e.allowance));
      state = advance(spendOpenRound(state)).state;
    }
    // 2 branches of at most 15 tokens: 30, then what is left (5) split in two: 2.5 each, the least an episode is worth.
    expect(allowances).toEqual([
      [15, 15],
      [2.5, 2.5],
    ]);
    expect(extraSpent(state)).toBe(35);
    expect(extraRefusal(state, DAY)).toBe(
      'the rounds after the plan have spent 35 of their 35 tokens (`schedule.budget`), too little is left for another round',
    );
  });

  it('a round asked for that finds the budget taken opens nothing: the run stays finished', () => {
    let state = finished('{ nightly: true, budget: 30, rounds: 10 }');
    // Two requests at once, when what is left pays for one round.
    state = requestFork(requestFork(state));
    state = advance(spendOpenRound(advance(state).state)).state;
    expect(state.rounds.filter((r) => r.extra)).toHaveLength(1);
    expect(state.status).toBe('finished');
    expect(nextRound(state)).toBeNull();
    expect(extraSpent(state)).toBe(30);
  });

  it('end at schedule.rounds and after schedule.until', () => {
    let state = finished('{ nightly: true, budget: 1000, rounds: 1 }');
    expect(extraRefusal(state, DAY)).toBeNull();
    state = requestFork(state);
    expect(extraRefusal(state, DAY)).toBe('the run has had the 1 round after its plan that `schedule.rounds` allows');
    const until = finished('{ nightly: true, budget: 1000, until: 2026-12-01 }');
    expect(extraRefusal(until, DAY)).toBeNull();
    expect(extraRefusal(until, new Date('2026-12-02T00:00:00Z'))).toBe('`schedule.until` (2026-12-01) has passed');
  });
});
