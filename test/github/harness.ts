// Drives the Probot app the way GitHub does: the app runs behind its own HTTP server (Probot's
// node middleware, app id and private key, webhook secret), GitHub is the box (box.ts) on another
// port, and events arrive as signed deliveries of real payload shapes. The harness plays the
// worker jobs' part where a test does not run them for real: a job pushes a result commit to its
// episode branch, then GitHub reports the job as completed.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import Bottleneck from 'bottleneck';
import { createNodeMiddleware, Probot, ProbotOctokit } from 'probot';
import { forkflushApp } from '../../src/app/app.js';
import { RELEASE } from '../../src/app/app-context.js';
import { commitMessage } from '../../src/core/journal.js';
import { buildMap } from '../../src/core/map/record.js';
import { runSnapshots } from '../../src/core/map/sample.js';
import { BASE_JOB, baseGradeRef, mapRef, type RunRefs, runRefs, stateRef } from '../../src/core/names.js';
import type { Episode, EpisodeResult, RunState } from '../../src/core/state.js';
import { GitHubApi } from '../../src/github/api.js';
import { recordKeyFrom, repositoryKey, sealedFiles } from '../../src/github/record-seal.js';
import { createRetry } from '../../src/github/requests.js';
import { GitHubBox, KEEP_ALIVE_MS } from './box.js';
import { FAKE_REPOSITORY_ID, type FakeGitHub } from './fake-github.js';

export const CONFIG = `grader:
  command: node grade.mjs
  protected: [grade.mjs]
agent:
  command: node agent.mjs
budget:
  total: 100
  unit: tokens
  episode: 10
fork:
  branches: 2
  at: [0.5]
  branch_budget: 0.15
`;

/** The example worker workflow with the Action's reference filled in, as `init --github --action` writes it. */
export const WORKER_WORKFLOW = readFileSync(
  join(import.meta.dirname, '../../examples/workflows/forkflush.yml'),
  'utf8',
).replace(/your-org\/forkflush@/g, 'octo-org/forkflush@');

/** A token tests use for their own Octokit (the app authenticates as an app). */
export const TEST_TOKEN = 'ghs_test_token';

/** Every comment on an issue (the status comment and the lines forkflush adds), as one text. */
export const issueText = (h: Harness, issue = 7): string =>
  h.gh.comments
    .filter((c) => c.issue === issue)
    .map((c) => c.body)
    .join('\n');

/** Milliseconds for each of Probot's seconds (its plugins count in seconds times 1000). */
const SHORTER = 1;
// The API's own checked retries of its creates (requests.ts, createOnce) wait the same way.
createRetry.baseMs = SHORTER;

/**
 * Octokit as Probot ships it (ProbotOctokit: @octokit/plugin-retry and @octokit/plugin-throttling
 * on, and inside an app Probot's own rate-limit handlers), with every timing 1000 times shorter: a
 * retry after 1, 4, 9 ms (not s), a `retry-after: 60` waits 60 ms, writes go one at a time 1 ms
 * apart (those that notify, 3 ms). The limiters are the plugin's, with its concurrency, made per
 * harness: each harness is one app process (the plugin's are per process), so runs side by side
 * in one test worker do not queue behind each other's requests. `onRequest` sees each request's
 * headers as sent.
 */
export function testOctokit(onRequest?: (headers: Headers) => void): typeof ProbotOctokit {
  const group = (maxConcurrent: number, minTime = 0) => new Bottleneck.Group({ maxConcurrent, minTime });
  const limiters = {
    global: group(10),
    auth: group(1),
    search: group(1, 2),
    write: group(1, 1),
    notifications: group(1, 3),
  };
  return ProbotOctokit.defaults((options: any) => ({
    ...options,
    // 599 is the box's answer to a request that breaks GitHub's OpenAPI description: no retry.
    retry: { ...options.retry, retryAfterBaseValue: SHORTER, doNotRetry: [400, 401, 403, 404, 410, 422, 451, 599] },
    throttle: { ...options.throttle, retryAfterBaseValue: SHORTER, ...limiters },
    ...(onRequest && {
      request: {
        ...options.request,
        fetch: (url: string, init: RequestInit) => {
          onRequest(new Headers(init.headers));
          return fetch(url, init);
        },
      },
    }),
  }));
}

