// Overnight, unattended: where a GitHub run goes wrong without telling anyone (a green end that
// did nothing, money spent on rounds that cannot work, a run stuck with no word to the team).
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { commentMarker } from '../../src/core/github-text.js';
import { roundDeadlineMinutes, STALE_CLAIM_MINUTES } from '../../src/core/method.js';
import { CONFIG, Harness, issueText } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';

/** The next night's round finds a better result (9), its jobs ending as they may. */
async function betterResultTonight(h: Harness): Promise<void> {
  h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
  await nightlyTick(h.api(), h.clock);
  const state = h.state(RUN);
  for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 9);
  for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id).catch(() => {});
  expect(h.state(RUN).best?.score).toBe(9);
}

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
    // The run stops and says so: after CRASH_STREAK (3) such episodes in a row. Here the two serial
    // episodes after the opening, then the fork round's two branches (their jobs end together).
    expect(failed.map((e) => e.id)).toHaveLength(4);
    expect(state.status).toBe('running');
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).toMatch(
      /stopped: the worker jobs of 4 episodes in a row \(r1\.b0, r2\.b0, r3\.b0, r3\.b1\) ended without a result, the last with `its job ended: failure.*lack a permission/,
    );
    const check = h.gh.checkRuns.find((c) => c.name === 'forkflush');
    expect(check?.conclusion).toBe('failure');
    // Running the two branches again could pass budget.total (80 of 100 charged, 30 more allowed
    // them): the issue says a resume cannot help, and a resume dispatches nothing.
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).toContain(
      "a resume cannot run them again: with 80 of budget.total's 100 spent, their allowances (30) would take the run past it, so start a new run",
    );
    const dispatched = h.gh.dispatches.length;
    await h.comment(7, '/autoresearch resume');
    expect(h.gh.dispatches).toHaveLength(dispatched);
  });

  it('jobs of the opening round that give no result stop the run; once fixed, a resume runs them again', async () => {
    const h = await new Harness().load();
    await h.label(7);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id, 'failure');
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).toMatch(
      /stopped: the worker jobs of every branch of the first fork round \(r0\.b0, r0\.b1\) ended without a result.*\(`\/autoresearch resume`\)/,
    );
    await h.comment(7, '/autoresearch resume');
    expect(h.gh.dispatches).toHaveLength(2);
    expect(h.openEpisodes(RUN).map((e) => e.id)).toEqual(['r0.b0', 'r0.b1']);
    // What the failed jobs were charged stays charged.
    expect(h.state(RUN).rounds[0]?.episodes.map((e) => e.interruptedSpent)).toEqual([15, 15]);
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
    expect(comment).toMatch(
      /\*\*Status:\*\* stuck: forkflush could not start round 1's jobs \(`.*404.*`; since .* UTC\)/,
    );
    expect(h.gh.checkRuns.find((c) => c.name === 'forkflush')?.output?.title).toMatch(
      /^stuck: could not start round 1's jobs/,
    );
    // Once the workflow is back, the next trigger after the failed attempt's claim went stale
    // dispatches the round, and the issue says it runs.
    h.gh.inject = null;
    h.clock = new Date(h.clock.getTime() + (STALE_CLAIM_MINUTES + 1) * 60_000);
    await nightlyTick(h.api(), h.clock);
    expect(h.gh.dispatches).toHaveLength(2);
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).toMatch(/round 1 \([^)]*\) running/);
  });
});

/** A run of issue 7 with nightly rounds (and `more` config), played to its end. */
async function finishedNightlyRun(more = ''): Promise<Harness> {
  const h = await new Harness({
    '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 5 }\n${more}`,
    'grade.mjs': 'x',
  }).load();
  await h.label(7);
  await h.playToEnd(RUN);
  return h;
}

