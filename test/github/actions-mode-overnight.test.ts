// The in-Actions mode (dist/app-actions.js, src/app/actions-mode.ts) left alone overnight with
// GITHUB_TOKEN alone: no workflow_run for the rounds the app dispatched and no workflow_job, so the
// hourly autoresearch-tick.yml is the only thing that moves a run on, and it must not rest while a
// run needs it (src/github/nightly.ts).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ActionsModeOptions, runInActions } from '../../src/app/actions-mode.js';
import { CONFIG, Harness, testOctokit } from './harness.js';
import { useGitHubInABox } from './use-box.js';

const RUN = 'issue-7';
const TICK = 'autoresearch-tick.yml';

let dir: string;
useGitHubInABox();
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'forkflush-inactions-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const appRuns = new WeakMap<Harness, number>();
let files = 0;

/** One job of autoresearch.yml / autoresearch-tick.yml: the runner's environment, the event in a file. */
async function step(h: Harness, event: string, body: unknown, options: ActionsModeOptions = {}) {
  const runId = appRuns.get(h) ?? 4242;
  appRuns.set(h, runId + 1);
  // A file per job: two jobs may run at once (the race rows).
  const path = join(dir, `event-${++files}.json`);
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
    },
    {
      Octokit: testOctokit(),
      logLevel: 'fatal',
      now: () => h.clock,
      out: { info: (l) => info.push(l), error: (l) => errors.push(l) },
      ...options,
    },
  );
  return { code, info, errors };
}

function labeled(h: Harness) {
  return h.box.payload('issues', 'labeled', (p) => {
    p.issue.number = 7;
    p.issue.title = 'Pack it tighter';
    p.issue.body = 'Make the score go up.';
    delete p.issue.pull_request;
    p.label.name = 'autoresearch';
    p.sender.login = 'maintainer';
    p.sender.type = 'User';
  });
}

const schedule = { schedule: '17 * * * *' };

/** The worker jobs' part: every episode of the open round pushes a result. */
function finishRound(h: Harness, score: (branch: number) => number = (b) => (b === 1 ? 50 : 40)) {
  const state = h.state(RUN);
  for (const e of h.openEpisodes(RUN)) if (!e.result) h.pushResult(state, e, score(e.branch));
}

async function github(): Promise<Harness> {
  const h = await new Harness({
    '.github/autoresearch.yml': CONFIG,
    'grade.mjs': 'x',
    [`.github/workflows/${TICK}`]: 'on: schedule\n',
  }).startGitHub();
  h.box.auth.allow('ghs_job_token');
  return h;
}

describe('in-Actions mode left alone overnight', () => {
  it('a run labelled while the tick is between listing runs and turning itself off keeps the tick on', async () => {
    // A label job that starts a run (and wakes the tick, amend.ts wakeTick) while the tick decides
    // nothing needs it was undone by the tick's rest: the run then waited for ever, nothing said
    // (found by a review).
    const h = await github();
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
    const tick = await step(h, 'schedule', schedule, { Octokit: Racing });
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
    const h = await github();
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
      await Promise.race([step(h, 'schedule', schedule, { Octokit: Dying }), died]);
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
});
