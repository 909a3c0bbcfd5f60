// The agent's logs as an artifact of the workflow run: whether this job can upload one (the
// Actions results service, not GitHub Enterprise Server), its name, and the upload, bounded in time.
import type { ArtifactClient } from '@actions/artifact';
import { ARTIFACT_UPLOAD_TIMEOUT_MS, FAILURE_QUOTE_MAX_CHARS } from '../core/bounds.js';
import { plainText } from '../core/text.js';
/**
 * What forkflush uses of @actions/artifact: `uploadArtifact` of its `ArtifactClient` interface
 * (lib/internal/client.d.ts of @actions/artifact 6.2.1: name, files, root directory, options;
 * it answers {id, size, digest}). The client reads ACTIONS_RUNTIME_TOKEN and ACTIONS_RESULTS_URL
 * from process.env, which every job's JavaScript action gets, whatever the workflow's
 * `permissions:` (those scope GITHUB_TOKEN only); it refuses GitHub Enterprise Server.
 */
export type UploadClient = Pick<ArtifactClient, 'uploadArtifact'>;

export type ArtifactResult =
  | { uploaded: true; name: string; id: number | null; url: string | null }
  | { uploaded: false; name: string; why: string };

/** The Actions runtime's artifact service, as the job got it (before forkflush forgot it). */
export interface ArtifactService {
  token?: string | undefined;
  resultsUrl?: string | undefined;
  serverUrl?: string | undefined;
  repository?: string | undefined;
  runId?: string | undefined;
}

/** The artifact of an episode's logs: unique in a workflow run, a re-run's attempt included. */
export function artifactName(run: string, episode: string, attempt?: string): string {
  const n = Number(attempt);
  return `forkflush-${run}-${episode}${Number.isInteger(n) && n > 1 ? `-attempt-${n}` : ''}`;
}

/** Why the artifact service cannot be used here, or null when it can. */
export function artifactUnavailable(s: ArtifactService): string | null {
  if (!s.token) return 'ACTIONS_RUNTIME_TOKEN is not set (not a GitHub Actions job)';
  if (!s.resultsUrl)
    return "ACTIONS_RESULTS_URL is not set (this runner has no artifact service, which @actions/artifact's v4 artifacts need)";
  if (isGhes(s.serverUrl)) return '@actions/artifact does not support GitHub Enterprise Server';
  return null;
}

/** The rule of @actions/artifact (shared/config.ts isGhes): not github.com, *.ghe.com or *.localhost. */
function isGhes(serverUrl: string | undefined): boolean {
  let host: string;
  try {
    host = new URL(serverUrl || 'https://github.com').hostname.toUpperCase();
  } catch {
    return false;
  }
  return host !== 'GITHUB.COM' && !host.endsWith('.GHE.COM') && !host.endsWith('.LOCALHOST');
}

/**
 * Uploads the files as one artifact. Never throws: an artifact service that is missing, refuses
 * or fails leaves the episode as it is, and the result says why. The runtime's variables are put
 * back into `env` (process.env, which the client reads) for the upload only: the agent is gone,
 * and nothing else runs meanwhile.
 */
export async function uploadArtifact(o: {
  client: () => Promise<UploadClient>;
  name: string;
  files: string[];
  root: string;
  service: ArtifactService;
  env: NodeJS.ProcessEnv;
  timeoutMs?: number;
}): Promise<ArtifactResult> {
  const why = artifactUnavailable(o.service);
  if (why) return { uploaded: false, name: o.name, why };
  const vars = { ACTIONS_RUNTIME_TOKEN: o.service.token, ACTIONS_RESULTS_URL: o.service.resultsUrl };
  const before = { ACTIONS_RUNTIME_TOKEN: o.env.ACTIONS_RUNTIME_TOKEN, ACTIONS_RESULTS_URL: o.env.ACTIONS_RESULTS_URL };
  let timer: NodeJS.Timeout | undefined;
  try {
    Object.assign(o.env, vars);
    const client = await o.client();
    // The client retries and waits on a stalled upload for minutes: the job does not wait that long.
    const ms = o.timeoutMs ?? ARTIFACT_UPLOAD_TIMEOUT_MS;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer in ${ms / 1000} s`)), ms);
    });
    const r = await Promise.race([client.uploadArtifact(o.name, o.files, o.root, {}), timeout]);
    const id = typeof r.id === 'number' ? r.id : null;
    const { serverUrl, repository, runId } = o.service;
    const url =
      id !== null && serverUrl && repository && runId
        ? `${serverUrl.replace(/\/+$/, '')}/${repository}/actions/runs/${runId}/artifacts/${id}`
        : null;
    return { uploaded: true, name: o.name, id, url };
  } catch (e) {
    return {
      uploaded: false,
      name: o.name,
      why: `the upload failed: ${plainText((e as Error).message ?? String(e)).slice(0, FAILURE_QUOTE_MAX_CHARS)}`,
    };
  } finally {
    clearTimeout(timer);
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete o.env[k];
      else o.env[k] = v;
    }
  }
}