/** An Octokit class for tests that make their own. */
export const TestOctokit = testOctokit();

const open = new Set<Harness>();

/** Stops every harness's servers and removes their repositories; for afterEach. */
export async function closeHarnesses(): Promise<void> {
  const all = [...open];
  open.clear();
  await Promise.all(all.map((h) => h.close()));
}

export class Harness {
  readonly box: GitHubBox;
  /** The app instance now running (a restart makes a new one). */
  probot: Probot;
  clock = new Date('2026-11-30T12:00:00Z');
  private delivery = 0;
  private appServer: Server | null = null;
  /** This harness's Octokit: the app's and its nightly tick's (one process, one set of limiters). */
  private readonly Octokit = testOctokit();
  /** The app's handlers by delivery id, to wait for one that outlives the webhook timeout. */
  private readonly handlers = new Map<string, Promise<void>>();

  constructor(
    files: Record<string, string> = { '.github/autoresearch.yml': CONFIG },
    where: { owner?: string; repo?: string } = {},
  ) {
    // The worker workflow, as a user copies it: what a dispatch runs; and the scripts CONFIG's
    // commands run, which a run refuses to start without.
    const scripts = { 'grade.mjs': 'x', 'agent.mjs': 'x' };
    this.box = new GitHubBox({ '.github/workflows/forkflush.yml': WORKER_WORKFLOW, ...scripts, ...files }, where);
    open.add(this); // closeHarnesses() removes its repository, started or not
    this.gh.permissions = { maintainer: 'maintain', reader: 'read' };
    this.box.auth.allow(TEST_TOKEN);
    // Until load(): an app for nock-only tests (bare), that receives events in-process.
    this.probot = new Probot({ githubToken: TEST_TOKEN, logLevel: 'fatal', Octokit: this.Octokit });
    this.box.handlerEnd = (id) => this.handlerEnd(id);
  }

  /** The status the app would have answered a delivery with, at the end of its handler. */
  private async handlerEnd(id: string): Promise<number> {
    try {
      await this.handlers.get(id);
      return 200;
    } catch (e) {
      // As Probot's middleware answers: the first handler error's status, else 500.
      const first = (e as { errors?: Iterable<{ status?: number }> }).errors;
      return (first && [...first][0]?.status) || 500;
    }
  }

  get gh(): FakeGitHub {
    return this.box.gh;
  }

  /** Starts GitHub (the box) and the app's server, and points GitHub's webhooks at the app. */
  async load(): Promise<this> {
    await this.startGitHub();
    await this.startApp();
    return this;
  }

  /** Starts GitHub (the box) alone. */
  async startGitHub(): Promise<this> {
    await this.box.start();
    return this;
  }

