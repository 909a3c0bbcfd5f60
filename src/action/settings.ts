// What one Action step needs to know, checked before anything touches git: the run and episode
// (the inputs) and where the job's repository, workspace and temp folder are (the runner's env).
import { join } from 'node:path';
import { parseContextKey } from './contexts.js';

export interface ActionInputs {
  run: string;
  episode: string;
  token: string;
  /** FORKFLUSH_CONTEXT_KEY, from the `context-key` input (or that variable); empty: none. */
  contextKey?: string;
}

export interface ActionSettings {
  run: string;
  episode: string;
  /** Authenticates fetches and pushes; never written to disk or given to the agent. */
  token: string;
  /** The repository, e.g. https://github.com/owner/repo.git. */
  remoteUrl: string;
  /** The agent's checkout: GITHUB_WORKSPACE. */
  workspace: string;
  /** forkflush's private folder outside the checkout: records repository, context, scratch. */
  privateDir: string;
  /** Encrypts the contexts pushed to the forge (null: none). */
  contextKey: Buffer | null;
  /** This job's workflow run on the web (the check run links it), or null outside a run. */
  workflowRunUrl: string | null;
  /** This job's workflow run (GITHUB_RUN_ID), or null outside a run. */
  workflowRunId: number | null;
  /** Its attempt (GITHUB_RUN_ATTEMPT): 1, and one more for each re-run of the workflow run. */
  runAttempt: number;
}

// Both end up in ref names, so they are held to what a ref may safely contain.
const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const EPISODE_ID = /^(r\d+\.b\d+|base|map)$/;

export function parseSettings(inputs: ActionInputs, env: NodeJS.ProcessEnv): ActionSettings {
  const run = inputs.run.trim();
  const episode = inputs.episode.trim();
  if (!RUN_ID.test(run) || run.includes('..') || run.endsWith('.lock')) {
    throw new Error(`input run: "${run}" is not a run id (letters, digits, '.', '_', '-', e.g. issue-42)`);
  }
  if (!EPISODE_ID.test(episode)) {
    throw new Error(
      `input episode: "${episode}" is not an episode id (r<round>.b<branch>, e.g. r3.b1, base for the initial workspace's grade, or map for the idea map)`,
    );
  }
  const need = (name: string): string => {
    const value = env[name]?.trim();
    if (!value) throw new Error(`${name} is not set: this Action runs in a GitHub Actions job`);
    return value;
  };
  const server = need('GITHUB_SERVER_URL').replace(/\/+$/, '');
  const repository = need('GITHUB_REPOSITORY');
  return {
    run,
    episode,
    token: inputs.token.trim(),
    remoteUrl: `${server}/${repository}.git`,
    workspace: need('GITHUB_WORKSPACE'),
    privateDir: join(need('RUNNER_TEMP'), 'forkflush'),
    contextKey: inputs.contextKey?.trim() ? parseContextKey(inputs.contextKey) : null,
    workflowRunUrl: workflowRunUrl(server, repository, env),
    workflowRunId: /^\d+$/.test(env.GITHUB_RUN_ID?.trim() ?? '') ? Number(env.GITHUB_RUN_ID) : null,
    runAttempt: /^\d+$/.test(env.GITHUB_RUN_ATTEMPT?.trim() ?? '') ? Number(env.GITHUB_RUN_ATTEMPT) : 1,
  };
}

/**
 * Where a job keeps its things in its private folder: the records repository, the episode's
 * scratch folder (its logs: worker/boundary.ts episodeLogs) and its context folder. The log
 * report reads them from here too, also after a job that failed without an outcome.
 */
export function jobPlaces(s: Pick<ActionSettings, 'privateDir' | 'episode'>): {
  records: string;
  scratch: string;
  context: string;
} {
  return {
    records: join(s.privateDir, 'records.git'),
    scratch: join(s.privateDir, 'episode'),
    context: join(s.privateDir, 'context', s.episode),
  };
}

/** GITHUB_RUN_ID and GITHUB_RUN_ATTEMPT as the run's page: what the episode's check run links to. */
function workflowRunUrl(server: string, repository: string, env: NodeJS.ProcessEnv): string | null {
  const run = env.GITHUB_RUN_ID?.trim() ?? '';
  const attempt = env.GITHUB_RUN_ATTEMPT?.trim() ?? '';
  if (!/^\d+$/.test(run)) return null;
  return `${server}/${repository}/actions/runs/${run}${/^\d+$/.test(attempt) ? `/attempts/${attempt}` : ''}`;
}
