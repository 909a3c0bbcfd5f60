// The app outside a webhook server: in Actions mode (runInActions reads the job's event from the
// environment and a payload file, as the runner gives them) and the hosted mode's nightly tick of
// every installation. GitHub is the box (fake GitHub over HTTP); the harness plays the worker jobs.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Probot } from 'probot';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type ActionsModeOptions, runInActions } from '../../src/app/actions-mode.js';
import { forkflushApp } from '../../src/app/app.js';
import { nightlyHour, startNightly, tickInstallations } from '../../src/app/server.js';
import { CONFIG, Harness, testOctokit } from './harness.js';
import { useGitHubInABox } from './use-box.js';

const RUN = 'issue-7';

let dir: string;
useGitHubInABox();
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'forkflush-actions-'));
});
afterEach(async () => {
  vi.useRealTimers();
  await rm(dir, { recursive: true, force: true });
});

/** Workflow runs of the app's workflow so far, per harness: each event starts one (GITHUB_RUN_ID 4242, 4243, ...). */
const appRuns = new WeakMap<Harness, number>();

/** Runs the app as one step of a job: the runner's environment, the event's payload in a file. */
async function step(h: Harness, event: string, body: unknown, env: NodeJS.ProcessEnv = {}, options = {}) {
  const runId = appRuns.get(h) ?? 4242;
  appRuns.set(h, runId + 1);
  // A file of its own: two jobs may run at once (the tick's races below).
  const path = join(dir, `event-${runId}.json`);
  await writeFile(path, JSON.stringify(body));
  const info: string[] = [];
  const errors: string[] = [];
  const code = await runInActions(
    {
      GITHUB_EVENT_NAME: event,
      GITHUB_EVENT_PATH: path,
      GITHUB_RUN_ID: String(runId),
      GITHUB_REPOSITORY: `${h.gh.owner}/${h.gh.repo}`,
      GITHUB_API_URL: h.box.apiUrl,
      GITHUB_TOKEN: 'ghs_job_token',
      ...env,
    },
    {
      Octokit: testOctokit(),
      logLevel: 'fatal',
      now: () => h.clock,
      out: { info: (l) => info.push(l), error: (l) => errors.push(l) },
      ...options,
    } satisfies ActionsModeOptions,
  );
  return { code, info, errors };
}