  private async startApp(): Promise<void> {
    this.probot = new Probot({
      appId: this.box.auth.appId,
      privateKey: this.box.auth.privateKey,
      secret: this.box.webhookSecret,
      baseUrl: this.box.apiUrl,
      logLevel: 'fatal',
      Octokit: this.Octokit,
    });
    // The record key the hosted app derives from its webhook secret: every record it writes is sealed.
    const middleware = await createNodeMiddleware(forkflushApp({ now: () => this.clock, recordKey: this.recordKey }), {
      probot: this.probot,
    });
    // Each delivery's handling, as Probot's middleware starts it (and may answer 202 before its end).
    const webhooks = this.probot.webhooks;
    const receive = webhooks.verifyAndReceive.bind(webhooks);
    webhooks.verifyAndReceive = (event) => {
      const handled = receive(event);
      this.handlers.set(event.id, handled);
      handled.then(
        () => this.handlers.delete(event.id),
        () => {},
      );
      return handled;
    };
    const server = createServer(async (req, res) => {
      if (!(await middleware(req, res))) {
        res.statusCode = 404;
        res.end();
      }
    });
    server.keepAliveTimeout = KEEP_ALIVE_MS;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.appServer = server;
    this.box.webhookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/github/webhooks`;
  }

  private async stopApp(): Promise<void> {
    const server = this.appServer;
    this.appServer = null;
    this.box.webhookUrl = null;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  /** The app restarted between two steps: a new process (nothing kept in memory), same GitHub. */
  async restart(): Promise<this> {
    await this.stopApp();
    await this.startApp();
    return this;
  }

  /** The api as the hosted app's nightly tick uses it, against the box. */
  api(): GitHubApi {
    // Quiet, as the app's Probot logger is at 'fatal': the throttling plugin warns of each rate limit.
    const log = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
    const octokit = new this.Octokit({ auth: { token: TEST_TOKEN }, baseUrl: this.box.apiUrl, log });
    // The app's release, as the app's own handlers and nightly tick have it.
    return new GitHubApi(octokit, this.gh.owner, this.gh.repo, this.recordKey, RELEASE);
  }

  /**
   * Another handler of this app saves the run's record (sealed with the app's key): `change`
   * edits run.json's content in place.
   */
  rewriteRecord(run: string, change: (files: any) => void, message = 'another handler'): void {
    const ref = stateRef(run);
    const head = this.gh.refs.get(ref) as string;
    const files = structuredClone(this.gh.commits.get(head)?.files ?? {});
    const parsed = JSON.parse(files['run.json'] as string);
    change(parsed);
    const key = repositoryKey(this.recordKey, { id: FAKE_REPOSITORY_ID });
    files['run.json'] = sealedFiles(key, files['state.json'] as string, parsed);
    this.gh.refs.set(ref, this.gh.commit({ message, parents: [head], files }));
  }

  /** The app's record key, as the hosted entry derives it (src/app/server.ts). */
  get recordKey(): Buffer {
    return recordKeyFrom({ WEBHOOK_SECRET: this.box.webhookSecret }) as Buffer;
  }

  async close(): Promise<void> {
    open.delete(this);
    await this.stopApp();
    await this.box.stop();
  }

  /** The run's record files (run.json), or null before the run has one. */
  runFiles(run: string): Record<string, any> | null {
    const sha = this.gh.refs.get(stateRef(run));
    const text = sha ? this.gh.commits.get(sha)?.files['run.json'] : undefined;
    return text === undefined ? null : JSON.parse(text);
  }

  /**
   * GitHub sends the event: a signed delivery to the app's server (throws if the app answered
   * with an error, as a failed handler does). Before load(), the app receives it in-process.
   */
  async send(event: string, action: string, patch: (p: any) => void): Promise<void> {
    if (!this.appServer) {
      await this.probot.receive({
        id: `delivery-${++this.delivery}`,
        name: event as never,
        payload: this.box.payload(event, action, patch) as never,
      });
      return;
    }
    const d = await this.box.deliver(event, this.box.payload(event, action, patch));
    if (d.late) this.stillProcessing.push(`${event}.${action}`);
    const failures = this.box.failures.splice(0);
    if (failures.length > 0) throw new Error(`events of the app's own changes failed:\n${failures.join('\n')}`);
    if (d.status >= 400) throw new Error(`the app answered the ${event}.${action} delivery with ${d.status}`);
  }

  /**
   * Deliveries the app answered 202 "still processing": the handler outlived Probot's 9 s webhook
   * timeout (a busy machine), and the box waited for its end.
   */
  readonly stillProcessing: string[] = [];

