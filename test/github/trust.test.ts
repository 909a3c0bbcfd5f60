// Events the app can trust (issue 10): each label and command is acted on once, however often it
// is delivered; nobody without write access can make the app say anything; a round's end and a
// failed job count only from the run the app dispatched; the nightly rounds stop with the
// labeller's write access.
import { createHmac } from 'node:crypto';
import { Writable } from 'node:stream';
import nock from 'nock';
import pino from 'pino';
import { Probot } from 'probot';
import { describe, expect, it } from 'vitest';
import { forkflushApp, nightlyTick } from '../../src/app/app.js';
import { shown } from './fake-github.js';
import { CONFIG, Harness, TEST_TOKEN, TestOctokit, WORKER_WORKFLOW } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const API = 'https://api.github.com';
const REPO = '/repos/octo-org/octo-repo';

/**
 * GitHub sends `payload` as delivery `id` (the same id again is a redelivery, or a replay of a
 * captured one): signed with the app's secret, as box.deliver does. Returns the app's status.
 */
async function deliverAs(h: Harness, id: string, event: string, payload: Record<string, any>): Promise<number> {
  const text = JSON.stringify({ ...payload, installation: { id: h.box.auth.installations[0]?.id ?? 1 } });
  const res = await fetch(h.box.webhookUrl as string, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': event,
      'x-github-delivery': id,
      'x-hub-signature-256': `sha256=${createHmac('sha256', h.box.webhookSecret).update(text).digest('hex')}`,
    },
    body: text,
  });
  await res.arrayBuffer();
  const failures = h.box.failures.splice(0);
  if (failures.length > 0) throw new Error(`events of the app's own changes failed:\n${failures.join('\n')}`);
  return res.status;
}

function labelPayload(h: Harness, issue = 7) {
  h.gh.labels.set(issue, new Set(['autoresearch']));
  return h.box.payload('issues', 'labeled', (p) => {
    p.issue.number = issue;
    p.issue.title = 'Pack it tighter';
    p.issue.body = 'Make the score go up.';
    delete p.issue.pull_request;
    p.label.name = 'autoresearch';
    p.sender.login = 'maintainer';
    p.sender.type = 'User';
  });
}

function commentPayload(h: Harness, body: string, id: number, user = 'maintainer') {
  return h.box.payload('issue_comment', 'created', (p) => {
    p.issue.number = 7;
    delete p.issue.pull_request;
    p.comment.id = id;
    p.comment.body = body;
    p.sender.login = user;
    p.sender.type = 'User';
  });
}

/** The maintainer's comment `id`, in a delivery of its own (the same id again: the same comment, delivered again). */
function comment(h: Harness, body: string, id: number) {
  return h.send('issue_comment', 'created', (p) => {
    p.issue.number = 7;
    delete p.issue.pull_request;
    p.comment.id = id;
    p.comment.body = body;
    p.sender.login = 'maintainer';
    p.sender.type = 'User';
  });
}

const unlabel = (h: Harness) =>
  h.send('issues', 'unlabeled', (p) => {
    p.issue.number = 7;
    p.label.name = 'autoresearch';
    p.sender.login = 'maintainer';
    p.sender.type = 'User';
  });

