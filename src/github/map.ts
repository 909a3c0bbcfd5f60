// `/autoresearch map` on GitHub: a writer asks for the run's idea map; the app checks it can be
// made (a graded episode, enough snapshots, valid `map:` settings on the default branch) before
// anything is spent, records the ask in run.json once per comment, and dispatches one worker job
// (matrix value `map`, action/map-job.ts). When that job ends, the map it pushed to
// refs/forkflush/<run>/map is shown on the issue once per map commit, or its failure in one line,
// and the record keeps the map for the status comment and the result pull request.
import { CONFIG_PATH, type Config, ConfigError, parseConfig } from '../core/config.js';
import { mapAskProblem, mapComment, mapDrawnLine, mapFailedComment, mapImageUrl } from '../core/github-map.js';
import { parseMapRecord } from '../core/map/record.js';
import { GITHUB, MAP_JOB, mapRef, mapRunTitle, stateRef } from '../core/names.js';
import { deliveryKey } from '../core/seen-events.js';
import { amendOnce, type ChangeRequest } from './amend.js';
import type { GitHubApi, GitHubRunRecord, StoredRun } from './api.js';
import { type SyncContext, syncOrYield } from './sync.js';

/**
 * A writer's `/autoresearch map`: the reply when it is refused, else null (the job is dispatched,
 * once per comment: a redelivery finds the comment in the record and dispatches only if the
 * handler that recorded it died before its dispatch was recorded).
 */
export async function askMap(ctx: SyncContext, stored: StoredRun, asked: ChangeRequest): Promise<string | null> {
  const { files } = stored;
  const key = asked.keys[0] ?? '';
  if (files.map?.asked === key) {
    if (!files.map.dispatched) await dispatchMap(ctx, stored);
    return null;
  }
  const config = await mapConfig(ctx.api, files, stored.state.config);
  if ('problem' in config) return `forkflush drew no idea map: ${config.problem}`;
  const problem = mapAskProblem(stored.state, config.config);
  if (problem) return `forkflush drew no idea map: ${problem}`;
  const next = await amendOnce(ctx.api, stored, 'forkflush: map asked', asked.keys, (s) => ({
    state: s.state,
    files: {
      ...s.files,
      map: {
        asked: key,
        by: asked.by,
        at: ctx.now.toISOString(),
        ...(config.commit ? { configCommit: config.commit } : {}),
        ...(s.files.map?.drawn ? { drawn: s.files.map.drawn } : {}),
      },
    },
  }));
  if (next) await dispatchMap(ctx, next);
  return null;
}

/**
 * The config the map reads its `map:` settings from: the config file on the default branch as it
 * is now (a team may set map.judge after the run started), with the commit it was read at (the
 * job reads the same); the run's own config when the file is gone; or why it is not valid.
 */
async function mapConfig(
  api: GitHubApi,
  files: GitHubRunRecord,
  own: Config,
): Promise<{ config: Config; commit?: string } | { problem: string }> {
  const branch = files.defaultBranch;
  const commit = await api.refSha(`refs/heads/${branch}`);
  const text = commit ? await api.readFile(files.configPath, commit) : null;
  if (!commit || text === null) return { config: own };
  try {
    return { config: parseConfig(text, files.configPath ?? CONFIG_PATH), commit };
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return {
      problem: `the map reads its settings (\`map:\`) from \`${files.configPath}\` on \`${branch}\`, which is not valid. Fix these, then ask again:\n\n${e.problems.map((p) => `- ${p}`).join('\n')}`,
    };
  }
}

/** The map job's dispatch, recorded with the workflow run it started (only its job reports the map). */
async function dispatchMap(ctx: SyncContext, stored: StoredRun): Promise<void> {
  const runId = await ctx.api.workflows.dispatch(GITHUB.workflow, stored.files.defaultBranch, {
    run: stored.state.id,
    round: MAP_JOB,
    episodes: JSON.stringify([MAP_JOB]),
  });
  const at = ctx.now.toISOString();
  await amendOnce(ctx.api, stored, 'forkflush: map dispatched', [], (s) => ({
    state: s.state,
    files: s.files.map
      ? { ...s.files, map: { ...s.files.map, dispatched: { at, ...(runId !== null ? { runId } : {}) } } }
      : s.files,
  }));
}

