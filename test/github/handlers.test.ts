// Who may start and steer a run, and what the app says when it will not. The first cases use
// plain nock interceptors: every request the app makes is listed, with its exact body.
import nock from 'nock';
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { repositoryKey, sealedFiles } from '../../src/github/record-seal.js';
import { shown } from './fake-github.js';
import { CONFIG, Harness, WORKER_WORKFLOW } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const statusOf = (h: Harness, issue = 7) => h.gh.comments.find((c) => c.issue === issue)?.body ?? '';

const API = 'https://api.github.com';
const REPO = '/repos/octo-org/octo-repo';

/** A harness whose fake GitHub is not mounted: only the interceptors a test lists answer. */
async function bare(): Promise<Harness> {
  const h = new Harness();
  await h.probot.load((await import('../../src/app/app.js')).forkflushApp({ now: () => h.clock }));
  return h;
}

// In these, every interceptor listed must be used: the app made exactly these requests.
describe('refusals (exact requests)', () => {
  it('a label from a user without write access starts nothing and says why', async () => {
    const h = await bare();
    const posted: unknown[] = [];
    nock(API)
      .get(`${REPO}/collaborators/reader/permission`)
      .reply(200, { permission: 'read', role_name: 'read' })
      // Answered once per delivery: the answer is looked for first (none yet).
      .get(`${REPO}/issues/7/comments`)
      .query(true)
      .reply(200, [])
      .post(`${REPO}/issues/7/comments`, (body) => posted.push(body) > 0)
      .reply(201, { id: 1 });
    await h.label(7, 'reader');
    expect(posted).toEqual([
      {
        body: `@reader: only people with write access to this repository can start a run (yours: read).${'\n\n<!-- forkflush:answers delivery:delivery-1 -->'}`,
      },
    ]);
    expect(nock.pendingMocks()).toEqual([]);
  });

  it('a label from a bot starts nothing, without asking for its permission', async () => {
    const h = await bare();
    const posted: unknown[] = [];
    nock(API)
      .get(`${REPO}/issues/7/comments`)
      .query(true)
      .reply(200, [])
      .post(`${REPO}/issues/7/comments`, (body) => posted.push(body) > 0)
      .reply(201, { id: 1 });
    await h.label(7, 'dependabot[bot]', 'Bot');
    expect(posted).toEqual([
      {
        body: `forkflush ignores bots: dependabot[bot] cannot start a run.${'\n\n<!-- forkflush:answers delivery:delivery-1 -->'}`,
      },
    ]);
    expect(nock.pendingMocks()).toEqual([]);
  });

  it('a label on a pull request is answered on the pull request', async () => {
    const h = await bare();
    const posted: unknown[] = [];
    nock(API)
      .get(`${REPO}/issues/42/comments`)
      .query(true)
      .reply(200, [])
      .post(`${REPO}/issues/42/comments`, (body) => posted.push(body) > 0)
      .reply(201, { id: 1 });
    await h.send('pull_request', 'labeled', (p) => {
      p.number = 42;
      p.pull_request.number = 42;
      p.label.name = 'autoresearch';
      p.sender.type = 'User';
    });
    expect(posted).toEqual([
      {
        body: `forkflush runs on issues, not pull requests: describe the task in an issue and label that \`autoresearch\`.${'\n\n<!-- forkflush:answers delivery:delivery-1 -->'}`,
      },
    ]);
    expect(nock.pendingMocks()).toEqual([]);
  });

  it('other labels and other comments cost no request at all', async () => {
    const h = await bare();
    // With no interceptor at all, any request the app made would be one nock cannot match.
    const requests: string[] = [];
    const onRequest = (req: { method?: string; path?: string }) => requests.push(`${req.method} ${req.path}`);
    nock.emitter.on('no match', onRequest);
    try {
      await h.label(7, 'maintainer', 'User', 'bug');
      await h.comment(7, 'Looks good to me');
    } finally {
      nock.emitter.removeListener('no match', onRequest);
    }
    expect(requests).toEqual([]);
  });
});

