// Overnight, unattended: where a GitHub run goes wrong without telling anyone (a green end that
// did nothing, money spent on rounds that cannot work, a run stuck with no word to the team).
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';

describe('overnight: a mistake found before the whole budget is spent', () => {
  it('a grader that scores neither the initial workspace nor any branch of the opening round stops the run', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state(RUN);
    // The grader fails everywhere (a missing dependency in the judge): the base job and both branches.
    h.pushBase(state, null);
    await h.jobCompleted(RUN, 'base');
    for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, null);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id);
    // As locally (exit 1): no more rounds, and the issue says why.
    expect(h.gh.dispatches).toHaveLength(1);
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).toContain('neither the initial workspace nor any episode');
  });

  it('worker jobs that all fail without a result stop the run, not end it green', async () => {
    const h = await new Harness().load();
    await h.label(7);
    // The opening round works.
    let state = h.state(RUN);
    h.pushBase(state, 1);
    await h.jobCompleted(RUN, 'base');
    for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 5 + e.branch);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id);
    // Then every job dies before it pushes (a push the token may not make, a runner lost after
    // the agent ran): each is charged its allowance and the schedule goes on.
    for (let guard = 0; guard < 30; guard++) {
      state = h.state(RUN);
      const open = state.rounds.find((r) => !r.decision);
      if (!open || state.status === 'finished') break;
      for (const e of open.episodes) await h.jobCompleted(RUN, e.id, 'failure');
    }
    state = h.state(RUN);
    const failed = state.rounds.flatMap((r) => r.episodes).filter((e) => e.result?.reason?.startsWith('its job ended'));
    // At most CRASH_STREAK (3) such episodes in a row before the run stops and says so.
    expect(failed.length).toBeLessThanOrEqual(3);
    const check = h.gh.checkRuns.find((c) => c.name === 'forkflush');
    expect(check?.conclusion).not.toBe('success');
  });

  it('a round that cannot be dispatched (the worker workflow removed or disabled) tells the issue, not "running"', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state(RUN);
    for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 5 + e.branch);
    // Overnight, the worker workflow is gone: every dispatch is refused.
    h.gh.inject = (method, path) => (method === 'POST' && path.endsWith('/dispatches') ? 404 : null);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id).catch(() => {});
    // The nightly tick tries again, and again the next night.
    for (const day of [1, 2]) {
      h.clock = new Date(h.clock.getTime() + day * 24 * 3_600_000);
      await nightlyTick(h.api(), h.clock).catch(() => {});
    }
    expect(h.gh.dispatches).toHaveLength(1);
    const comment = h.gh.comments.find((c) => c.issue === 7)?.body ?? '';
    // The team reads the issue: it must not say a round is running when none could start.
    expect(comment).not.toMatch(/round 1 \([^)]*\) running/);
  });
});