describe('each label and command is acted on once', () => {
  it('a label delivered twice starts one run; replayed after a stop it resumes nothing; a new label resumes', async () => {
    const h = await new Harness().load();
    const label = labelPayload(h);
    expect(await deliverAs(h, 'label-1', 'issues', label)).toBe(200);
    expect(await deliverAs(h, 'label-1', 'issues', label)).toBe(200);
    expect(h.gh.dispatches).toHaveLength(1);
    expect(h.runFiles(RUN)).toMatchObject({ startedBy: 'maintainer', seen: ['delivery:label-1'] });

    await unlabel(h);
    expect(h.runFiles(RUN)?.stopped).toBe(true);
    // The same delivery again (GitHub's "Redeliver", or someone who kept it): the run stays stopped.
    expect(await deliverAs(h, 'label-1', 'issues', label)).toBe(200);
    expect(h.runFiles(RUN)?.stopped).toBe(true);
    expect(h.gh.dispatches).toHaveLength(1);
    // A person adding the label again is a new event: it resumes the run.
    await h.label(7);
    expect(h.runFiles(RUN)?.stopped).toBe(false);
    expect(h.gh.dispatches).toHaveLength(2);
  });

  it('a label on a running run is recorded, so that its replay after a stop resumes nothing', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const again = labelPayload(h);
    expect(await deliverAs(h, 'label-2', 'issues', again)).toBe(200);
    await unlabel(h);
    expect(await deliverAs(h, 'label-2', 'issues', again)).toBe(200);
    expect(h.runFiles(RUN)?.stopped).toBe(true);
  });

  it('/autoresearch fork delivered twice, or the same comment in two deliveries, asks for one fork round', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const fork = commentPayload(h, '/autoresearch fork', 501);
    expect(await deliverAs(h, 'fork-1', 'issue_comment', fork)).toBe(200);
    expect(await deliverAs(h, 'fork-1', 'issue_comment', fork)).toBe(200);
    await comment(h, '/autoresearch fork', 501);
    expect(h.state(RUN).extraForks).toBe(1);
    // Another comment is another request.
    await comment(h, '/autoresearch fork', 502);
    expect(h.state(RUN).extraForks).toBe(2);
    // None of the repeats said anything.
    expect(h.gh.comments.filter((c) => c.issue === 7)).toHaveLength(1);
  });

  it('stop and resume act once per comment: a repeat says nothing, a replayed resume does not undo a later stop', async () => {
    const h = await new Harness().load();
    await h.label(7);
    await comment(h, '/autoresearch stop', 601);
    expect(h.runFiles(RUN)?.stopped).toBe(true);
    const said = h.gh.comments.length;
    await comment(h, '/autoresearch stop', 601);
    expect(h.gh.comments).toHaveLength(said);
    // A new stop comment on a stopped run is answered.
    await comment(h, '/autoresearch stop', 602);
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe('The run is already stopped.');
    // That answer too is given once, whatever delivers the comment again.
    await comment(h, '/autoresearch stop', 602);
    expect(h.gh.comments).toHaveLength(said + 1);

    await comment(h, '/autoresearch resume', 603);
    expect(h.runFiles(RUN)?.stopped).toBe(false);
    await comment(h, '/autoresearch stop', 604);
    expect(h.runFiles(RUN)?.stopped).toBe(true);
    await comment(h, '/autoresearch resume', 603);
    expect(h.runFiles(RUN)?.stopped).toBe(true);
    expect(h.runFiles(RUN)?.seen).toEqual(
      expect.arrayContaining(['comment:601', 'comment:603', 'comment:604', expect.stringMatching(/^delivery:/)]),
    );
  });

  it('a refused start is answered once, whatever delivers it again, and after a restart', async () => {
    const h = await new Harness().load();
    const said = () => h.gh.comments.filter((c) => c.issue === 7).map((c) => shown(c.body));
    // A start with a bad override: the same comment in two deliveries, then again after a restart.
    await comment(h, '/autoresearch start budget=0', 701);
    await comment(h, '/autoresearch start budget=0', 701);
    await h.restart();
    await comment(h, '/autoresearch start budget=0', 701);
    expect(said()).toEqual([expect.stringMatching(/^forkflush did not start: the overrides in /)]);
    // A label from someone without write access: one delivery sent twice, and once more after a restart.
    const byReader = labelPayload(h);
    byReader.sender.login = 'reader';
    expect(await deliverAs(h, 'label-9', 'issues', byReader)).toBe(200);
    expect(await deliverAs(h, 'label-9', 'issues', byReader)).toBe(200);
    await h.restart();
    expect(await deliverAs(h, 'label-9', 'issues', byReader)).toBe(200);
    // An unknown command, twice.
    await comment(h, '/autoresearch launch', 702);
    await comment(h, '/autoresearch launch', 702);
    expect(said()).toEqual([
      expect.stringMatching(/^forkflush did not start: the overrides in /),
      '@reader: only people with write access to this repository can start a run (yours: read).',
      expect.stringMatching(/^unknown command `launch`/),
    ]);
    // A new event is answered anew: another comment, another delivery of the label.
    await comment(h, '/autoresearch start budget=0', 703);
    expect(await deliverAs(h, 'label-10', 'issues', byReader)).toBe(200);
    expect(said()).toHaveLength(5);
    expect(h.runFiles(RUN)).toBeNull();
    expect(h.gh.dispatches).toEqual([]);
  });

  it('a start refused for a missing worker workflow is answered once, whatever delivers the label again', async () => {
    const h = await new Harness().load();
    const main = h.gh.branch('main') as string;
    const files = { ...h.gh.commits.get(main)?.files };
    delete files['.github/workflows/forkflush.yml'];
    h.gh.refs.set('refs/heads/main', h.gh.commit({ message: 'no worker', parents: [main], files }));
    const label = labelPayload(h);
    expect(await deliverAs(h, 'label-11', 'issues', label)).toBe(200);
    await h.restart();
    expect(await deliverAs(h, 'label-11', 'issues', label)).toBe(200);
    expect(h.gh.comments.map((c) => shown(c.body))).toEqual([
      expect.stringMatching(/^forkflush did not start: There is no `\.github\/workflows\/forkflush\.yml` on `main`/),
    ]);
  });

  it('an outdated worker workflow whose jobs could not work gets one comment with the fix, and no run, whatever delivers the label again', async () => {
    const h = await new Harness().load();
    const main = h.gh.branch('main') as string;
    const files = { ...h.gh.commits.get(main)?.files };
    files['.github/workflows/forkflush.yml'] = WORKER_WORKFLOW.replace('contents: write', 'contents: read').replaceAll(
      'octo-org/forkflush@v0.1.0',
      'octo-org/forkflush@v0.0.9',
    );
    h.gh.refs.set('refs/heads/main', h.gh.commit({ message: 'an old worker', parents: [main], files }));
    const label = labelPayload(h);
    expect(await deliverAs(h, 'label-12', 'issues', label)).toBe(200);
    expect(await deliverAs(h, 'label-12', 'issues', label)).toBe(200);
    await h.restart();
    expect(await deliverAs(h, 'label-12', 'issues', label)).toBe(200);
    expect(h.gh.comments.map((c) => shown(c.body))).toEqual([
      'forkflush did not start: `.github/workflows/forkflush.yml` on `main` is not the worker workflow this forkflush release writes, and its jobs could not work, so no run started:\n\n' +
        "- the job `episode` has no `contents: write` permission, so it could not push its episode's result\n\n" +
        'It also differs in what a run works with:\n\n- it uses the forkflush Action at `v0.0.9`, and the app is `v0.1.0`\n\n' +
        'The fix: in a clone of this repository, delete `.github/workflows/forkflush.yml`, run `forkflush init --github` (it writes only the files that are missing) ' +
        'and push the workflow it writes to `main` (README, "On GitHub"). Then label the issue again.',
    ]);
    expect(h.runFiles('issue-7')).toBeNull();
    expect(h.gh.dispatches).toEqual([]);
  });

  it('a doubled job delivery is handled once, and recorded with what it changed', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state(RUN);
    const [first] = state.rounds[0]?.episodes ?? [];
    if (!first) throw new Error('no episode');
    h.pushResult(state, first, 12);
    const job = h.box.payload('workflow_job', 'completed', (p) => {
      p.workflow_job.name = `forkflush ${RUN} ${first.id}`;
      p.workflow_job.conclusion = 'success';
    });
    expect(await deliverAs(h, 'job-1', 'workflow_job', job)).toBe(200);
    const requests = h.gh.log.length;
    expect(await deliverAs(h, 'job-1', 'workflow_job', job)).toBe(200);
    // The record read (ref, state.json, run.json), and nothing else.
    expect(h.gh.log.slice(requests)).toHaveLength(3);
    expect(h.runFiles(RUN)?.seenDeliveries).toEqual(['delivery:job-1']);
    expect(h.state(RUN).rounds[0]?.episodes[0]?.result?.score).toBe(12);
  });
});