describe('starting a run', () => {
  it('a bad config is explained on the issue, with file, line and key, and no branch is made', async () => {
    const h = await new Harness({ '.github/autoresearch.yml': CONFIG.replace('fork:', 'forks:') }).load();
    await h.label(7);
    const [comment] = h.gh.comments;
    // (The list of valid keys grows with the config; its start is enough here.)
    expect(comment?.body).toContain(
      'forkflush did not start: `.github/autoresearch.yml` on `main` is not valid, so no run started. Fix these and label the issue again:\n\n' +
        '- .github/autoresearch.yml:10:1: unknown key "forks"; did you mean "fork"? Valid keys: task, grader, agent, ',
    );
    expect([...h.gh.refs.keys()]).toEqual(['refs/heads/main']);
    expect(h.gh.dispatches).toEqual([]);
  });

  it('a repository without a config is told where to put one', async () => {
    const h = await new Harness({ 'README.md': 'hi' }).load();
    await h.label(7);
    expect(h.gh.comments[0]?.body).toContain('There is no `.github/autoresearch.yml` on `main`');
    // One at a path people expect is named, and where it goes.
    const named = await new Harness({ '.github/autoresearch.yaml': 'grader: {command: x}\n' }).load();
    await named.label(7);
    expect(named.gh.comments[0]?.body).toContain(
      'There is no `.github/autoresearch.yml` on `main`: .github/autoresearch.yaml is not read: forkflush reads .github/autoresearch.yml (move or rename it there), then label the issue again.',
    );
  });

  it('an outdated worker workflow that works starts the run, and its status comment says what differs and the fix', async () => {
    const h = await new Harness().load();
    const main = h.gh.branch('main') as string;
    const files = { ...h.gh.commits.get(main)?.files };
    files['.github/workflows/forkflush.yml'] = WORKER_WORKFLOW.replaceAll(
      'octo-org/forkflush@v0.1.0',
      'octo-org/forkflush@v0.0.9',
    );
    h.gh.refs.set('refs/heads/main', h.gh.commit({ message: 'an old worker', parents: [main], files }));
    await h.label(7);
    await h.label(7);
    expect(h.gh.dispatches).toHaveLength(1);
    const said = h.gh.comments.filter((c) => c.issue === 7).map((c) => c.body);
    expect(said).toHaveLength(1);
    expect(said[0]).toContain(
      '**Warning:** `.github/workflows/forkflush.yml` on `main` differs from the worker workflow this forkflush release writes; the run goes on with it:\n\n' +
        '- it uses the forkflush Action at `v0.0.9`, and the app is `v0.1.0`\n\nThe fix: in a clone of this repository',
    );
  });

  it('a repository without the worker workflow gets one comment with the fix, and no run', async () => {
    const h = await new Harness().load();
    // The workflow deleted from main: the rest of the task is there.
    const main = h.gh.branch('main') as string;
    const files = { ...h.gh.commits.get(main)?.files };
    delete files['.github/workflows/forkflush.yml'];
    h.gh.refs.set('refs/heads/main', h.gh.commit({ message: 'no worker', parents: [main], files }));
    await h.label(7);
    expect(h.gh.comments.map((c) => [c.issue, shown(c.body)])).toEqual([
      [
        7,
        'forkflush did not start: There is no `.github/workflows/forkflush.yml` on `main`: it is the workflow whose jobs run the agents. ' +
          'Run `forkflush init --github` in a clone of this repository, commit and push the workflows it writes to `main` ' +
          '(README, "On GitHub"), then label the issue again.',
      ],
    ]);
    expect(h.gh.dispatches).toEqual([]);
    expect([...h.gh.refs.keys()].filter((r) => r.startsWith('refs/forkflush/'))).toEqual([]);
    // The nightly tick finds no run to repair, and says nothing more.
    await nightlyTick(h.api(), new Date(h.clock.getTime() + 24 * 3_600_000));
    expect(h.gh.comments).toHaveLength(1);
  });

  it('the issue text reaches the agent as data in the run record, and no token appears anywhere', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const sha = h.gh.refs.get('refs/forkflush/issue-7/state') as string;
    const files = JSON.parse(h.gh.commits.get(sha)?.files['run.json'] as string);
    expect(files.task).toBe('# Pack it tighter\n\nMake the score go up.');
    const everything = JSON.stringify([h.gh.comments, h.gh.checkRuns, h.gh.pulls, [...h.gh.commits.values()]]);
    expect(everything).not.toContain('ghs_test_token');
  });

  it('two handlers racing on the same events dispatch each round once', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state('issue-7');
    for (const e of state.rounds[0]?.episodes ?? []) h.pushResult(state, e, 10 + e.branch);
    await Promise.all([
      h.jobCompleted('issue-7', 'r0.b0'),
      h.jobCompleted('issue-7', 'r0.b1'),
      h.jobCompleted('issue-7', 'r0.b1'),
    ]);
    // Whatever the interleaving, round 1 is dispatched once (a later trigger may still be needed
    // when every racing handler lost the compare-and-swap).
    await h.comment(7, '/autoresearch status');
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1']);
    expect(h.state('issue-7').rounds[0]?.decision?.winner).toBe('r0.b1');
  });
});

