// The caps of issue 10: `limits.runs_per_repo` (runs running at once in a repository) and
// `limits.rounds` (rounds one run may open, extra ones included), each refused with a comment that
// says why; and the pure checks behind them (core/limits.ts).
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { SEEN_MAX_KEYS } from '../../src/core/bounds.js';
import { type Config, parseConfig } from '../../src/core/config.js';
import {
  advanceWithinLimits,
  endedAtRoundLimit,
  roundLimit,
  roundLimitNotes,
  roundsLeft,
  scheduleRounds,
} from '../../src/core/limits.js';
import { EXTRA_ROUNDS } from '../../src/core/method.js';
import { plan } from '../../src/core/plan.js';
import { applyResult } from '../../src/core/reconcile.js';
import { requestFork } from '../../src/core/schedule.js';
import { remember } from '../../src/core/seen-events.js';
import { newRunState, type RunState } from '../../src/core/state.js';
import { shown } from './fake-github.js';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const config = (extra = ''): Config => parseConfig(`${CONFIG}${extra}`, 'autoresearch.yml');

/** Plays the run's rounds (every episode scores 1) until it finishes. */
async function playToEnd(h: Harness) {
  for (let guard = 0; guard < 20 && h.state(RUN).status !== 'finished'; guard++) {
    const state = h.state(RUN);
    for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 1);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id);
  }
}

/** Runs the schedule with the core's steps, within the round limit: every episode spends `spent(allowance)`. */
function runWithinLimits(c: Config, spent = (allowance: number) => allowance) {
  let state: RunState = newRunState({ id: 'r', seed: 1, config: c, baseCommit: 'a'.repeat(40), baseScore: null });
  let capped = false;
  for (let guard = 0; guard < 1000; guard++) {
    const out = advanceWithinLimits(state);
    state = out.state;
    capped ||= out.capped;
    const open = state.rounds.find((r) => !r.decision);
    if (state.status === 'finished' || !open) return { state, capped };
    for (const e of open.episodes) {
      state = applyResult(state, e.id, {
        commit: 'b'.repeat(40),
        score: 1,
        spent: spent(e.allowance),
        exit: 'finished',
        protectedChanged: [],
        agentSeconds: 1,
        graderSeconds: 1,
        wallSeconds: 1,
      });
    }
  }
  throw new Error('the run did not end');
}

describe('the round limit (core)', () => {
  it('is by default the most rounds the schedule may open, plus the extra rounds', () => {
    const c = config();
    const planned = plan(c).reduce((n, p) => n + p.rounds, 0);
    expect(planned).toBe(6);
    // Agents that stop at once get up to 2n + 2 serial episodes per stretch: 1 + 12 and 1 + 12.
    expect(scheduleRounds(c)).toBe(26);
    expect(roundLimit(c)).toBe(26 + EXTRA_ROUNDS);
    expect(roundLimit(config('limits:\n  rounds: 4\n'))).toBe(4);
  });

  it('never stops a run that follows its schedule, even with agents that stop early', () => {
    for (const spent of [(a: number) => a, (a: number) => a / 10, () => 0]) {
      const { state, capped } = runWithinLimits(config(), spent);
      expect(capped).toBe(false);
      expect(state.status).toBe('finished');
      expect(endedAtRoundLimit(state)).toBe(false);
    }
  });

  it('a lower limits.rounds ends the run at the limit, and says so', () => {
    const { state, capped } = runWithinLimits(config('limits:\n  rounds: 4\n'));
    expect(capped).toBe(true);
    expect(state.rounds).toHaveLength(4);
    expect(state.status).toBe('finished');
    expect(endedAtRoundLimit(state)).toBe(true);
    expect(roundLimitNotes(state)).toEqual([
      'The run ended at its round limit: it opened 4 rounds, all that it may (`limits.rounds`: 4), before its schedule was done.',
    ]);
  });

  it('counts fork rounds asked for and not opened yet', () => {
    const c = config('limits:\n  rounds: 3\n');
    const state = newRunState({ id: 'r', seed: 1, config: c, baseCommit: 'a'.repeat(40), baseScore: null });
    const opened = advanceWithinLimits(state).state;
    expect(roundsLeft(opened)).toBe(2);
    expect(roundsLeft(requestFork(requestFork(opened)))).toBe(0);
  });

  it('keeps the newest keys of the events acted on, each once', () => {
    const many = Array.from({ length: SEEN_MAX_KEYS + 5 }, (_, i) => `delivery:${i}`);
    const kept = remember([], many);
    expect(kept).toHaveLength(SEEN_MAX_KEYS);
    expect(kept[0]).toBe('delivery:5');
    expect(remember(['a', 'b', 'c'], ['a'])).toEqual(['b', 'c', 'a']);
  });
});