  /** A user labels the issue: the label is on it, then GitHub sends the event. */
  label(issue: number, user = 'maintainer', type = 'User', name = 'autoresearch') {
    const labels = this.gh.labels.get(issue) ?? new Set<string>();
    this.gh.labels.set(issue, labels.add(name));
    return this.send('issues', 'labeled', (p) => {
      p.issue.number = issue;
      p.issue.title = 'Pack it tighter';
      p.issue.body = 'Make the score go up.';
      delete p.issue.pull_request;
      p.label.name = name;
      p.sender.login = user;
      p.sender.type = type;
    });
  }

  /** A comment on an issue, or (onPull) on the pull request of that number. */
  comment(issue: number, body: string, user = 'maintainer', onPull = false) {
    return this.send('issue_comment', 'created', (p) => {
      p.issue.number = issue;
      delete p.issue.pull_request;
      if (onPull) {
        const url = `https://github.com/octo-org/octo-repo/pull/${issue}`;
        p.issue.pull_request = {
          url: `https://api.github.com/repos/octo-org/octo-repo/pulls/${issue}`,
          html_url: url,
          diff_url: `${url}.diff`,
          patch_url: `${url}.patch`,
          merged_at: null,
        };
      }
      p.comment.body = body;
      p.sender.login = user;
      p.sender.type = 'User';
    });
  }

  jobCompleted(run: string, episode: string, conclusion = 'success', branch = 'main') {
    return this.send('workflow_job', 'completed', (p) => {
      p.workflow_job.name = `forkflush ${run} ${episode}`;
      p.workflow_job.conclusion = conclusion;
      p.workflow_job.head_branch = branch;
    });
  }

  /** GitHub reports an episode's job as started, now. */
  jobStarted(run: string, episode: string, branch = 'main') {
    return this.send('workflow_job', 'in_progress', (p) => {
      p.workflow_job.name = `forkflush ${run} ${episode}`;
      p.workflow_job.head_branch = branch;
      p.workflow_job.started_at = this.clock.toISOString();
    });
  }

  runCompleted(run: string, round: number, branch = 'main') {
    return this.send('workflow_run', 'completed', (p) => {
      p.workflow_run.display_title = `forkflush ${run} round ${round}`;
      p.workflow_run.head_branch = branch;
    });
  }

  /** The map job's part: a map commit (map.json, map.svg, the judge's answers) on the run's map ref. */
  pushMap(run: string, png = false): string {
    const state = this.state(run);
    const snapshots = runSnapshots(state, 51).map((s) => ({
      ...s,
      strategy: state.config.strategy,
      variant: null,
      seed: 1,
    }));
    const [x, y, z] = snapshots.map((s) => s.commit) as [string, string, string];
    const judgments = Array.from({ length: 12 }, (_, i) => ({
      anchor: x,
      a: i % 2 ? y : z,
      b: i % 2 ? z : y,
      answer: 'a' as const,
    }));
    const record = buildMap({
      target: { kind: 'run', id: run },
      createdAt: '2026-11-30T12:00:00.000Z',
      direction: 'maximize',
      judge: { kind: 'command', label: 'command (sh judge.sh)' },
      embedding: 'tste',
      seed: 1,
      snapshots,
      judgments,
      heldOutShare: 0.1,
      failed: { specs: [], judgments: 0, errors: [] },
      calls: { spec: { made: 3, cached: 0, failed: 0 }, triplet: { made: 12, cached: 0, failed: 0 } },
      spent: 2,
      unit: 'minutes',
      budget: 30,
    });
    const parent = this.gh.refs.get(mapRef(run));
    const sha = this.gh.commit({
      message: `forkflush ${run}: idea map`,
      parents: parent ? [parent] : [],
      files: {
        'map.json': JSON.stringify(record),
        'map.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>',
        ...(png ? { 'map.png': 'png' } : {}),
        'cache/0123456789abcdef/judgments.jsonl': '',
      },
    });
    this.gh.refs.set(mapRef(run), sha);
    return sha;
  }