describe('results the app does not trust', () => {
  // A result is a commit the worker made on the episode's base, keeping the run's protected files;
  // anything else was pushed by another hand (a leaked token), whatever score its trailers claim.
  async function forged(api: { parents?: (base: string, h: Harness) => string[]; files?: Record<string, string> }) {
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state('issue-7');
    const [honest, forger] = state.rounds[0]?.episodes ?? [];
    if (!honest || !forger) throw new Error('no opening round');
    h.pushResult(state, honest, 5);
    h.pushResult(state, forger, 1e9, 0, {
      ...(api.parents ? { parents: api.parents(forger.base, h) } : {}),
      ...(api.files ? { files: api.files } : {}),
    });
    await h.jobCompleted('issue-7', honest.id);
    await h.jobCompleted('issue-7', forger.id);
    return { h, after: h.state('issue-7'), forger: forger.id };
  }

  it('a result that changes a protected file gets no score, and the honest branch wins', async () => {
    const { after, forger } = await forged({ files: { 'grade.mjs': 'console.log(1e9)\n' } });
    const e = after.rounds[0]?.episodes.find((x) => x.id === forger);
    expect(e?.result).toMatchObject({ score: null, reason: expect.stringMatching(/changes protected paths/) });
    expect(after.rounds[0]?.decision?.winner).toBe('r0.b0');
    expect(after.best?.score).toBe(5);
  });

  it('a result that adds a workflow, or edits the config, gets no score', async () => {
    const forgeries: Record<string, string>[] = [
      { '.github/workflows/evil.yml': 'on: push\n' },
      { '.github/autoresearch.yml': 'grader: {}\n' },
    ];
    for (const files of forgeries) {
      const { after, forger } = await forged({ files });
      expect(after.rounds[0]?.episodes.find((x) => x.id === forger)?.result?.score).toBeNull();
      expect(after.best?.score).toBe(5);
    }
  });

  it('a result that is not a commit on the episode base gets no score', async () => {
    const { after, forger } = await forged({
      parents: (base, h) => [h.gh.commit({ message: 'an extra commit', parents: [base], files: {} })],
    });
    const e = after.rounds[0]?.episodes.find((x) => x.id === forger);
    expect(e?.result).toMatchObject({ score: null, reason: expect.stringMatching(/is not on the episode's base/) });
    expect(after.best?.score).toBe(5);
  });
});

describe('a run record the app did not write', () => {
  it('is refused: a grader swapped on the state ref runs nowhere, and the person who asked is told', async () => {
    const h = await new Harness().load();
    await h.label(7);
    // Someone with a token (not the app) rewrites the record: the grader now prints a high score.
    const ref = 'refs/forkflush/issue-7/state';
    const head = h.gh.refs.get(ref) as string;
    const files = structuredClone(h.gh.commits.get(head)?.files ?? {});
    const state = JSON.parse(files['state.json'] as string);
    state.config.grader.command = 'echo 1000000';
    files['state.json'] = `${JSON.stringify(state, null, 1)}\n`;
    h.gh.refs.set(ref, h.gh.commit({ message: 'forkflush: round 0', parents: [head], files }));
    const dispatches = h.gh.dispatches.length;

    await h.comment(7, '/autoresearch status');
    expect(h.gh.comments.at(-1)?.body).toMatch(
      /^forkflush did nothing: refs\/forkflush\/issue-7\/state at [0-9a-f]{7}: the run's record was changed outside forkflush \(its seal does not match\)/,
    );
    // A job's event does nothing either, and says nothing on the issue.
    const comments = h.gh.comments.length;
    const opening = h.state('issue-7').rounds[0]?.episodes ?? [];
    for (const e of opening) h.pushResult(h.state('issue-7'), e, 3);
    await h.jobCompleted('issue-7', 'r0.b0');
    expect(h.gh.comments).toHaveLength(comments);
    expect(h.gh.dispatches).toHaveLength(dispatches);
    expect(h.gh.refs.get(ref)).not.toBe(head);
    expect(h.state('issue-7').config.grader.command).toBe('echo 1000000');
    expect(h.state('issue-7').rounds[0]?.decision).toBeUndefined();
  });

  it("is not any record of a repository renamed (or transferred) mid-run: the seal is keyed by the repository's id", async () => {
    // Keyed by `owner/repo`, every record failed the seal after a rename, as "changed outside
    // forkflush": each run was refused, its winner stranded (found by a review).
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state('issue-7');
    for (const e of h.openEpisodes('issue-7')) h.pushResult(state, e, e.branch === 1 ? 50 : 40);
    // GitHub answers under the new name only, and its events name it so.
    (h.gh as unknown as { repo: string }).repo = 'octo-renamed';
    (h.gh as unknown as { routes: unknown[] }).routes.length = 0;
    expect(await nightlyTick(h.api(), h.clock).then(() => null, String)).toBeNull();
    expect(h.state('issue-7').rounds[0]?.decision?.winner).toBe('r0.b1');
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1']);
  });

  it('goes on where its default branch was renamed mid-run (main -> trunk): the next rounds and the result are on trunk', async () => {
    // run.json keeps the branch the run started on; every later dispatch on it was refused ("No
    // ref found for: main"), and the run was stuck for good (found by a review).
    const h = await new Harness().load();
    await h.label(7);
    h.gh.renameDefaultBranch('trunk');
    // Round 0's jobs, dispatched on main before the rename, still report as its own.
    const state = h.state('issue-7');
    for (const e of h.openEpisodes('issue-7')) h.pushResult(state, e, e.branch === 1 ? 50 : 40);
    for (const e of h.openEpisodes('issue-7')) await h.jobCompleted('issue-7', e.id, 'success', 'main');
    expect(h.state('issue-7').rounds[0]?.decision?.winner).toBe('r0.b1');
    expect(h.gh.dispatches.map((d) => d.ref)).toEqual(['main', 'trunk']);
    expect(h.runFiles('issue-7')?.blocked).toBeUndefined();
    // Round 1's run is on trunk: its jobs are the round's; a run on main (someone's new branch) is not.
    const next = h.state('issue-7');
    for (const e of h.openEpisodes('issue-7')) h.pushResult(next, e, 60);
    const [first, ...rest] = h.openEpisodes('issue-7');
    await h.jobCompleted('issue-7', first?.id ?? '', 'failure', 'main');
    expect(h.state('issue-7').rounds[1]?.episodes.find((e) => e.id === first?.id)?.result?.failure).toBeUndefined();
    for (const e of [first, ...rest]) if (e) await h.jobCompleted('issue-7', e.id, 'success', 'trunk');
    expect(h.state('issue-7').rounds[1]?.decision).toBeDefined();
    // To its end: the result's pull request is proposed into trunk.
    for (let round = 2; h.state('issue-7').status === 'running' && round < 12; round++) {
      const s = h.state('issue-7');
      for (const e of h.openEpisodes('issue-7')) h.pushResult(s, e, 60 + round);
      for (const e of h.openEpisodes('issue-7')) await h.jobCompleted('issue-7', e.id, 'success', 'trunk');
    }
    expect(h.state('issue-7').status).toBe('finished');
    expect(h.gh.pulls.find((p) => p.number === h.runFiles('issue-7')?.finalPr)?.base).toBe('trunk');
    expect(h.gh.dispatches.every((d, i) => d.ref === (i === 0 ? 'main' : 'trunk'))).toBe(true);
  });

  it('stops when its issue is deleted: nothing more is dispatched, its checks end, and nothing fails on it', async () => {
    // The issue is the run's only control and voice. GitHub answers 410 for a deleted one: the next
    // round was dispatched all the same (spent on a run no one could stop), then every sync failed
    // writing the status comment, and so did each nightly tick of the repository (found by a review).
    const h = await new Harness().load();
    await h.label(7);
    h.gh.deleteIssue(7);
    await h.send('issues', 'deleted', (p) => {
      p.issue.number = 7;
      p.sender.type = 'User';
    });
    expect(h.runFiles('issue-7')).toMatchObject({ stopped: true, issueGone: expect.any(String) });
    expect(h.gh.checkRuns.filter((c) => c.name !== 'forkflush').map((c) => c.conclusion)).toEqual(
      h.state('issue-7').rounds[0]?.episodes.map(() => 'cancelled'),
    );
    // Its jobs' results land late: the nightly tick passes the run by.
    const state = h.state('issue-7');
    for (const e of h.openEpisodes('issue-7')) h.pushResult(state, e, 50);
    expect(await nightlyTick(h.api(), h.clock).then(() => null, String)).toBeNull();
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0']);
  });

  it('stops when its issue is found deleted, its event lost: before the next round is dispatched', async () => {
    const h = await new Harness().load();
    await h.label(7);
    h.gh.deleteIssue(7);
    const state = h.state('issue-7');
    for (const e of h.openEpisodes('issue-7')) h.pushResult(state, e, e.branch === 1 ? 50 : 40);
    expect(await nightlyTick(h.api(), h.clock).then(() => null, String)).toBeNull();
    expect(h.state('issue-7').rounds[0]?.decision?.winner).toBe('r0.b1');
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0']);
    expect(h.runFiles('issue-7')).toMatchObject({ stopped: true, issueGone: expect.any(String) });
    // Found gone while the round runs (no dispatch due): the same, from the status comment's 410.
    const h2 = await new Harness().load();
    await h2.label(7);
    h2.gh.deleteIssue(7);
    const first = h2.openEpisodes('issue-7')[0];
    if (first) h2.pushResult(h2.state('issue-7'), first, 50);
    expect(await nightlyTick(h2.api(), h2.clock).then(() => null, String)).toBeNull();
    expect(h2.runFiles('issue-7')).toMatchObject({ stopped: true, issueGone: expect.any(String) });
    expect(h2.gh.log.filter((l) => l.endsWith('/actions/workflows/forkflush.yml/runs'))).not.toEqual([]);
    expect(await nightlyTick(h2.api(), h2.clock).then(() => null, String)).toBeNull();
  });

  it("says on the issue that it cannot save the run's record when the app lost contents: write", async () => {
    // Every sync saves the record first: refused with 403, it threw before saying anything, and the
    // issue kept saying the round was running, for good (found by a review).
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state('issue-7');
    for (const e of h.openEpisodes('issue-7')) h.pushResult(state, e, 40);
    h.gh.denied = (method, path) => method === 'POST' && /\/git\/(trees|commits)$/.test(path);
    expect(await nightlyTick(h.api(), h.clock).then(() => null, String)).toMatch(/the nightly tick failed for issue-7/);
    const status = h.gh.comments.find((c) => c.issue === 7)?.body ?? '';
    expect(status).toContain(
      "stuck: forkflush could not save the run's record (`HTTP 403: Resource not accessible by integration",
    );
    expect(h.gh.dispatches).toHaveLength(1);
    // Given back: the run goes on, and the issue says so.
    h.gh.denied = null;
    expect(await nightlyTick(h.api(), h.clock).then(() => null, String)).toBeNull();
    expect(h.gh.dispatches).toHaveLength(2);
    expect(h.gh.comments.find((c) => c.issue === 7)?.body ?? '').not.toContain('stuck');
  });

  /**
   * The owner turns Issues off for a while (a spam wave): GitHub answers 410 Gone ("Issues are
   * disabled for this repo") for every issue endpoint, then turns them on again. The issue, its
   * comments and its label are all still there.
   */
  async function issuesOffForAWhile(h: Harness): Promise<void> {
    await h.label(7);
    const state = h.state('issue-7');
    for (const e of h.openEpisodes('issue-7')) h.pushResult(state, e, e.branch === 1 ? 50 : 40);
    h.gh.inject = (_method, path) => (/\/issues(\/|$)/.test(path) ? 410 : null);
    await nightlyTick(h.api(), h.clock).catch(() => {});
    h.gh.inject = null;
  }

  it('issues turned off and on again: the status comment does not go on saying the round is running', async () => {
    // Stopped for the 410, the run wrote on its issue no more, and once it was back its status
    // said the round was running, for good (found by a review).
    const h = await new Harness().load();
    await issuesOffForAWhile(h);
    expect(h.runFiles('issue-7')?.stopped).toBe(true);
    await h.comment(7, '/autoresearch status');
    expect(statusOf(h)).not.toMatch(/round 0 \(\w+\) running/);
    expect(statusOf(h)).toMatch(/stopped/);
  });

  it('issues turned off and on again, then `/autoresearch resume`: the round it dispatches is not cancelled at once', async () => {
    // The resume kept `issueGone`, and each sync wound down the round it had just dispatched: one
    // resume burnt rounds 1 to 3 on cancelled jobs (found by a review).
    const h = await new Harness().load();
    await issuesOffForAWhile(h);
    await h.comment(7, '/autoresearch resume');
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1']);
    expect(h.state('issue-7').rounds[1]?.episodes.map((e) => e.result)).toEqual([undefined]);
    expect(h.runFiles('issue-7')?.issueGone).toBeUndefined();
    expect(statusOf(h)).toMatch(/round 1 \(solo 1\) running/);
  });

  it("stops its run on the issues.deleted event when a bot deleted it: the round's jobs are cancelled at once", async () => {
    // Events of bots were passed by, deletions too: an app's deletion (a moderation bot) left the
    // round's jobs running to their end (found by a review). forkflush deletes no issue.
    const h = await new Harness().load();
    await h.label(7);
    h.gh.deleteIssue(7);
    await h.send('issues', 'deleted', (p) => {
      p.issue.number = 7;
      p.sender.login = 'moderation-bot[bot]';
      p.sender.type = 'Bot';
    });
    expect(h.runFiles('issue-7')).toMatchObject({ stopped: true, issueGone: expect.any(String) });
    expect(h.gh.checkRuns.filter((c) => c.name !== 'forkflush').map((c) => c.conclusion)).toEqual(
      h.state('issue-7').rounds[0]?.episodes.map(() => 'cancelled'),
    );
  });
  it('stops when its issue is moved to another repository: on the event, and with the event lost', async () => {
    // A moved issue answers 301 to the issue it became: the run went on dispatching rounds here,
    // with no issue to see or stop it (its comments and commands are in the other repository).
    const h = await new Harness().load();
    await h.label(7);
    h.gh.transferIssue(7, { repository: 'acme/elsewhere', number: 3 });
    await h.send('issues', 'transferred', (p) => {
      p.issue.number = 7;
      p.sender.login = 'triage-bot[bot]';
      p.sender.type = 'Bot';
    });
    expect(h.runFiles('issue-7')).toMatchObject({ stopped: true, issueGone: expect.any(String) });
    expect(h.gh.checkRuns.filter((c) => c.name !== 'forkflush').map((c) => c.conclusion)).toEqual(
      h.state('issue-7').rounds[0]?.episodes.map(() => 'cancelled'),
    );
    // The event lost: found at the next dispatch (the moved issue's number), or while the round runs
    // (its status comment answers 404, and the issue is then read: another repository's).
    for (const dispatchDue of [true, false]) {
      const h2 = await new Harness().load();
      await h2.label(7);
      h2.gh.transferIssue(7, { repository: 'acme/elsewhere', number: 7 });
      const state = h2.state('issue-7');
      const episodes = h2.openEpisodes('issue-7').slice(0, dispatchDue ? undefined : 1);
      for (const e of episodes) h2.pushResult(state, e, 50);
      expect(await nightlyTick(h2.api(), h2.clock).then(() => null, String)).toBeNull();
      expect(h2.runFiles('issue-7')).toMatchObject({ stopped: true, issueGone: expect.any(String) });
      expect(h2.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0']);
      expect(await nightlyTick(h2.api(), h2.clock).then(() => null, String)).toBeNull();
    }
  });

  it('takes an issue of its repository renamed since the event for its own, not for one moved away', async () => {
    const h = await new Harness().load();
    await h.label(7);
    // A handler still on the old name: GitHub answers with the issue under the new one.
    const api = h.api();
    (h.gh as unknown as { repo: string }).repo = 'octo-renamed';
    expect(await api.issues.gone(7)).toBe(false);
    h.gh.transferIssue(7, { repository: 'acme/elsewhere', number: 7 });
    expect(await api.issues.gone(7)).toBe(true);
  });

  it('says how to go on when its record cannot be saved, and offers no stop that could not be recorded', async () => {
    // The stuck status offered `/autoresearch stop`, whose save fails on the same 403 (found by a review).
    const h = await new Harness().load();
    await h.label(7);
    h.gh.denied = (method, path) => method === 'POST' && /\/git\/(trees|commits)$/.test(path);
    await h.jobCompleted('issue-7', 'r0.b0', 'failure', 'main').catch(() => {});
    expect(statusOf(h)).toContain("stuck: forkflush could not save the run's record");
    expect(statusOf(h)).toContain('give the app back its permissions (`contents: write`)');
    expect(statusOf(h)).not.toContain('`/autoresearch stop`');
  });

  it('sealed by an earlier release (keyed by the name), is still read, and sealed by the id from then on', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const ref = 'refs/forkflush/issue-7/state';
    const head = h.gh.refs.get(ref) as string;
    const files = structuredClone(h.gh.commits.get(head)?.files ?? {});
    const { seal: _seal, ...record } = JSON.parse(files['run.json'] as string);
    const byName = repositoryKey(h.recordKey, { byName: `${h.gh.owner}/${h.gh.repo}` });
    files['run.json'] = sealedFiles(byName, files['state.json'] as string, record);
    h.gh.refs.set(ref, h.gh.commit({ message: 'an earlier release', parents: [head], files }));
    await h.comment(7, '/autoresearch status');
    expect(h.gh.comments.at(-1)?.body ?? '').not.toMatch(/forkflush did nothing/);
    const state = h.state('issue-7');
    for (const e of h.openEpisodes('issue-7')) h.pushResult(state, e, 3);
    for (const e of h.openEpisodes('issue-7')) await h.jobCompleted('issue-7', e.id);
    expect(h.state('issue-7').rounds[0]?.decision).toBeDefined();
    const resealed = JSON.parse(h.gh.commits.get(h.gh.refs.get(ref) as string)?.files['run.json'] as string).seal;
    expect(resealed).not.toBe(JSON.parse(files['run.json'] as string).seal);
  });
});

describe('comment commands', () => {
  it('stop (or removing the label) stops cleanly; resume dispatches what was cancelled', async () => {
    const h = await new Harness().load();
    await h.label(7);
    await h.send('issues', 'unlabeled', (p) => {
      p.issue.number = 7;
      p.label.name = 'autoresearch';
      p.sender.type = 'User';
    });
    const comment = () => h.gh.comments.find((c) => c.issue === 7)?.body ?? '';
    expect(comment()).toContain('**Status:** stopped');
    expect(h.gh.log).toContain('GET /repos/octo-org/octo-repo/actions/workflows/forkflush.yml/runs');
    expect(h.gh.refs.get('refs/forkflush/issue-7/lineage')).toBeDefined();
    await h.comment(7, '/autoresearch stop');
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe('The run is already stopped.');
    await h.comment(7, '/autoresearch resume');
    expect(comment()).toContain('**Status:** round 0 (opening) running');
    // Stopping cancelled the round's jobs, so resuming dispatches its episodes again.
    expect(h.gh.dispatches.map((d) => d.inputs)).toEqual([
      { run: 'issue-7', round: '0', episodes: '["r0.b0","r0.b1","base"]' },
      { run: 'issue-7', round: '0', episodes: '["r0.b0","r0.b1","base"]' },
    ]);
  });

  it('fork runs one more fork round of the leader now', async () => {
    const h = await new Harness().load();
    await h.label(7);
    let state = h.state('issue-7');
    for (const e of state.rounds[0]?.episodes ?? []) h.pushResult(state, e, 10 + e.branch);
    await h.jobCompleted('issue-7', 'r0.b0');
    await h.jobCompleted('issue-7', 'r0.b1');
    state = h.state('issue-7');
    for (const e of state.rounds[1]?.episodes ?? []) h.pushResult(state, e, 20);
    await h.comment(7, '/autoresearch fork');
    await h.jobCompleted('issue-7', 'r1.b0');
    expect(h.state('issue-7').rounds[2]).toMatchObject({ phase: 'extra fork 1', kind: 'fork', extra: true });
    expect(h.gh.dispatches.map((d) => d.inputs.episodes).at(-1)).toBe('["r2.b0","r2.b1"]');
  });

  it('commands from readers get no answer at all; unknown commands are explained to writers', async () => {
    const h = await new Harness().load();
    await h.comment(7, '/autoresearch stop', 'reader');
    await h.comment(7, '/autoresearch launch', 'reader');
    expect(h.gh.comments).toEqual([]);
    await h.comment(7, '/autoresearch launch');
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe(
      'unknown command `launch`: use `/autoresearch status`, `/autoresearch stop`, `/autoresearch resume`, `/autoresearch fork`, `/autoresearch start`, `/autoresearch map`. ' +
        // The app does not read edits: a user who mends the comment in place must be told.
        'Write the command again in a new comment: an edited comment is not read.',
    );
    await h.comment(7, '/autoresearch status');
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe(
      'There is no forkflush run on this issue. Label it `autoresearch` to start one.',
    );
  });
});