/** What the app reads of the map job's end: its job's (a hosted app) or its workflow run's (Actions mode). */
export interface MapJobEnd {
  run: string;
  workflowRun: number;
  conclusion: string | null | undefined;
  headBranch: string | null | undefined;
  /** The job's or the workflow run's page. */
  url: string | null;
  /** The repository's page (html_url): the picture's link starts with it. */
  repositoryUrl: string;
  delivery: string;
}

/**
 * The map job ended: the map it pushed is shown on the issue (once per map commit), or its failure
 * (once per workflow run); the record keeps the map for the status comment, and one sync shows it.
 */
export async function mapJobEnded(ctx: SyncContext, end: MapJobEnd): Promise<void> {
  const stored = await ctx.api.loadRun(stateRef(end.run));
  const map = stored?.files.map;
  // A dispatch its handler did not live to record is found by its run's title (notTheMapRunProblem).
  if (!stored || !map) return;
  const why = await notTheMapRunProblem(ctx.api, stored.files, end);
  if (why) {
    ctx.log?.(`ignored the end of workflow run ${end.workflowRun}: ${why}`);
    return;
  }
  const issue = stored.files.issue;
  const failed = (reason: string) =>
    ctx.api.issues.commentOnce(issue, `map-failed:${end.workflowRun}`, mapFailedComment(reason, end.url));
  if (end.conclusion !== 'success') return void (await failed(`its job ended: ${end.conclusion ?? 'unknown'}`));
  const head = await ctx.api.refSha(mapRef(end.run));
  const text = head ? await ctx.api.readFile('map.json', head) : null;
  if (!head || text === null) return void (await failed(`its job pushed no map to ${mapRef(end.run)}`));
  const record = parseMapRecord(text);
  if ('problem' in record) return void (await failed(`${mapRef(end.run)}: map.json: ${record.problem}`));
  const tree = await ctx.api.treeFiles((await ctx.api.commit(head)).tree);
  const png = tree?.some((f) => f.path === 'map.png') ?? false;
  const image = mapImageUrl(end.repositoryUrl, head, png);
  await ctx.api.issues.commentOnce(
    issue,
    `map:${head}`,
    mapComment(record, { image, run: end.run, commit: head, ...(end.url ? { jobUrl: end.url } : {}) }),
  );
  if (map.drawn?.commit === head) return;
  const drawn = { commit: head, image, line: mapDrawnLine(record) };
  const next = await amendOnce(ctx.api, stored, 'forkflush: map drawn', [deliveryKey(end.delivery)], (s) => ({
    state: s.state,
    files: s.files.map ? { ...s.files, map: { ...s.files.map, drawn } } : s.files,
  }));
  // The status comment (and a result pull request) show the map from now on.
  if (next) await syncOrYield(ctx, next);
}

/** Why a workflow run is not the one the latest map dispatch started, on the default branch, or null. */
async function notTheMapRunProblem(api: GitHubApi, files: GitHubRunRecord, end: MapJobEnd): Promise<string | null> {
  if (end.headBranch !== files.defaultBranch)
    return `its run is on ${end.headBranch ?? 'an unknown branch'}, not ${files.defaultBranch}`;
  const known = files.map?.dispatched?.runId;
  if (known !== undefined)
    return known === end.workflowRun
      ? null
      : `the map's dispatch started workflow run ${known}, not ${end.workflowRun}`;
  const title = mapRunTitle(end.run);
  const latest = (await api.workflows.runsTitled(GITHUB.workflow, title)).reduce<number | null>(
    (a, b) => (a !== null && a > b.id ? a : b.id),
    null,
  );
  if (latest === null) return `no dispatched run of the worker workflow is titled "${title}"`;
  return latest === end.workflowRun
    ? null
    : `the map's latest dispatch started workflow run ${latest}, not ${end.workflowRun}`;
}