describe('silence towards people without write access', () => {
  it("a reader's command, known or not, costs one permission check and gets no answer", async () => {
    const h = new Harness();
    await h.probot.load(forkflushApp({ now: () => h.clock }));
    // Every interceptor must be used, and there is none that posts a comment.
    nock(API)
      .get(`${REPO}/collaborators/reader/permission`)
      .times(3)
      .reply(200, { permission: 'read', role_name: 'read' });
    for (const body of ['/autoresearch launch', '/autoresearch stop', '/autoresearch'])
      await h.comment(7, body, 'reader');
    expect(nock.pendingMocks()).toEqual([]);
  });

  it('and the log says why, with the delivery and the run', async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    });
    const h = new Harness();
    const probot = new Probot({ githubToken: TEST_TOKEN, log: pino({ level: 'info' }, stream), Octokit: TestOctokit });
    await probot.load(forkflushApp({ now: () => h.clock }));
    nock(API).get(`${REPO}/collaborators/reader/permission`).reply(200, { permission: 'read', role_name: 'read' });
    await probot.receive({
      id: 'delivery-77',
      name: 'issue_comment',
      payload: commentPayload(h, '/autoresearch fork', 901, 'reader') as never,
    });
    expect(lines).toContainEqual(
      expect.objectContaining({
        delivery: 'delivery-77',
        run: RUN,
        msg: 'ignored a command from reader, who has no write access (read)',
      }),
    );
  });
});

