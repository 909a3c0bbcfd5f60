// The app inside a GitHub Actions job, with no server: the job's event (GITHUB_EVENT_NAME, the
// payload at GITHUB_EVENT_PATH) goes to the same Probot app the hosted mode runs, and a scheduled
// or manual run of the workflow is the nightly tick. @probot/adapter-github-actions does this for
// probot 13 only; this is the part of it forkflush needs.
//
// No webhook secret here, and none is needed: no server listens, and the event is the one GitHub
// wrote into the job's GITHUB_EVENT_PATH, handed to Probot's `receive` (no signature to verify).
// The hosted entry (server.ts) is the one that refuses to start without a secret. The job's run
// id stands for the delivery id: each event starts a run of its own, and re-running that run
// hands the app the same event again, which it acts on once.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import * as core from '@actions/core';
import { type Options, Probot } from 'probot';
import { UserError } from '../core/errors.js';
import { GITHUB } from '../core/names.js';
import { GitHubApi } from '../github/api.js';
import { recordKeyFrom } from '../github/record-seal.js';
import { forkflushApp, nightlyTick } from './app.js';
import { RELEASE } from './app-context.js';

/** The repository's id, as the runner gives it (GITHUB_REPOSITORY_ID), or null (then read once). */
function repositoryIdOf(env: NodeJS.ProcessEnv): number | null {
  const id = Number(env.GITHUB_REPOSITORY_ID);
  return Number.isSafeInteger(id) && id > 0 ? id : null;
}

/** The events forkflushApp handles. Actions never starts a workflow on workflow_job; a hosted app gets it. */
const WEBHOOK_EVENTS = [
  'issues',
  'issue_comment',
  'pull_request',
  'pull_request_review',
  'workflow_run',
  'workflow_job',
];
/** A run of the workflow on its schedule, or by hand: look at every run of the repository now. */
const TICK_EVENTS = ['schedule', 'workflow_dispatch'];
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

export interface ActionsModeOptions {
  /** Tests pass one without retries and throttling; production keeps Probot's defaults (both on). */
  Octokit?: Options['Octokit'];
  /** Probot's log level; default: LOG_LEVEL, else info. */
  logLevel?: Options['logLevel'];
  /** The clock of the app and of the nightly tick. */
  now?: () => Date;
  /** Where forkflush's own lines go; default: the job's log, errors as annotations. */
  out?: { info: (line: string) => void; error: (line: string) => void };
}

/** Handles the job's event and returns the process's exit code. */
export async function runInActions(env = process.env, options: ActionsModeOptions = {}): Promise<number> {
  const out = options.out ?? { info: core.info, error: core.error };
  const event = env.GITHUB_EVENT_NAME ?? '';
  let probot: Probot | undefined;
  try {
    if (!event) throw new UserError('GITHUB_EVENT_NAME is not set: this runs as a step of a GitHub Actions job');
    if (!WEBHOOK_EVENTS.includes(event) && !TICK_EVENTS.includes(event)) {
      out.info(`forkflush: nothing to do on a ${event} event`);
      return 0;
    }
    const now = options.now ?? (() => new Date());
    probot = new Probot({
      githubToken: tokenOf(env),
      baseUrl: env.GITHUB_API_URL || 'https://api.github.com',
      logLevel: options.logLevel ?? logLevelOf(env),
      Octokit: options.Octokit,
    });
    const recordKey = recordKeyFrom(env);
    // The tick's workflow runs only while a run needs it: the app turns it on and off.
    await probot.load(forkflushApp({ now, recordKey, tick: GITHUB.tickWorkflow }));
    if (TICK_EVENTS.includes(event)) {
      const { owner, repo } = repositoryOf(env);
      const touched = await nightlyTick(
        new GitHubApi(await probot.auth(), owner, repo, recordKey, RELEASE, repositoryIdOf(env)),
        now,
        out.info,
        GITHUB.tickWorkflow,
      );
      out.info(`forkflush: nightly tick: ${touched.length > 0 ? `synced ${touched.join(', ')}` : 'no run to sync'}`);
      return 0;
    }
    const payload = await payloadOf(env);
    // Without a run id (not a real job), a delivery id of its own: never one seen before.
    const id = env.GITHUB_RUN_ID || `actions-${randomUUID()}`;
    // Probot logs each failing handler with its stack before this rejects.
    await probot.receive({ id, name: event as never, payload: payload as never });
    const action = typeof payload.action === 'string' ? `.${payload.action}` : '';
    out.info(`forkflush: handled ${event}${action} (run ${id})`);
    return 0;
  } catch (e) {
    if (e instanceof UserError) {
      out.error(`forkflush: ${e.message}`);
      return 1;
    }
    // Probot logged each failed handler already; a nightly tick's failed runs are said here.
    if (!(e instanceof AggregateError)) probot?.log.error(e);
    else if (TICK_EVENTS.includes(event)) for (const inner of e.errors) probot?.log.error(inner);
    out.error(`forkflush: the ${event} event failed: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
    return 1;
  }
}

/**
 * An installation token the user minted (actions/create-github-app-token) acts as their GitHub
 * App: its check runs belong to the app and its events start workflows. GITHUB_TOKEN does neither.
 */
function tokenOf(env: NodeJS.ProcessEnv): string {
  const token = env.FORKFLUSH_APP_TOKEN?.trim() || env.GITHUB_TOKEN?.trim();
  if (!token) {
    throw new UserError(
      "no token: set the step's env GITHUB_TOKEN to github.token, or FORKFLUSH_APP_TOKEN to a GitHub App installation token",
    );
  }
  return token;
}

function logLevelOf(env: NodeJS.ProcessEnv): Options['logLevel'] {
  const level = env.LOG_LEVEL as (typeof LOG_LEVELS)[number] | undefined;
  return level && LOG_LEVELS.includes(level) ? level : 'info';
}

function repositoryOf(env: NodeJS.ProcessEnv): { owner: string; repo: string } {
  const [owner, repo, ...rest] = (env.GITHUB_REPOSITORY ?? '').split('/');
  if (!owner || !repo || rest.length > 0) {
    throw new UserError(`GITHUB_REPOSITORY is "${env.GITHUB_REPOSITORY ?? ''}", not owner/repo`);
  }
  return { owner, repo };
}

async function payloadOf(env: NodeJS.ProcessEnv): Promise<Record<string, unknown>> {
  const path = env.GITHUB_EVENT_PATH;
  if (!path) throw new UserError('GITHUB_EVENT_PATH is not set: this runs as a step of a GitHub Actions job');
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new UserError(`cannot read the event payload ${path}: ${(e as NodeJS.ErrnoException).code ?? e}`);
  }
  try {
    const payload: unknown = JSON.parse(text);
    if (typeof payload !== 'object' || payload === null) throw new Error('not an object');
    return payload as Record<string, unknown>;
  } catch (e) {
    throw new UserError(`the event payload ${path} is not a JSON object: ${(e as Error).message}`);
  }
}