describe('overnight: the nightly rounds', () => {
  it('a config whose schedule.until has passed (a slip of the year) starts no run, and says why and on which date', async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, until: 2025-12-01 }\n`,
    }).load();
    expect(h.clock.toISOString().slice(0, 10)).toBe('2026-11-30');
    await h.label(7);
    expect(h.gh.dispatches).toEqual([]);
    expect(h.gh.comments.filter((c) => c.issue === 7).map((c) => c.body)).toContainEqual(
      expect.stringContaining(
        '`schedule.until` (2025-12-01) has passed (today is 2026-11-30, UTC), so no round after the plan could run: set a later date (fix it on `main`, then label the issue again).',
      ),
    );
    // Its last day is still a day it may start on.
    const today = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, until: 2026-11-30 }\n`,
    }).load();
    await today.label(7);
    expect(today.gh.dispatches).toHaveLength(1);
  });

  it('keep to limits.runs_per_repo: the nightly tick does not set more runs going at once than it allows', async () => {
    const h = await finishedNightlyRun('limits:\n  runs_per_repo: 1\n');
    await h.label(8);
    await h.playToEnd('issue-8');
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    const running = ['issue-7', 'issue-8'].filter((run) => h.state(run).status === 'running');
    expect(running).toEqual(['issue-7']);
    // The other run's issue is told why it got no round tonight.
    expect(h.gh.comments.filter((c) => c.issue === 8).map((c) => c.body)).toContainEqual(
      expect.stringMatching(/^forkflush ran no nightly round: 1 run is already running in this repository \(issue-7\)/),
    );
    // The next nights they take turns: the run that waited goes first, not the first listed.
    const rounds: string[] = [];
    for (let night = 2; night <= 4; night++) {
      for (const run of ['issue-7', 'issue-8']) await h.playToEnd(run);
      h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
      await nightlyTick(h.api(), h.clock);
      rounds.push(['issue-7', 'issue-8'].filter((run) => h.state(run).status === 'running').join());
    }
    expect(rounds).toEqual(['issue-8', 'issue-7', 'issue-8']);
  });

  it("a reviewer's commit on the result branch: the new result that cannot be published is said on the issue", async () => {
    const h = await finishedNightlyRun();
    // A reviewer fixes a typo on the draft pull request's branch, as reviewers do.
    const ref = 'refs/heads/forkflush/issue-7/result';
    const head = h.gh.refs.get(ref) as string;
    const files = { ...h.gh.commits.get(head)?.files, 'TYPO.md': 'fixed\n' };
    h.gh.refs.set(ref, h.gh.commit({ message: 'fix a typo', parents: [head], files }));
    // The night's round finds a better result.
    await betterResultTonight(h);
    // The draft pull request the team merges must not claim a result its branch does not hold...
    const holdsBest = h.gh.refs.get(ref) === h.state(RUN).lineages[0]?.head;
    expect({ title: h.gh.pulls[0]?.title, holdsBest }).not.toEqual({
      title: 'forkflush issue-7: best score 9',
      holdsBest: false,
    });
    // ...and the issue must say why the result branch stayed behind, and what to do.
    expect(issueText(h)).toContain('has commits forkflush did not make');
    expect(issueText(h)).toContain('merge that commit into it, or delete the branch, then `/autoresearch status`');
    // In the morning, a maintainer does as the issue says, minutes later: the run publishes its
    // result now. The failed attempt held its claim for 10 minutes, so the command was answered
    // +1 and nothing retried it until the next night's tick (found by a review).
    h.clock = new Date(h.clock.getTime() + 2 * 60_000);
    h.gh.refs.delete(ref);
    await h.comment(7, '/autoresearch status');
    expect(h.gh.refs.get(ref)).toBe(h.state(RUN).lineages[0]?.head);
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).not.toMatch(/\*\*Status:\*\* stuck/);
  });

  it('a round whose every job ended without a result stops the run that night: no green check, no round the next night', async () => {
    // An agent's key that expired, Actions' billing: the night's two branches are fewer than
    // CRASH_STREAK, and such a round was decided, the run "finished" with a green check and the
    // next night spent another round alike (core/stop.ts crashedRun; found by a review).
    const h = await finishedNightlyRun();
    const checks = () => h.gh.checkRuns.filter((c) => c.name === 'forkflush');
    const before = checks().length;
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    expect(h.openEpisodes(RUN)).toHaveLength(2);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id, 'failure');
    const dispatched = h.gh.dispatches.length;
    expect(
      checks()
        .slice(before)
        .map((c) => c.conclusion),
    ).not.toContain('success');
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).toMatch(
      /\*\*Status:\*\* stopped: the worker jobs of every branch of round \d+, after the plan \(/,
    );
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock).catch(() => {});
    expect(h.gh.dispatches).toHaveLength(dispatched);
  });

  /** A night whose b0 ends at once (score 3) and whose b1 waited 40 minutes for a runner, then started. */
  async function lateStartNight() {
    const h = await finishedNightlyRun();
    const later = (minutes: number) => {
      h.clock = new Date(h.clock.getTime() + minutes * 60_000);
    };
    later(24 * 60);
    await nightlyTick(h.api(), h.clock);
    const [b0, b1] = h.openEpisodes(RUN);
    if (!b0 || !b1) throw new Error('expected a nightly round of two branches');
    await h.jobStarted(RUN, b0.id);
    later(20);
    h.pushResult(h.state(RUN), b0, 3);
    await h.jobCompleted(RUN, b0.id);
    later(20);
    await h.jobStarted(RUN, b1.id);
    return { h, b1, later, limit: roundDeadlineMinutes(h.state(RUN).config) };
  }
  const b1Result = (h: Harness) => h.state(RUN).rounds.at(-1)?.episodes[1]?.result;

  it("a job that waited for a runner past the round's deadline, then started, has the round's time from its start", async () => {
    // At night every run's round is dispatched at once and jobs queue. b1 was failed at the
    // dispatch's deadline while its agent worked, and its better result was lost
    // (github/observe.ts startedLate; found by a review).
    const { h, b1, later, limit } = await lateStartNight();
    // Past the dispatch's deadline, a sync comes by (a tick, another event) while b1's agent works.
    later(limit - 40 + 5);
    await nightlyTick(h.api(), h.clock);
    expect(b1Result(h)).toBeUndefined();
    later(10);
    h.pushResult(h.state(RUN), b1, 9);
    await h.jobCompleted(RUN, b1.id);
    expect(h.state(RUN).best?.score).toBe(9);
  });

  it("a job that started late and gives no result in the round's time from its start is failed then", async () => {
    const { h, later, limit } = await lateStartNight();
    later(limit + 1);
    await nightlyTick(h.api(), h.clock);
    expect(b1Result(h)?.reason).toMatch(/^no result by the round's deadline/);
  });

  it('a round its deadline decided has its workflow run cancelled: a job still queued holds no runner for nothing', async () => {
    // Such a job, once it got a runner, found its round decided and refused to run: runner
    // minutes, and on a self-hosted runner a place in the queue before other runs' jobs.
    const h = await finishedNightlyRun();
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    const [b0] = h.openEpisodes(RUN);
    if (!b0) throw new Error('expected a nightly round');
    h.pushResult(h.state(RUN), b0, 3);
    await h.jobCompleted(RUN, b0.id);
    const round = h.state(RUN).rounds.at(-1)?.index ?? -1;
    const runId = h.runFiles(RUN)?.dispatched[String(round)]?.runId;
    const workflowRun = h.gh.actions?.runs.find((r) => r.id === runId);
    expect(workflowRun?.status).not.toBe('completed');
    h.clock = new Date(h.clock.getTime() + (roundDeadlineMinutes(h.state(RUN).config) + 1) * 60_000);
    await nightlyTick(h.api(), h.clock);
    expect(b1Result(h)?.reason).toMatch(/^no result by the round's deadline/);
    expect(workflowRun).toMatchObject({ status: 'completed', conclusion: 'cancelled' });
    // The other rounds, decided by their jobs' ends, were left alone.
    const cancelled = h.gh.actions?.runs.filter((r) => r.conclusion === 'cancelled') ?? [];
    expect(cancelled.map((r) => r.id)).toEqual([runId]);
  });

  it("a night's better result after a person closed the draft pull request is proposed in a new one", async () => {
    // The closed draft was retitled to the new score, and no open pull request proposed it
    // (github/work.ts publishRun; found by a review).
    const h = await finishedNightlyRun();
    const draft = h.gh.pulls.find((p) => p.head === 'forkflush/issue-7/result');
    if (!draft) throw new Error('expected the result draft pull request');
    draft.state = 'closed';
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    const state = h.state(RUN);
    for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 9);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id);
    expect(h.state(RUN).best?.score).toBe(9);
    const open = h.gh.pulls.filter((p) => p.head === 'forkflush/issue-7/result' && p.state === 'open');
    expect(open).toHaveLength(1);
    expect(open[0]).toMatchObject({ draft: true, base: 'main', title: 'forkflush issue-7: best score 9' });
    expect(h.gh.refs.get('refs/heads/forkflush/issue-7/result')).toBe(h.state(RUN).lineages[0]?.head);
    expect(draft.title).not.toContain('best score 9');
    expect(h.gh.comments.find((c) => c.issue === 7)?.body).toContain(`**Result:** #${open[0]?.number} (a draft`);
  });

  it('a tick that reaches a run late (after the repositories before it) gives its round its full deadline', async () => {
    const h = await finishedNightlyRun();
    // The tick began at 03:00; after the repositories before this one (writes are throttled to
    // one a second), it reaches this run past what would have been the round's deadline.
    const minutes = roundDeadlineMinutes(h.state(RUN).config);
    const began = new Date(h.clock.getTime() + 24 * 3_600_000);
    const reached = new Date(began.getTime() + (minutes + 5) * 60_000);
    const readings = [began];
    h.clock = reached;
    await nightlyTick(h.api(), () => readings.shift() ?? reached);
    const state = h.state(RUN);
    const [first, second] = h.openEpisodes(RUN);
    if (!first || !second) throw new Error('expected a nightly round of two branches');
    // Minutes later its first job reports; the second is still running.
    h.clock = new Date(h.clock.getTime() + 5 * 60_000);
    h.pushResult(state, first, 3);
    await h.jobCompleted(RUN, first.id);
    expect(h.state(RUN).rounds.at(-1)?.episodes[1]?.result?.reason).toBeUndefined();
  });
});