describe('limits.runs_per_repo', () => {
  const oneRunAtOnce = () =>
    new Harness({ '.github/autoresearch.yml': `${CONFIG}limits:\n  runs_per_repo: 1\n`, 'grade.mjs': 'x' }).load();

  it('a run does not start, or resume, while as many others run; it says which and what to do', async () => {
    const h = await oneRunAtOnce();
    await h.label(7);
    await h.label(8);
    expect(h.gh.comments.filter((c) => c.issue === 8).map((c) => shown(c.body))).toEqual([
      'forkflush did not start: 1 run is already running in this repository (issue-7), as many as `limits.runs_per_repo` allows (1). ' +
        'Stop one (`/autoresearch stop` on its issue) or wait for one to finish, then label this issue again.',
    ]);
    expect(h.runFiles('issue-8')).toBeNull();
    expect(h.gh.dispatches).toHaveLength(1);
    // A stopped run is not running: the other one starts, and the stopped one cannot resume now.
    await h.comment(7, '/autoresearch stop');
    await h.label(8);
    expect(h.runFiles('issue-8')?.stopped).toBe(false);
    await h.comment(7, '/autoresearch resume');
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe(
      'forkflush did not resume the run: 1 run is already running in this repository (issue-8), as many as `limits.runs_per_repo` allows (1). ' +
        'Stop one (`/autoresearch stop` on its issue) or wait for one to finish, then `/autoresearch resume` again.',
    );
    expect(h.runFiles(RUN)?.stopped).toBe(true);
  });

  it('/autoresearch fork does not set a finished run going again while as many others run', async () => {
    const h = await oneRunAtOnce();
    await h.label(7);
    await playToEnd(h);
    expect(h.state(RUN).status).toBe('finished');
    await h.label(8);
    expect(h.runFiles('issue-8')?.stopped).toBe(false);
    const dispatched = h.gh.dispatches.length;
    await h.comment(7, '/autoresearch fork');
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe(
      'forkflush opened no fork round: 1 run is already running in this repository (issue-8), as many as `limits.runs_per_repo` allows (1). ' +
        'Stop one (`/autoresearch stop` on its issue) or wait for one to finish, then `/autoresearch fork` again.',
    );
    expect(h.state(RUN).extraForks).toBeUndefined();
    expect(h.gh.dispatches).toHaveLength(dispatched);
    // Once the other run is stopped, the same request opens the round.
    await h.comment(8, '/autoresearch stop');
    await h.comment(7, '/autoresearch fork');
    expect(h.gh.dispatches.length).toBeGreaterThan(dispatched);
  });

  it("a run its own stop halted takes no other run's turn: a new run starts, and the halted one resumes within the limit", async () => {
    // Every job of issue 7's opening round ends without a result: the run halts, waiting for a
    // resume, and nothing of it runs. It once held the only slot for good (found by a review).
    const h = await oneRunAtOnce();
    await h.label(7);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id, 'failure');
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).toMatch(/\*\*Status:\*\* stopped: the worker jobs of/);
    await h.label(8);
    expect(h.runFiles('issue-8')?.stopped).toBe(false);
    expect(h.gh.comments.filter((c) => c.issue === 8).map((c) => c.body)).not.toContainEqual(
      expect.stringMatching(/already running in this repository/),
    );
    // While issue 8 runs, the halted run's resume waits its turn.
    await h.comment(7, '/autoresearch resume');
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toMatch(
      /^forkflush did not resume the run: 1 run is already running in this repository \(issue-8\)/,
    );
  });

  it('by default three run at once', async () => {
    const h = await new Harness().load();
    for (const issue of [1, 2, 3, 4]) await h.label(issue);
    expect(h.gh.comments.filter((c) => c.issue === 4).map((c) => c.body)).toEqual([
      expect.stringMatching(
        /^forkflush did not start: 3 runs are already running in this repository \(issue-1, issue-2, issue-3\)/,
      ),
    ]);
  });
});

describe('limits.rounds', () => {
  it('/autoresearch fork at the limit opens nothing and says why', async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}limits:\n  rounds: 1\n`,
      'grade.mjs': 'x',
    }).load();
    await h.label(7);
    await h.comment(7, '/autoresearch fork');
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe(
      'forkflush opened no fork round: issue-7 has opened or asked for 1 round, all that it may (`limits.rounds`: 1), ' +
        'so forkflush opens no more. A new issue starts a new run (its config may set a higher `limits.rounds`).',
    );
    expect(h.state(RUN).extraForks).toBeUndefined();
  });

  it('a nightly round at the limit is skipped, and the issue told once', async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 1000, rounds: 30 }\nlimits:\n  rounds: 6\n`,
      'grade.mjs': 'x',
    }).load();
    await h.label(7);
    await playToEnd(h);
    expect(h.state(RUN).rounds).toHaveLength(6);
    const before = h.gh.comments.length;
    await nightlyTick(h.api(), h.clock);
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    expect(h.state(RUN).rounds).toHaveLength(6);
    expect(h.gh.comments.slice(before).map((c) => c.body)).toEqual([
      'forkflush ran no nightly round: issue-7 has opened or asked for 6 rounds, all that it may (`limits.rounds`: 6), ' +
        'so forkflush opens no more. A new issue starts a new run (its config may set a higher `limits.rounds`).',
    ]);
  });
});
