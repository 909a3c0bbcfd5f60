// GitHub in a box: the fake GitHub served over real HTTP on 127.0.0.1, the way the app and the
// worker Action meet GitHub.
//   http://127.0.0.1:<port>/api/v3/...      the REST API (fake-github.ts), app auth (app-auth.ts)
//   http://127.0.0.1:<port>/<owner>/<repo>.git/...   git clone and push (git-http.ts)
// Workflow dispatches become runs whose jobs run the real worker Action (fake-actions.ts); what
// changes sends webhooks, built from GitHub's examples, checked against GitHub's webhook schemas,
// signed with the app's secret and posted to the app's webhook URL.
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import examples from '@octokit/webhooks-examples';
import { AppAuth } from './app-auth.js';
import { FakeActions, type FakeJob, type FakeRun, type JobFate } from './fake-actions.js';
import { FAKE_REPOSITORY_ID, FakeGitHub, RawBody } from './fake-github.js';
import { handleGitRequest } from './git-http.js';
import { checkWebhook } from './openapi/webhooks.js';

export interface Delivery {
  id: string;
  event: string;
  action: string;
  /**
   * The app's HTTP status; 0 when dropped or not sent. For a handler that outlived the webhook
   * timeout (the app answered 202 "still processing"), what it would have answered at its end.
   */
  status: number;
  /** The app first answered 202: its handler ran on after the answer (see `handlerEnd`). */
  late?: true;
}

/**
 * How long an idle connection stays open. GitHub keeps idle connections longer than its clients do,
 * and so does the box (and the harness's app server): a client never reuses a connection the server
 * is closing at that moment, which on a busy machine (timers late by seconds) resets requests at
 * random. Resets are a fault the chaos suite injects on purpose (fake-github.ts, RESET).
 */
export const KEEP_ALIVE_MS = 120_000;

type Example = { name: string; examples: Record<string, any>[] };

const chosen = new Map<string, Record<string, any>>();

/**
 * Events GitHub's examples have none of, made from one they have, as GitHub sends them
 * (webhooks-openapi.test.ts checks the stand-in against GitHub's schema).
 */
const STAND_INS: Record<string, { from: string; patch: (p: any) => void }> = {
  'issues.closed': {
    from: 'reopened',
    patch: (p) => {
      p.issue.state = 'closed';
      p.issue.closed_at = '2026-11-30T12:00:00Z';
    },
  },
};