describe("a round's end and a failed job count only from the run the app dispatched", () => {
  it('records the id of the run its dispatch started (return_run_details)', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const [run] = h.box.actions.runs;
    expect(run?.id).toEqual(expect.any(Number));
    expect(h.runFiles(RUN)?.dispatched['0'].runId).toBe(run?.id);
  });

  it('a workflow run other than the one the dispatch started is ignored; that one ends the round', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const dispatched = h.box.actions.runs[0]?.id as number;
    // The record names the run its dispatch started (GitHub's return_run_details).
    h.rewriteRecord(RUN, (files) => {
      files.dispatched['0'].runId = dispatched + 1000;
    });
    await h.runCompleted(RUN, 0);
    expect(h.state(RUN).rounds[0]?.episodes.map((e) => e.result)).toEqual([undefined, undefined]);
    h.rewriteRecord(RUN, (files) => {
      files.dispatched['0'].runId = dispatched;
    });
    await h.runCompleted(RUN, 0);
    expect(h.state(RUN).rounds[0]?.episodes.map((e) => e.result?.reason)).toEqual([
      "its round's workflow run ended without a result for it",
      "its round's workflow run ended without a result for it",
    ]);
  });

  it('a workflow run of another file, on another event, or from a fork is ignored', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const forged: ((w: any) => void)[] = [
      (w) => {
        w.path = '.github/workflows/evil.yml';
      },
      (w) => {
        w.event = 'push';
      },
      (w) => {
        w.head_repository.full_name = 'mallory/octo-repo';
      },
      (w) => {
        w.head_branch = 'elsewhere';
      },
    ];
    for (const api of forged) {
      await h.send('workflow_run', 'completed', (p) => {
        p.workflow_run.display_title = `forkflush ${RUN} round 0`;
        api(p.workflow_run);
      });
    }
    expect(h.state(RUN).rounds[0]?.episodes.map((e) => e.result)).toEqual([undefined, undefined]);
  });

  it("a failed job counts only from the round's own run", async () => {
    const h = await new Harness().load();
    await h.label(7);
    const failed = (runId?: number) =>
      h.send('workflow_job', 'completed', (p) => {
        p.workflow_job.name = `forkflush ${RUN} r0.b0`;
        p.workflow_job.conclusion = 'failure';
        if (runId !== undefined) p.workflow_job.run_id = runId;
      });
    const dispatched = h.box.actions.runs[0]?.id as number;
    // No run recorded: the job's run must be one of the worker's dispatched runs here.
    await failed(77);
    expect(h.state(RUN).rounds[0]?.episodes[0]?.result).toBeUndefined();
    // A run recorded: only its jobs count.
    h.rewriteRecord(RUN, (files) => {
      files.dispatched['0'].runId = dispatched + 1000;
    });
    await failed();
    expect(h.state(RUN).rounds[0]?.episodes[0]?.result).toBeUndefined();
    h.rewriteRecord(RUN, (files) => {
      files.dispatched['0'].runId = dispatched;
    });
    await failed();
    expect(h.state(RUN).rounds[0]?.episodes[0]?.result?.reason).toMatch(/^its job ended: failure/);
  });

  it("after a stop and a resume, the cancelled run's late events fail none of the new run's episodes", async () => {
    const h = await new Harness().load();
    await h.label(7);
    await h.comment(7, '/autoresearch stop');
    await h.comment(7, '/autoresearch resume');
    const [cancelled, current] = h.box.actions.runs;
    expect(cancelled?.conclusion).toBe('cancelled');
    expect(current?.displayTitle).toBe(cancelled?.displayTitle);
    // The cancelled run's completion and its jobs' ends, delivered late (after the resume).
    await h.send('workflow_run', 'completed', (p) => {
      p.workflow_run.display_title = `forkflush ${RUN} round 0`;
      p.workflow_run.id = cancelled?.id;
      p.workflow_run.conclusion = 'cancelled';
    });
    for (const episode of ['r0.b0', 'r0.b1']) {
      await h.send('workflow_job', 'completed', (p) => {
        p.workflow_job.name = `forkflush ${RUN} ${episode}`;
        p.workflow_job.run_id = cancelled?.id;
        p.workflow_job.conclusion = 'cancelled';
      });
    }
    expect(h.state(RUN).rounds[0]?.episodes.map((e) => e.result)).toEqual([undefined, undefined]);
    // The current run's completion does count: its episodes end without a result (and a round
    // whose every job gave none stops the run rather than spend more: overnight.test.ts).
    await h.runCompleted(RUN, 0);
    expect(h.state(RUN).rounds[0]?.episodes.map((e) => e.result?.reason)).toEqual([
      "its round's workflow run ended without a result for it",
      "its round's workflow run ended without a result for it",
    ]);
  });

  it('"Re-run all jobs" on the round\'s run a stop cancelled runs no agent while the run is stopped', {
    timeout: 120_000,
  }, async () => {
    const h = await new Harness().load();
    await h.label(7);
    const runId = h.runFiles(RUN)?.dispatched['0']?.runId;
    const workflowRun = h.box.actions.runs.find((r) => r.id === runId);
    if (!workflowRun) throw new Error("expected the opening round's workflow run");
    // A maintainer stops the run (the budget, a wrong task): its round's run is cancelled.
    await h.comment(7, '/autoresearch stop');
    expect(workflowRun).toMatchObject({ status: 'completed', conclusion: 'cancelled' });
    // A teammate sees a red, cancelled run in the Actions tab and clicks "Re-run all jobs": GitHub
    // runs the same workflow run (its id kept) again, every job queued anew.
    Object.assign(workflowRun, { status: 'queued', conclusion: null });
    for (const job of workflowRun.jobs) Object.assign(job, { status: 'queued', conclusion: null, log: '' });
    const jobs = await h.box.runQueued();
    expect(h.runFiles(RUN)?.stopped).toBe(true);
    // No episode ran: each episode's ref is still at its base, and each job says why it ran nothing.
    const state = h.state(RUN);
    const refs = h.refs(RUN);
    for (const e of state.rounds[0]?.episodes ?? [])
      expect(h.gh.refs.get(refs.episode(e.round, e.branch))).toBe(e.base);
    for (const job of jobs.filter((j) => !j.name.endsWith(' base'))) expect(job.log).toMatch(/stopped/);
  });

  it("a failed job of the round's dispatched run counts (recorded or not)", async () => {
    const h = await new Harness().load();
    await h.label(7);
    await h.jobCompleted(RUN, 'r0.b1', 'failure');
    expect(h.state(RUN).rounds[0]?.episodes[1]?.result?.reason).toMatch(/^its job ended: failure/);
  });
});