describe('overnight: GitHub refusing for a while', () => {
  it('a status comment edit refused for the secondary rate limit (a 403 with retry-after) makes no second status comment', async () => {
    const h = await new Harness().load();
    await h.label(7);
    let refusals = 1;
    h.gh.inject = (method, path) =>
      method === 'PATCH' && /\/issues\/comments\//.test(path) && refusals-- > 0 ? 403 : null;
    const state = h.state(RUN);
    for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 5);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id).catch(() => {});
    expect(h.gh.injected).toHaveLength(1);
    await h.comment(7, '/autoresearch status');
    const marked = h.gh.comments.filter((c) => c.issue === 7 && c.body.startsWith(commentMarker(RUN)));
    expect(marked).toHaveLength(1);
    expect(marked[0]?.body).toMatch(/round 1 \([^)]*\) running/);
  });
});

describe('overnight: a green check means something was gained', () => {
  it('a run whose initial workspace was never graded (its job failed) does not end with a success check', async () => {
    const h = await new Harness().load();
    await h.label(7);
    // The job that grades the initial workspace fails (a runner lost at 3 a.m.): no baseline.
    await h.jobCompleted(RUN, 'base', 'failure');
    expect(h.state(RUN).base.score).toBeNull();
    await h.playToEnd(RUN);
    expect(h.state(RUN).status).toBe('finished');
    // Nothing says any episode beat the workspace it started from.
    const check = h.gh.checkRuns.find((c) => c.name === 'forkflush');
    expect(check?.conclusion).not.toBe('success');
  });
});

