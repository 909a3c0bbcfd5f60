// GitHub Actions in the fake: a workflow_dispatch reads the workflow file at the dispatched ref,
// expands its matrix (workflow.ts) into a run of queued jobs, and a job, when the test runs it,
// really runs the worker Action (`node dist/index.js`) with the environment the Actions runner
// gives a step: GITHUB_*, RUNNER_*, INPUT_*, the output and summary files, and the step's `env`.
// Steps of other actions (actions/setup-node, ...) are skipped: the runner here already has Node.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseOutputs } from '../integration/action-repo.js';
import { type DispatchedJob, dispatchWorkflow } from './workflow.js';

const ROOT = join(import.meta.dirname, '..', '..');
/** The worker Action as its users get it: action.yml's `runs.main`. */
export const ACTION_MAIN = join(ROOT, 'dist', 'index.js');

/** What a job does when run: the Action's own outcome, or a fault the test chose. */
export type JobFate = 'run' | 'fail' | 'hang' | 'silent';

export interface FakeJob {
  id: number;
  runId: number;
  name: string;
  spec: DispatchedJob;
  status: 'queued' | 'in_progress' | 'completed';
  conclusion: 'success' | 'failure' | 'cancelled' | null;
  /** The Action's outputs (GITHUB_OUTPUT) and its log, once it ran. */
  outputs: Record<string, string>;
  log: string;
  /** The environment the Action step started with. */
  env: Record<string, string>;
}

export interface FakeRun {
  id: number;
  workflowId: string;
  name: string;
  displayTitle: string;
  ref: string;
  headSha: string;
  inputs: Record<string, string>;
  status: 'queued' | 'in_progress' | 'completed';
  conclusion: 'success' | 'failure' | 'cancelled' | null;
  jobs: FakeJob[];
  /** GitHub's run_attempt: 1, and one more for each re-run. */
  attempt: number;
}

export interface RunnerContext {
  root: string;
  serverUrl: string;
  apiUrl: string;
  owner: string;
  repo: string;
  /** A fresh token for one job (GitHub's GITHUB_TOKEN): it may read and push the repository. */
  jobToken(): string;
  /** The workflow file's text at a commit, or undefined. */
  readFile(sha: string, path: string): string | undefined;
  /** The repository as the event payload shows it (its `private` flag, say). */
  repository: Record<string, unknown>;
  /** Repository secrets (`secrets.X`). */
  secrets: Record<string, string>;
}

export class FakeActions {
  /** The Action a job runs: the built one users get, or one a test built from src/ (buildActionFromSource). */
  static actionMain = ACTION_MAIN;
  readonly runs: FakeRun[] = [];
  private nextId = 9_000_001;

  constructor(private readonly ctx: RunnerContext) {}

  /** A workflow_dispatch: throws (GitHub answers 422) if the workflow cannot take it. */
  dispatch(workflowId: string, ref: string, headSha: string, inputs: Record<string, string>): FakeRun {
    const path = `.github/workflows/${workflowId}`;
    const text = this.ctx.readFile(headSha, path);
    if (text === undefined) throw new Error(`Not Found: ${path} at ${ref}`);
    const spec = dispatchWorkflow(text, inputs, {
      secrets: this.ctx.secrets,
      github: {
        repository: `${this.ctx.owner}/${this.ctx.repo}`,
        ref: `refs/heads/${ref}`,
        event_name: 'workflow_dispatch',
      },
    });
    const id = this.nextId++;
    const run: FakeRun = {
      id,
      workflowId,
      name: spec.name,
      displayTitle: spec.displayTitle,
      ref,
      headSha,
      inputs,
      status: 'queued',
      conclusion: null,
      jobs: [],
      attempt: 1,
    };
    for (const job of spec.jobs) {
      run.jobs.push({
        id: this.nextId++,
        runId: id,
        name: job.name,
        spec: job,
        status: 'queued',
        conclusion: null,
        outputs: {},
        log: '',
        env: {},
      });
    }
    this.runs.push(run);
    return run;
  }

  queuedJobs(): FakeJob[] {
    return this.runs.flatMap((r) => r.jobs.filter((j) => j.status === 'queued'));
  }

  runOf(job: FakeJob): FakeRun {
    return this.runs.find((r) => r.id === job.runId) as FakeRun;
  }

  cancel(runId: number): boolean {
    const run = this.runs.find((r) => r.id === runId);
    if (!run || run.status === 'completed') return false;
    for (const job of run.jobs) {
      if (job.status !== 'completed') Object.assign(job, { status: 'completed', conclusion: 'cancelled' });
    }
    Object.assign(run, { status: 'completed', conclusion: 'cancelled' });
    return true;
  }

  /** "Re-run failed jobs" in the Actions tab: the same run (its id kept), its next attempt, its failed jobs queued again. */
  rerunFailedJobs(runId: number): void {
    const run = this.runs.find((r) => r.id === runId);
    if (run?.status !== 'completed') throw new Error(`workflow run ${runId} is not completed: no re-run`);
    Object.assign(run, { status: 'queued', conclusion: null, attempt: run.attempt + 1 });
    for (const job of run.jobs)
      if (job.conclusion !== 'success') Object.assign(job, { status: 'queued', conclusion: null, log: '' });
  }