/** GitHub's example of an event, the first one its schema accepts (else the first), chosen once. */
function exampleOf(event: string, action: string): Record<string, any> {
  const key = `${event}.${action}`;
  const known = chosen.get(key);
  if (known) return known;
  const standIn = STAND_INS[key];
  if (standIn) {
    const made = structuredClone(exampleOf(event, standIn.from));
    made.action = action;
    standIn.patch(made);
    chosen.set(key, made);
    return made;
  }
  const candidates = (examples as unknown as Example[])
    .find((e) => e.name === event)
    ?.examples.filter((x) => x.action === action);
  const found = candidates?.find((x) => checkWebhook(event, x).length === 0) ?? candidates?.[0];
  if (!found) throw new Error(`no example of ${key}`);
  chosen.set(key, found);
  return found;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class GitHubBox {
  readonly gh: FakeGitHub;
  readonly auth = new AppAuth();
  readonly actions: FakeActions;
  readonly webhookSecret = `whsec_${randomUUID()}`;
  /** Where webhooks go (the app's server); null: nowhere yet. */
  webhookUrl: string | null = null;
  readonly deliveries: Delivery[] = [];
  /** Fault control for each delivery: send it, drop it, or send it twice. */
  onDelivery: ((d: { event: string; action: string }) => 'send' | 'drop' | 'twice') | null = null;
  /** Milliseconds every REST answer and every delivery waits (GitHub is not instant). */
  latencyMs = 0;
  /**
   * When the app answers a delivery 202 "still processing" (Probot does after 9 s, GitHub gives up
   * at 10), resolves at the end of its handler with the status the app would have answered. The
   * box waits for it before it goes on: what happens next (the next event, the next answer) then
   * does not depend on how fast the machine is, so a seeded run is the same run under load.
   */
  handlerEnd: ((deliveryId: string) => Promise<number>) | null = null;
  /** Repository secrets the workflows see. */
  readonly secrets: Record<string, string> = {};
  /** Tokens minted for jobs, to check none leaks. */
  readonly jobTokens: string[] = [];
  private server: Server | null = null;
  private port = 0;

  constructor(files: Record<string, string>, where: { owner?: string; repo?: string } = {}) {
    this.gh = new FakeGitHub(files, where);
    this.gh.auth = this.auth;
    const box = this;
    this.actions = new FakeActions({
      root: this.gh.store.root,
      get serverUrl() {
        return box.serverUrl;
      },
      get apiUrl() {
        return box.apiUrl;
      },
      owner: this.gh.owner,
      repo: this.gh.repo,
      jobToken: () => {
        const { token } = this.auth.mint(null, true);
        this.jobTokens.push(token);
        return token;
      },
      readFile: (sha, path) => this.gh.commits.get(sha)?.files[path],
      get repository() {
        return box.gh.repositoryPayload();
      },
      secrets: this.secrets,
    });
    this.gh.actions = this.actions;
    this.gh.onEvent = (event, action, subject) => this.owed.push({ event, action, subject });
  }

  /** Events the request being answered caused; sent before its answer (see serve()). */
  private owed: { event: string; action: string; subject: any }[] = [];
  /** Events of the app's own changes the box failed to build or send, or the app failed to handle (Harness.send reports them). */
  readonly failures: string[] = [];

  /** GitHub's webhook for a change the app's bot made through the API. */
  private ownEventPayload(event: string, action: string, subject: any): Record<string, any> | null {
    const bot = (p: any) => {
      p.sender = { ...p.sender, login: 'forkflush[bot]', id: 41898282, type: 'Bot' };
    };
    const pull = (state: 'open' | 'closed') =>
      this.payload('pull_request', action, (p) => {
        bot(p);
        p.number = subject.number;
        Object.assign(p.pull_request, { number: subject.number, title: subject.title, state });
        if (state === 'closed') {
          p.pull_request.closed_at = new Date().toISOString();
          p.pull_request.merged = subject.merged ?? false;
        }
        p.pull_request.head.ref = subject.head;
        p.pull_request.base.ref = subject.base;
      });
    switch (`${event}.${action}`) {
      case 'pull_request.opened':
        return pull('open');
      case 'pull_request.closed':
        return pull('closed');
      case 'issue_comment.created':
        return this.payload('issue_comment', 'created', (p) => {
          bot(p);
          p.issue.number = subject.issue;
          delete p.issue.pull_request;
          Object.assign(p.comment, { id: subject.id, body: subject.body, user: p.sender });
        });
      case 'issues.labeled':
      case 'issues.unlabeled':
        return this.labelPayload(action, subject, bot);
      case 'workflow_job.completed':
        return this.jobPayload(subject);
      case 'workflow_run.completed':
        return this.runPayload(subject);
      default:
        return null;
    }
  }

  /**
   * Sends the events a request caused, one by one, before the request is answered: GitHub may
   * deliver them that early, and another handler then runs between two steps of the one that
   * made the request. One at a time keeps a seeded run repeatable.
   */
  private async sendOwed(owed: { event: string; action: string; subject: any }[]): Promise<void> {
    for (const { event, action, subject } of owed) {
      try {
        const payload = this.ownEventPayload(event, action, subject);
        const d = payload ? await this.deliver(event, payload) : null;
        if (d && d.status >= 400) this.failures.push(`${event}.${action}: the app answered ${d.status}`);
      } catch (e) {
        this.failures.push(`${event}.${action}: ${(e as Error).message}`);
      }
    }
  }

  private labelPayload(action: string, subject: { issue: number; label: string }, bot: (p: any) => void) {
    return this.payload('issues', action, (p) => {
      bot(p);
      p.issue.number = subject.issue;
      delete p.issue.pull_request;
      p.label = { ...(p.label ?? p.issue.labels?.[0]), name: subject.label };
      // The issue's labels as they are once the change is made, as GitHub sends them.
      p.issue.labels = [...(this.gh.labels.get(subject.issue) ?? [])].map((name) => ({ ...p.label, name }));
    });
  }

  get serverUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get apiUrl(): string {
    return `${this.serverUrl}/api/v3`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      this.serve(req, res).catch((e) => {
        res.statusCode = 500;
        res.end(String(e));
      });
    });
    this.server.keepAliveTimeout = KEEP_ALIVE_MS;
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** Stops the server (if it was started) and removes the repository. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    this.gh.store.remove();
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    if (this.latencyMs > 0) await sleep(this.latencyMs);
    if (url.startsWith('/api/v3/') || url === '/api/v3') {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      const reply = this.gh.handle(req.method ?? 'GET', url.slice('/api/v3'.length) || '/', text, req.headers);
      await this.sendOwed(this.owed.splice(0));
      if (reply.reset) {
        // A connection reset: no answer, and the client reads ECONNRESET.
        req.socket.resetAndDestroy();
        return;
      }
      const raw = reply.body instanceof RawBody ? reply.body : null;
      const body = raw ? raw.text : reply.body === undefined ? '' : JSON.stringify(reply.body);
      res.writeHead(reply.status, {
        ...(raw
          ? { 'content-type': raw.contentType, 'x-github-media-type': 'github.v3; param=raw' }
          : {
              ...(body ? { 'content-type': 'application/json; charset=utf-8' } : {}),
              'x-github-media-type': 'github.v3; format=json',
            }),
        ...reply.headers,
      });
      res.end(body);
      return;
    }
    const handled = await handleGitRequest(req, res, {
      projectRoot: this.gh.store.root,
      authorize: (header, _repo, push) => {
        const token = this.auth.token(header);
        return token !== null && (!push || token.push);
      },
      beforeRequest: () => this.gh.store.exportRefs(),
      afterPush: async () => {
        this.gh.store.importRefs();
        this.gh.branchesMoved();
        await this.sendOwed(this.owed.splice(0));
      },
      // The tokens here (a job's GITHUB_TOKEN, an app's installation token) lack the `workflows`
      // permission, and GitHub refuses their pushes that touch a workflow, in these words.
      refusePush: async (_repo, push) => {
        const workflow = (await push.changedPaths()).find((p) => p.startsWith('.github/workflows/'));
        return workflow
          ? `refusing to allow a GitHub App to create or update workflow \`${workflow}\` without \`workflows\` permission`
          : null;
      },
    });
    if (!handled) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('Not Found');
    }
  }

  /**
   * Sends a webhook as GitHub does: the payload (checked against GitHub's webhook schema), the
   * installation, a delivery id, and `x-hub-signature-256` over the exact body. `signWith`
   * signs with another secret (a forged delivery).
   */
  async deliver(event: string, payload: Record<string, any>, signWith = this.webhookSecret): Promise<Delivery> {
    const body: Record<string, any> = {
      ...payload,
      installation: { id: this.auth.installations[0]?.id ?? 1, node_id: 'MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==' },
    };
    const wrong = checkWebhook(event, body);
    if (wrong.length > 0) throw new Error(`the fake built a webhook GitHub would not send:\n${wrong.join('\n')}`);
    const delivery: Delivery = { id: randomUUID(), event, action: String(body.action ?? ''), status: 0 };
    this.deliveries.push(delivery);
    const fate = this.onDelivery?.({ event, action: delivery.action }) ?? 'send';
    if (fate === 'drop' || !this.webhookUrl) return delivery;
    if (this.latencyMs > 0) await sleep(this.latencyMs);
    const text = JSON.stringify(body);
    const signature = `sha256=${createHmac('sha256', signWith).update(text).digest('hex')}`;
    for (let i = 0; i < (fate === 'twice' ? 2 : 1); i++) {
      const res = await fetch(this.webhookUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'GitHub-Hookshot/5f2b9a1',
          'x-github-event': event,
          'x-github-delivery': delivery.id,
          'x-github-hook-id': '1',
          'x-github-hook-installation-target-type': 'integration',
          'x-github-hook-installation-target-id': String(this.auth.appId),
          'x-hub-signature-256': signature,
        },
        body: text,
      });
      await res.arrayBuffer();
      delivery.status = res.status;
      if (res.status === 202 && this.handlerEnd) {
        delivery.late = true;
        delivery.status = await this.handlerEnd(delivery.id);
      }
    }
    return delivery;
  }

  /** A payload from GitHub's examples (the first one GitHub's schema accepts), for this repository. */
  payload(event: string, action: string, patch: (p: any) => void): Record<string, any> {
    const found = exampleOf(event, action);
    const p = structuredClone(found);
    // An installation's own event names it, and no repository; every other is as the token's (none).
    if (event === 'installation') {
      p.installation.id = this.auth.installations[0]?.id;
      patch(p);
      return p;
    }
    this.ourRepository(p.repository);
    p.repository.default_branch = 'main';
    delete p.installation;
    delete p.organization;
    // The transferred example is older than GitHub's schema (webhooks-openapi.test.ts): as GitHub sends it now.
    if (p.changes?.new_repository) p.changes.new_repository.has_discussions ??= false;
    if (p.repository.homepage === '') p.repository.homepage = null;
    // Every comment has an id of its own (the examples share one); a test may set it.
    if (event === 'issue_comment' && p.comment) p.comment.id = this.nextCommentId++;
    if (event === 'workflow_run' || event === 'workflow_job') {
      // The event of a run or job the box's Actions has (by the title or job name the test gives)
      // says what GitHub knows of it: its id, its workflow file, its event, its repository. The
      // test's patch goes on top, so a test can still send a run from elsewhere.
      const probe = structuredClone(p);
      patch(probe);
      this.describeActions(event, p, probe);
    }
    patch(p);
    // A person's comment is on GitHub before its event is sent: the app may react to it.
    if (event === 'issue_comment' && p.comment && !this.gh.comments.some((c) => c.id === p.comment.id))
      this.gh.personComments.set(p.comment.id, { id: p.comment.id, issue: p.issue.number, body: p.comment.body });
    return p;
  }

  /** The id of the next comment a person writes (the app's own get FakeGitHub's ids). */
  private nextCommentId = 700_000_001;

  /** Makes an example's repository (or a workflow run's head repository) this one. */
  private ourRepository(r: any): void {
    r.id = FAKE_REPOSITORY_ID;
    r.name = this.gh.repo;
    r.full_name = `${this.gh.owner}/${this.gh.repo}`;
    r.html_url = `https://github.com/${this.gh.owner}/${this.gh.repo}`;
    r.owner.login = this.gh.owner;
  }

  /** Fills a workflow_run or workflow_job payload in from the run or job of the box it names. */
  private describeActions(event: string, p: any, named: any): void {
    if (event === 'workflow_run') {
      const w = p.workflow_run;
      this.ourRepository(w.repository);
      this.ourRepository(w.head_repository);
      const run = this.actions.runs.findLast((r) => r.displayTitle === named.workflow_run?.display_title);
      if (!run) return;
      const path = `.github/workflows/${run.workflowId}`;
      Object.assign(w, {
        id: run.id,
        name: run.name,
        head_branch: run.ref,
        head_sha: run.headSha,
        path,
        event: 'workflow_dispatch',
      });
      p.workflow.path = path;
      p.workflow.name = run.name;
      return;
    }
    const job = this.actions.runs.flatMap((r) => r.jobs).findLast((j) => j.name === named.workflow_job?.name);
    if (!job) return;
    const run = this.actions.runOf(job);
    Object.assign(p.workflow_job, {
      id: job.id,
      run_id: run.id,
      workflow_name: run.name,
      head_branch: run.ref,
      head_sha: run.headSha,
    });
  }

  /** Runs a queued job and sends what GitHub sends when it ends: workflow_job, then workflow_run. */
  async runJob(job: FakeJob, fate: JobFate = 'run'): Promise<FakeJob> {
    await this.actions.runJob(job, fate);
    if (job.status !== 'completed') return job;
    await this.jobEvent(job);
    const run = this.actions.runOf(job);
    if (run.status === 'completed') await this.runEvent(run);
    return job;
  }

  /** Runs every queued job, `jobsAtOnce` at a time (GitHub runs a matrix in parallel). */
  async runQueued(fate: (job: FakeJob) => JobFate = () => 'run', jobsAtOnce = 2): Promise<FakeJob[]> {
    const queue = this.actions.queuedJobs();
    const done: FakeJob[] = [];
    const worker = async () => {
      for (let job = queue.shift(); job; job = queue.shift()) done.push(await this.runJob(job, fate(job)));
    };
    await Promise.all(Array.from({ length: jobsAtOnce }, worker));
    return done;
  }

  jobEvent(job: FakeJob) {
    return this.deliver('workflow_job', this.jobPayload(job));
  }

  runEvent(run: FakeRun) {
    return this.deliver('workflow_run', this.runPayload(run));
  }

  private jobPayload(job: FakeJob) {
    const run = this.actions.runOf(job);
    return this.payload('workflow_job', 'completed', (p) => {
      Object.assign(p.workflow_job, {
        id: job.id,
        run_id: run.id,
        name: job.name,
        workflow_name: run.name,
        head_branch: run.ref,
        head_sha: run.headSha,
        status: 'completed',
        conclusion: job.conclusion,
      });
    });
  }

  private runPayload(run: FakeRun) {
    return this.payload('workflow_run', 'completed', (p) => {
      Object.assign(p.workflow_run, {
        id: run.id,
        name: run.name,
        display_title: run.displayTitle,
        head_branch: run.ref,
        head_sha: run.headSha,
        path: `.github/workflows/${run.workflowId}`,
        status: 'completed',
        conclusion: run.conclusion,
        event: 'workflow_dispatch',
      });
      p.workflow.path = `.github/workflows/${run.workflowId}`;
    });
  }
}