/**
 * An admin adds a ruleset overnight that covers every branch (say, "Require signed commits"):
 * GitHub refuses the app's update of `ref` with 422 "Repository rule violations found".
 */
function rulesetOn(h: Harness, ref: string): void {
  const gh = h.gh;
  const handle = gh.handle.bind(gh);
  gh.handle = (method, uri, body, headers) => {
    const path = decodeURIComponent(new URL(uri, 'https://api.github.com').pathname);
    if (method === 'PATCH' && path.endsWith(`/git/${ref}`)) {
      gh.log.push(`${method} ${path} (ruleset)`);
      return {
        status: 422,
        body: {
          message: 'Repository rule violations found\n\nCommits must have verified signatures.\n\n',
          documentation_url: 'https://docs.github.com/rest/git/refs#update-a-reference',
          status: '422',
        },
      };
    }
    return handle(method, uri, body, headers);
  };
}

describe('a ruleset added mid-run', () => {
  it("a ruleset refusing the result branch's update is said as GitHub's refusal, not as someone's commits on the branch", async () => {
    // A night's round finds a better result; moving `forkflush/issue-7/result` to it is refused by
    // a ruleset the admin added that evening. The app takes every 422 of a ref update for "the
    // branch moved elsewhere" and tells the team, wrongly, that the result branch "has commits
    // forkflush did not make": merge them in or delete the branch. Nobody pushed to it. A team that
    // deletes the branch as told loses the draft pull request's branch, and the run stays stuck
    // (the creation is refused as well). Expected: the issue quotes GitHub's refusal (the rule).
    const h = await finishedNightlyRun();
    const ref = 'refs/heads/forkflush/issue-7/result';
    const head = h.gh.refs.get(ref);
    expect(head).toBeDefined();
    rulesetOn(h, ref);
    await betterResultTonight(h);
    // Nobody pushed to the branch: it is where forkflush left it.
    expect(h.gh.refs.get(ref)).toBe(head);
    const said = issueText(h);
    expect({
      blamesAPush: said.includes('has commits forkflush did not make'),
      quotesTheRule: said.includes('Repository rule violations found'),
    }).toEqual({ blamesAPush: false, quotesTheRule: true });
  });
});