  /**
   * Runs a queued job: `run` runs its steps, `fail` fails it before the Action starts, `hang`
   * stops the Action at the job's timeout (here: `hangMs`), `silent` leaves it queued this time
   * (a job GitHub does not report yet). Returns the job.
   */
  async runJob(job: FakeJob, fate: JobFate = 'run', hangMs = 200): Promise<FakeJob> {
    const run = this.runOf(job);
    if (fate === 'silent' || job.status === 'completed') return job;
    job.status = 'in_progress';
    run.status = 'in_progress';
    let ok = fate !== 'fail';
    if (ok) {
      for (const step of job.spec.steps) {
        if (!step.uses || !isForkflushAction(step.uses)) continue;
        ok = await this.runAction(job, step, fate === 'hang' ? hangMs : 20 * 60_000);
        if (!ok) break;
      }
    }
    // A job of a run cancelled meanwhile was completed (cancelled) by cancel().
    if ((job.status as FakeJob['status']) === 'completed') return job;
    job.status = 'completed';
    job.conclusion = ok ? 'success' : 'failure';
    if (run.jobs.every((j) => j.status === 'completed')) {
      run.status = 'completed';
      run.conclusion = run.conclusion ?? (run.jobs.every((j) => j.conclusion === 'success') ? 'success' : 'failure');
    }
    return job;
  }

  private async runAction(job: FakeJob, step: DispatchedJob['steps'][number], timeoutMs: number): Promise<boolean> {
    const dir = join(this.ctx.root, 'jobs', String(job.id));
    const workspace = join(dir, 'workspace');
    const temp = join(dir, 'temp');
    mkdirSync(workspace, { recursive: true });
    mkdirSync(temp, { recursive: true });
    const files = Object.fromEntries(
      ['output', 'summary', 'env', 'path', 'state', 'event'].map((f) => [f, join(dir, `${f}.txt`)]),
    ) as Record<string, string>;
    for (const f of Object.values(files)) writeFileSync(f, '');
    const run = this.runOf(job);
    writeFileSync(
      files.event as string,
      JSON.stringify({ inputs: run.inputs, ref: `refs/heads/${run.ref}`, repository: this.ctx.repository }),
    );
    const token = this.ctx.jobToken();
    // action.yml's inputs: `token` defaults to github.token.
    const inputs: Record<string, string> = { token, ...step.with };
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      CI: 'true',
      GITHUB_ACTIONS: 'true',
      GITHUB_SERVER_URL: this.ctx.serverUrl,
      GITHUB_API_URL: this.ctx.apiUrl,
      GITHUB_GRAPHQL_URL: `${this.ctx.apiUrl}/graphql`,
      GITHUB_REPOSITORY: `${this.ctx.owner}/${this.ctx.repo}`,
      GITHUB_REPOSITORY_OWNER: this.ctx.owner,
      GITHUB_RUN_ID: String(run.id),
      GITHUB_RUN_NUMBER: '1',
      GITHUB_RUN_ATTEMPT: String(run.attempt),
      GITHUB_JOB: job.spec.key,
      GITHUB_WORKFLOW: run.name,
      GITHUB_EVENT_NAME: 'workflow_dispatch',
      GITHUB_EVENT_PATH: files.event as string,
      GITHUB_REF: `refs/heads/${run.ref}`,
      GITHUB_REF_NAME: run.ref,
      GITHUB_SHA: run.headSha,
      GITHUB_ACTOR: 'forkflush[bot]',
      GITHUB_ACTION: '__forkflush',
      GITHUB_WORKSPACE: workspace,
      GITHUB_OUTPUT: files.output as string,
      GITHUB_STEP_SUMMARY: files.summary as string,
      GITHUB_ENV: files.env as string,
      GITHUB_PATH: files.path as string,
      GITHUB_STATE: files.state as string,
      RUNNER_OS: 'Linux',
      RUNNER_ARCH: 'X64',
      RUNNER_NAME: 'GitHub Actions 1',
      RUNNER_TEMP: temp,
      RUNNER_TOOL_CACHE: join(dir, 'toolcache'),
      ACTIONS_RUNTIME_TOKEN: `runtime-${token}`,
      ACTIONS_RUNTIME_URL: `${this.ctx.serverUrl}/_runtime/`,
      ACTIONS_ID_TOKEN_REQUEST_TOKEN: `oidc-${token}`,
      ACTIONS_ID_TOKEN_REQUEST_URL: `${this.ctx.serverUrl}/_oidc`,
      ...step.env,
    };
    for (const [name, value] of Object.entries(inputs)) env[`INPUT_${name.replace(/ /g, '_').toUpperCase()}`] = value;
    job.env = env;
    const exit = await new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, [FakeActions.actionMain], {
        cwd: workspace,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.on('data', (d) => {
        job.log += d;
      });
      child.stderr.on('data', (d) => {
        job.log += d;
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve(code);
      });
    });
    job.outputs = parseOutputs(readFileSync(files.output as string, 'utf8'));
    return exit === 0;
  }
}

/** The forkflush Action, however a workflow names it (owner/forkflush@ref, ./, a path). */
function isForkflushAction(uses: string): boolean {
  return /(^|\/)forkflush(@|$)/.test(uses) || uses === './';
}