  state(run: string): RunState {
    const sha = this.gh.refs.get(stateRef(run)) as string;
    return JSON.parse(this.gh.commits.get(sha)?.files['state.json'] as string);
  }

  /**
   * The worker's part: a result commit on the episode's base, with the score in its trailers. A
   * forger (`api`) puts it on other parents or changes other files, as a leaked token could.
   */
  pushResult(
    state: RunState,
    e: Episode,
    score: number | null,
    spent = e.allowance,
    api: {
      parents?: string[];
      files?: Record<string, string>;
      /** A setup failure, as a worker reports one (its agent never started). */
      setupFailed?: string;
      /** Fields of the result an agent fills (a note, usage), as the worker wrote them. */
      result?: Partial<Omit<EpisodeResult, 'commit'>>;
      /** The journal's last lines, as the commit records them. */
      journalTail?: string[];
    } = {},
  ) {
    const branch = this.refs(state.id).episode(e.round, e.branch);
    const head = this.gh.refs.get(branch);
    if (head !== e.base) return false;
    const message = commitMessage(
      state.id,
      state.config.budget.unit,
      e,
      {
        score,
        ...(score === null ? { reason: api.setupFailed ?? 'the grader exited with code 1' } : {}),
        spent,
        exit: api.setupFailed ? 'setup' : 'finished',
        protectedChanged: [],
        agentSeconds: 1,
        graderSeconds: 0.5,
        wallSeconds: 2,
        ...api.result,
      },
      {
        diffStat: '1 file changed, 2 insertions(+)',
        journalTail: api.journalTail ?? [`- ${e.id}: tried something`],
      },
    );
    const parent = this.gh.commits.get(e.base);
    const sha = this.gh.commit({
      message,
      parents: api.parents ?? [e.base],
      files: { ...parent?.files, 'NOTES.md': `${e.id}\n`, ...api.files },
    });
    this.gh.refs.set(branch, sha);
    return true;
  }

  /** The run's refs, in the layout its record says (before it has one: the default, 2). */
  refs(run: string): RunRefs {
    return runRefs(run, this.runFiles(run)?.refsLayout ?? (this.runFiles(run) ? 1 : 2));
  }

  /**
   * The base job's part: the initial workspace's grade, a commit on the base's tree whose parent is
   * the base, on refs/forkflush/<run>/base. False when one is there already.
   */
  pushBase(state: RunState, score: number | null, api: { files?: Record<string, string> } = {}) {
    const ref = baseGradeRef(state.id);
    if (this.gh.refs.has(ref)) return false;
    const message = commitMessage(
      state.id,
      state.config.budget.unit,
      { id: BASE_JOB },
      {
        score,
        ...(score === null ? { reason: 'the grader exited with code 1' } : {}),
        spent: 0,
        exit: 'finished',
        protectedChanged: [],
        agentSeconds: 0,
        graderSeconds: 0.5,
        wallSeconds: 1,
      },
    );
    const base = this.gh.commits.get(state.base.commit);
    const sha = this.gh.commit({ message, parents: [state.base.commit], files: { ...base?.files, ...api.files } });
    this.gh.refs.set(ref, sha);
    return true;
  }

  /** Plays every round dispatched to the run's end: each job pushes its score (1 by default), then reports completed. */
  async playToEnd(run: string, score: (episode: string) => number = () => 1): Promise<void> {
    for (let guard = 0; guard < 50; guard++) {
      const state = this.state(run);
      const open = state.rounds.find((r) => !r.decision);
      if (state.status === 'finished' || !open) return;
      for (const e of open.episodes) if (!e.result) this.pushResult(state, e, score(e.id));
      for (const e of open.episodes) await this.jobCompleted(run, e.id);
    }
    throw new Error(`${run} did not finish`);
  }

  /** The open round's episodes, as the app dispatched them. */
  openEpisodes(run: string): Episode[] {
    return this.state(run).rounds.find((r) => !r.decision)?.episodes ?? [];
  }
}