describe('the nightly rounds and the labeller', () => {
  /** Plays every dispatched round: each job pushes a score, then reports completed. */
  async function playToEnd(h: Harness) {
    for (let guard = 0; guard < 50 && h.state(RUN).status !== 'finished'; guard++) {
      const state = h.state(RUN);
      const open = state.rounds.find((r) => !r.decision);
      if (!open) throw new Error('no open round and not finished');
      for (const e of open.episodes) if (!e.result) h.pushResult(state, e, 1);
      for (const e of open.episodes) await h.jobCompleted(RUN, e.id);
    }
  }

  it('skips the round, saying so once, while the person who started the run lacks write access', async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 5 }\n`,
      'grade.mjs': 'x',
    }).load();
    await h.label(7);
    await playToEnd(h);
    const rounds = h.state(RUN).rounds.length;
    h.gh.permissions.maintainer = 'read';
    const before = h.gh.comments.length;
    await nightlyTick(h.api(), h.clock);
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    expect(h.state(RUN).rounds).toHaveLength(rounds);
    expect(h.gh.comments.slice(before).map((c) => c.body)).toEqual([
      'forkflush ran no nightly round: the nightly rounds run for `maintainer`, who started this run (or last resumed it, or asked for a fork), ' +
        'and they no longer have write access to the repository (read). ' +
        'Someone with write access can take them on: `/autoresearch fork` runs one round now, and the nightly rounds go on for them.',
    ]);
    // With write access again, the next night's round runs.
    h.gh.permissions.maintainer = 'maintain';
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    expect(h.state(RUN).rounds).toHaveLength(rounds + 1);
    expect(h.runFiles(RUN)?.nightlySkipped).toBeUndefined();
  });

  it('a writer who forks takes the nightly rounds on', async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 5 }\n`,
      'grade.mjs': 'x',
    }).load();
    h.gh.permissions.other = 'write';
    await h.label(7);
    await playToEnd(h);
    h.gh.permissions.maintainer = 'none';
    await h.comment(7, '/autoresearch fork', 'other');
    expect(h.runFiles(RUN)?.startedBy).toBe('other');
    await playToEnd(h);
    const rounds = h.state(RUN).rounds.length;
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    expect(h.state(RUN).rounds).toHaveLength(rounds + 1);
  });
});