function labeled(h: Harness, issue = 7) {
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

/** The worker jobs' part: every episode of the open round pushes a result. */
function finishRound(h: Harness) {
  const state = h.state(RUN);
  for (const e of h.openEpisodes(RUN)) if (!e.result) h.pushResult(state, e, e.branch === 1 ? 50 : 40);
}

const SCHEDULE = { schedule: '17 * * * *' };

/** Ticks (the worker jobs' part played before each) until the run has finished. */
async function tickToEnd(h: Harness) {
  for (let guard = 0; guard < 20 && h.state(RUN).status !== 'finished'; guard++) {
    finishRound(h);
    await step(h, 'schedule', SCHEDULE);
  }
}

/** A maintainer's `/autoresearch map` on the issue, as comment `id`. */
function mapAsked(h: Harness, id: number) {
  return h.box.payload('issue_comment', 'created', (p) => {
    p.issue.number = 7;
    delete p.issue.pull_request;
    p.comment.id = id;
    p.comment.body = '/autoresearch map';
    p.sender.login = 'maintainer';
    p.sender.type = 'User';
  });
}
const TICK = 'autoresearch-tick.yml';
/** A repository with the tick's workflow. */
const TICKING = {
  '.github/autoresearch.yml': CONFIG,
  'grade.mjs': 'x',
  [`.github/workflows/${TICK}`]: 'on: schedule\n',
};

/** GitHub (the box) without the app's server: here the app runs as a step. */
async function github(files?: Record<string, string>): Promise<Harness> {
  const h = await new Harness(files).startGitHub();
  h.box.auth.allow('ghs_job_token');
  h.box.auth.allow('ghs_app_token');
  return h;
}

describe('Actions mode: the app as a workflow step', () => {
  it('a labelled issue starts a run: the first round is dispatched', async () => {
    const h = await github();
    const out = await step(h, 'issues', labeled(h));
    expect(out).toEqual({ code: 0, info: ['forkflush: handled issues.labeled (run 4242)'], errors: [] });
    expect(h.gh.dispatches).toEqual([
      {
        workflow: 'forkflush.yml',
        ref: 'main',
        inputs: { run: RUN, round: '0', episodes: '["r0.b0","r0.b1","base"]' },
      },
    ]);
  });

  it('the schedule is the nightly tick: it reads a round whose completion no event reported', async () => {
    // With GITHUB_TOKEN alone, a round the app dispatched starts no workflow_run when it ends.
    const h = await github();
    await step(h, 'issues', labeled(h));
    finishRound(h);
    const out = await step(h, 'schedule', { schedule: '17 * * * *' });
    expect(out).toEqual({ code: 0, info: ['forkflush: nightly tick: synced issue-7'], errors: [] });
    expect(h.state(RUN).rounds[0]?.decision?.winner).toBe('r0.b1');
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1']);
  });

  it('the tick runs only while a run needs it: a run turns its workflow on, the tick turns it off', async () => {
    const h = await github({
      '.github/autoresearch.yml': CONFIG,
      'grade.mjs': 'x',
      '.github/workflows/autoresearch-tick.yml': 'on: schedule\n',
    });
    await step(h, 'issues', labeled(h));
    expect(h.gh.workflowToggles).toEqual(['enable autoresearch-tick.yml']);
    // While the run goes on, each tick leaves it on.
    finishRound(h);
    await step(h, 'schedule', { schedule: '17 * * * *' });
    expect(h.gh.workflowToggles).toHaveLength(1);
    for (let guard = 0; guard < 20 && h.state(RUN).status !== 'finished'; guard++) {
      finishRound(h);
      await step(h, 'schedule', { schedule: '17 * * * *' });
    }
    // Finished, and no nightly rounds: the tick that finds no run to need it turns itself off.
    expect(h.state(RUN).status).toBe('finished');
    expect(h.gh.workflowToggles.at(-1)).toBe('disable autoresearch-tick.yml');
    expect(h.gh.workflowStates.get('autoresearch-tick.yml')).toBe('disabled_manually');
    // A fork round asked for wakes it again.
    const fork = h.box.payload('issue_comment', 'created', (p) => {
      p.issue.number = 7;
      delete p.issue.pull_request;
      p.comment.body = '/autoresearch fork';
      p.sender.login = 'maintainer';
      p.sender.type = 'User';
    });
    await step(h, 'issue_comment', fork);
    expect(h.gh.workflowStates.get('autoresearch-tick.yml')).toBe('active');
    expect(h.state(RUN).rounds.at(-1)?.extra).toBe(true);
  });

  it('a manual run of the workflow ticks too, and says so when there is no run', async () => {
    const h = await github();
    const out = await step(h, 'workflow_dispatch', { inputs: {} });
    expect(out).toEqual({ code: 0, info: ['forkflush: nightly tick: no run to sync'], errors: [] });
  });

  it("a completed round's workflow_run reads its results and dispatches the next round", async () => {
    const h = await github();
    await step(h, 'issues', labeled(h));
    finishRound(h);
    const body = h.box.payload('workflow_run', 'completed', (p) => {
      p.workflow_run.display_title = `forkflush ${RUN} round 0`;
    });
    const out = await step(h, 'workflow_run', body);
    expect(out.code).toBe(0);
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1']);
  });

  it('acts with FORKFLUSH_APP_TOKEN when the job minted one, not with GITHUB_TOKEN', async () => {
    const h = await github();
    const auth = new Set<string | null>();
    await step(
      h,
      'issues',
      labeled(h),
      { FORKFLUSH_APP_TOKEN: 'ghs_app_token' },
      {
        Octokit: testOctokit((headers) => auth.add(headers.get('authorization'))),
      },
    );
    expect(h.gh.dispatches).toHaveLength(1);
    expect([...auth]).toEqual(['token ghs_app_token']);
  });

  it('without a token: one line that says what to set, exit code 1, no request', async () => {
    const h = await github();
    const out = await step(h, 'issues', labeled(h), { GITHUB_TOKEN: '', FORKFLUSH_APP_TOKEN: '  ' });
    expect(out).toEqual({
      code: 1,
      info: [],
      errors: [
        "forkflush: no token: set the step's env GITHUB_TOKEN to github.token, or FORKFLUSH_APP_TOKEN to a GitHub App installation token",
      ],
    });
    expect(h.gh.log).toEqual([]);
  });

  it('without the event file: one line naming it', async () => {
    const h = await github();
    const out = await step(h, 'issues', labeled(h), { GITHUB_EVENT_PATH: join(dir, 'missing.json') });
    expect(out.code).toBe(1);
    expect(out.errors).toEqual([`forkflush: cannot read the event payload ${join(dir, 'missing.json')}: ENOENT`]);
  });

  it('an event the app does not handle: nothing to do, exit code 0', async () => {
    const h = await github();
    const out = await step(h, 'push', { ref: 'refs/heads/main' }, { GITHUB_TOKEN: '' });
    expect(out).toEqual({ code: 0, info: ['forkflush: nothing to do on a push event'], errors: [] });
    expect(h.gh.log).toEqual([]);
  });

  it('a handler that fails through the retries: one line with the reason, exit code 1', async () => {
    const h = await github();
    // An outage longer than the retry plugin's three retries.
    h.gh.inject = (method, path) => (method === 'GET' && /\/collaborators\//.test(path) ? 502 : null);
    const out = await step(h, 'issues', labeled(h));
    expect(h.gh.injected).toHaveLength(4);
    expect(out.code).toBe(1);
    expect(out.errors).toHaveLength(1);
    expect(out.errors[0]).toMatch(/^forkflush: the issues event failed: injected failure/);
    expect(h.gh.dispatches).toEqual([]);
  });
});

describe('Actions mode left alone overnight, with GITHUB_TOKEN alone: the tick rests only when no run needs it', () => {
  // No workflow_run says a round the app dispatched ended: the hourly tick moves runs on (github/nightly.ts).
  it('a run labelled while the tick is between listing runs and turning itself off keeps the tick on', async () => {
    // A label job that starts a run (and wakes the tick, amend.ts wakeTick) while the tick decides
    // nothing needs it was undone by the tick's rest: the run then waited for ever, nothing said
    // (found by a review).
    const h = await github(TICKING);
    let raced = false;
    const Racing = testOctokit().plugin((octokit) => {
      octokit.hook.before('request', async (options) => {
        if (!raced && options.method === 'PUT' && String(options.url).endsWith('/disable')) {
          raced = true;
          // The label's job of autoresearch.yml runs to its end in the meantime.
          const label = await step(h, 'issues', labeled(h));
          expect(label.code).toBe(0);
        }
      });
    });
    const tick = await step(h, 'schedule', SCHEDULE, {}, { Octokit: Racing });
    expect(tick.code).toBe(0);
    expect(raced).toBe(true);
    expect(h.state(RUN).status).toBe('running');
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0']);
    // The run needs the tick (GITHUB_TOKEN: no workflow_run will say the round ended).
    expect(h.gh.workflowStates.get(TICK)).toBe('active');
  });

  it('a tick that finds the final work freshly claimed by a job that died keeps itself on', async () => {
    // A job that claimed the finished run's last work (result branch, draft pull request, label)
    // and died leaves a claim that is fresh for STALE_CLAIM_MINUTES: a tick within them skipped the
    // work, found the run finished and rested, and nothing ever took the work over (found by a review).
    const h = await github(TICKING);
    let hung = () => {};
    const died = new Promise<void>((resolve) => {
      hung = resolve;
    });
    // The job that finishes the run dies while it opens the result pull request.
    const Dying = testOctokit().plugin((octokit) => {
      octokit.hook.before('request', async (options) => {
        if (options.method === 'POST' && String(options.url).endsWith('/pulls')) {
          hung();
          await new Promise(() => {});
        }
      });
    });
    await step(h, 'issues', labeled(h));
    let dead = false;
    void died.then(() => {
      dead = true;
    });
    for (let guard = 0; guard < 20 && !dead; guard++) {
      finishRound(h);
      await Promise.race([step(h, 'schedule', SCHEDULE, {}, { Octokit: Dying }), died]);
      h.clock = new Date(h.clock.getTime() + 3_600_000);
    }
    expect(dead).toBe(true);
    expect(h.state(RUN).status).toBe('finished');
    expect(h.runFiles(RUN)?.claims).toHaveProperty('final');
    // A tick (by hand, or the next one) a few minutes after the job died.
    h.clock = new Date(h.clock.getTime() - 3_600_000 + 5 * 60_000);
    await step(h, 'workflow_dispatch', { inputs: {} });
    // The claim is not stale yet, so that tick could not publish: a later one must.
    expect(h.gh.workflowStates.get(TICK)).toBe('active');
  });

  it("an idea map asked of a finished run is shown on the issue when its job's workflow run completes", async () => {
    // Its end was heard only from workflow_run.completed, which GITHUB_TOKEN's dispatch never
    // fires: the map was paid for and never shown, and the tick rested (found by a review).
    const h = await github(TICKING);
    await step(h, 'issues', labeled(h));
    await tickToEnd(h);
    expect(h.gh.workflowStates.get(TICK)).toBe('disabled_manually');
    expect((await step(h, 'issue_comment', mapAsked(h, 901))).code).toBe(0);
    const job = h.gh.actions?.runs.find((r) => r.inputs.round === 'map');
    expect(job).toBeDefined();
    // The ask wakes the tick, and a tick before the job ends keeps it awake.
    expect(h.gh.workflowStates.get(TICK)).toBe('active');
    await step(h, 'schedule', SCHEDULE);
    expect(h.gh.workflowStates.get(TICK)).toBe('active');
    const maps = () => h.gh.comments.filter((c) => c.issue === 7 && c.body.startsWith('## Idea map'));
    expect(maps()).toHaveLength(0);

    // The job pushes its map, and its workflow run completes, unheard.
    const sha = h.pushMap(RUN);
    Object.assign(job ?? {}, { status: 'completed', conclusion: 'success' });
    await step(h, 'schedule', SCHEDULE);
    expect(maps()).toHaveLength(1);
    expect(maps()[0]?.body).toContain(`/blob/${sha}/map.svg?raw=true`);
    expect(h.runFiles(RUN)?.map).toMatchObject({ ended: job?.id, drawn: { commit: sha } });
    // Shown once; with nothing left to wait for, the tick rests.
    await step(h, 'schedule', SCHEDULE);
    expect(maps()).toHaveLength(1);
    expect(h.gh.workflowStates.get(TICK)).toBe('disabled_manually');
  });

  it('a map job that failed, or whose workflow run GitHub lost, is said once, and the tick rests', async () => {
    const h = await github(TICKING);
    await step(h, 'issues', labeled(h));
    await tickToEnd(h);
    const failures = () =>
      h.gh.comments.filter((c) => c.issue === 7 && c.body.startsWith('forkflush drew no idea map'));
    await step(h, 'issue_comment', mapAsked(h, 901));
    const failed = h.gh.actions?.runs.find((r) => r.inputs.round === 'map');
    Object.assign(failed ?? {}, { status: 'completed', conclusion: 'failure' });
    await step(h, 'schedule', SCHEDULE);
    expect(failures()).toHaveLength(1);
    expect(failures()[0]?.body).toContain('its job ended: failure');
    expect(h.gh.workflowStates.get(TICK)).toBe('disabled_manually');

    // Asked again; the run its dispatch started is deleted before it ends.
    await step(h, 'issue_comment', mapAsked(h, 902));
    const runs = h.gh.actions?.runs ?? [];
    runs.splice(
      runs.findIndex((r) => r.inputs.round === 'map' && r.status !== 'completed'),
      1,
    );
    await step(h, 'schedule', SCHEDULE);
    expect(failures()).toHaveLength(1);
    expect(h.gh.workflowStates.get(TICK)).toBe('active');
    // A day on, the tick says so once and stops looking.
    h.clock = new Date(h.clock.getTime() + 25 * 3_600_000);
    await step(h, 'schedule', SCHEDULE);
    await step(h, 'schedule', SCHEDULE);
    expect(failures()).toHaveLength(2);
    expect(failures()[1]?.body).toMatch(
      /GitHub has no workflow run of its job \(run \d+ is gone\), a day after its dispatch/,
    );
    expect(h.gh.workflowStates.get(TICK)).toBe('disabled_manually');
  });
});

describe('hosted mode: the nightly tick of every installation', () => {
  /** The hosted app's Probot: it authenticates as the box's app, for each installation's token. */
  const hostedProbot = (h: Harness) =>
    new Probot({
      appId: h.box.auth.appId,
      privateKey: h.box.auth.privateKey,
      baseUrl: h.box.apiUrl,
      logLevel: 'fatal',
      Octokit: testOctokit(),
    });

  it('ticks each repository of each active installation', async () => {
    const h = await github();
    await step(h, 'issues', labeled(h));
    finishRound(h);
    // A second installation, suspended: the tick must not ask for its token.
    h.box.auth.installations.push({ id: 77, account: 'other-org', suspended: true });
    const probot = hostedProbot(h);
    // The run was started in Actions mode with a job token only: its records are not sealed.
    await tickInstallations(probot, h.clock, null);
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1']);
    expect(h.gh.log.filter((l) => l.startsWith('POST /app/'))).toEqual([
      `POST /app/installations/${h.box.auth.installations[0]?.id}/access_tokens`,
    ]);
  });

  it("an installation restored (installation.unsuspend) repairs its runs at once; tonight's round waits for the tick", async () => {
    const h = await github({
      '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 5 }\n`,
    });
    await step(h, 'issues', labeled(h));
    // The installation was suspended while round 0's jobs ended: GitHub sent the app no event of it.
    finishRound(h);
    const probot = hostedProbot(h);
    await probot.load(forkflushApp({ now: () => h.clock, recordKey: null }));
    const unsuspend = () =>
      probot.receive({
        id: `unsuspend-${h.gh.dispatches.length}`,
        name: 'installation',
        payload: h.box.payload('installation', 'unsuspend', () => {}) as never,
      });
    await unsuspend();
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1']);
    await tickToEnd(h);
    const rounds = h.gh.dispatches.length;
    // Finished, with nightly rounds to come: a restore by day starts none.
    await unsuspend();
    expect(h.gh.dispatches).toHaveLength(rounds);
    await tickInstallations(probot, h.clock, null);
    expect(h.gh.dispatches).toHaveLength(rounds + 1);
  });

  /** The hosted timer's ticks over `hours` hours from `from`; the first `failing` ticks fail as a whole (a 502). */
  async function nightlyTicks(from: string, hour: number, hours: number, failing = 0): Promise<string[]> {
    vi.useFakeTimers();
    let clock = new Date(from);
    const ticks: string[] = [];
    const app = {
      auth: async () => {
        if (failing-- > 0) throw new Error('GitHub answered 502');
        ticks.push(clock.toISOString().slice(0, 16));
        return { paginate: async () => [], rest: { apps: {} } };
      },
      log: { error: () => {}, info: () => {} },
    } as unknown as Probot;
    const timer = startNightly(app, hour, null, () => clock);
    await vi.advanceTimersByTimeAsync(0);
    for (let i = 0; i < hours; i++) {
      clock = new Date(clock.getTime() + 3_600_000);
      await vi.advanceTimersByTimeAsync(3_600_000);
    }
    clearInterval(timer);
    return ticks;
  }

  it('ticks at start, then once a day at the first hourly check at or after the hour', async () => {
    // At start it cannot know whether the process before it ticked since the last 03:00.
    expect(await nightlyTicks('2026-11-30T00:30:00Z', 3, 48)).toEqual([
      '2026-11-30T00:30',
      '2026-11-30T03:30',
      '2026-12-01T03:30',
    ]);
  });

  it('restarted late in a day whose tick it missed (down from 02:00 to 23:20), it ticks at once', async () => {
    expect(await nightlyTicks('2026-11-30T23:20:00Z', 3, 6)).toEqual(['2026-11-30T23:20', '2026-12-01T03:20']);
  });

  it('a tick that fails as a whole is tried at the next check, past midnight too (FORKFLUSH_NIGHTLY_HOUR=23)', async () => {
    // The start's tick (for the night before) and 23:30's fail; 00:30 ticks the night of the 30th.
    expect(await nightlyTicks('2026-11-30T22:30:00Z', 23, 6, 2)).toEqual(['2026-12-01T00:30']);
  });

  it('reads the hour from FORKFLUSH_NIGHTLY_HOUR', () => {
    expect(nightlyHour({})).toBe(3);
    expect(nightlyHour({ FORKFLUSH_NIGHTLY_HOUR: '0' })).toBe(0);
    expect(nightlyHour({ FORKFLUSH_NIGHTLY_HOUR: 'off' })).toBeNull();
    expect(() => nightlyHour({ FORKFLUSH_NIGHTLY_HOUR: '24' })).toThrow(
      'FORKFLUSH_NIGHTLY_HOUR is "24": use an hour of the day in UTC (0 to 23), or off',
    );
  });
});
