// `/autoresearch map` on GitHub: a writer asks for the run's idea map; the app checks it can be
// made (a graded episode, enough snapshots, valid `map:` settings on the default branch) before
// anything is spent, records the ask in run.json once per comment, and dispatches one worker job
// (matrix value `map`, action/map-job.ts). When that job ends, the map it pushed to
// refs/forkflush/<run>/map is shown on the issue once per map commit, or its failure in one line,
// and the record keeps the map for the status comment and the result pull request. The tick looks
// for a job's end no event reported (with GITHUB_TOKEN alone, none does).
import { CONFIG_PATH, type Config, ConfigError, parseConfig } from '../core/config.js';
import { mapAskProblem, mapComment, mapDrawnLine, mapFailedComment, mapImageUrl } from '../core/github-map.js';
import { parseMapRecord } from '../core/map/record.js';
import { GITHUB, MAP_JOB, mapRef, mapRunTitle, stateRef } from '../core/names.js';
import { deliveryKey } from '../core/seen-events.js';
import { amendOnce, type ChangeRequest, wakeTick } from './amend.js';
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
  // Actions mode: the tick sees the map's end (GITHUB_TOKEN alone hears no workflow_run).
  await wakeTick(ctx);
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
  const branch = await api.defaultBranch();
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
  const branch = await ctx.api.defaultBranch();
  const runId = await ctx.api.workflows.dispatch(GITHUB.workflow, branch, {
    run: stored.state.id,
    round: MAP_JOB,
    episodes: JSON.stringify([MAP_JOB]),
  });
  const at = ctx.now.toISOString();
  await amendOnce(ctx.api, stored, 'forkflush: map dispatched', [], (s) => ({
    state: s.state,
    files: s.files.map
      ? { ...s.files, map: { ...s.files.map, dispatched: { at, branch, ...(runId !== null ? { runId } : {}) } } }
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
 * (once per workflow run); the record keeps which run ended and the map, for the status comment
 * (one sync shows it) and the tick (it stops looking).
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
  const shown = await showMap(ctx.api, end);
  if ('problem' in shown)
    await ctx.api.issues.commentOnce(issue, `map-failed:${end.workflowRun}`, mapFailedComment(shown.problem, end.url));
  else await ctx.api.issues.commentOnce(issue, `map:${shown.drawn.commit}`, shown.comment);
  const drawn = 'drawn' in shown ? shown.drawn : map.drawn;
  if (map.ended === end.workflowRun && map.drawn?.commit === drawn?.commit) return;
  const next = await amendOnce(ctx.api, stored, 'forkflush: map ended', [deliveryKey(end.delivery)], (s) => ({
    state: s.state,
    // A newer ask's map is not this run's to end.
    files:
      s.files.map?.asked === map.asked
        ? { ...s.files, map: { ...s.files.map, ended: end.workflowRun, ...(drawn ? { drawn } : {}) } }
        : s.files,
  }));
  // The status comment (and a result pull request) show the map from now on.
  if (next && 'drawn' in shown) await syncOrYield(ctx, next);
}

/** The map the ended job pushed (its comment, and what the record keeps), or why there is none. */
async function showMap(
  api: GitHubApi,
  end: MapJobEnd,
): Promise<{ problem: string } | { comment: string; drawn: { commit: string; image: string; line: string } }> {
  if (end.conclusion !== 'success') return { problem: `its job ended: ${end.conclusion ?? 'unknown'}` };
  const head = await api.refSha(mapRef(end.run));
  const text = head ? await api.readFile('map.json', head) : null;
  if (!head || text === null) return { problem: `its job pushed no map to ${mapRef(end.run)}` };
  const record = parseMapRecord(text);
  if ('problem' in record) return { problem: `${mapRef(end.run)}: map.json: ${record.problem}` };
  const tree = await api.treeFiles((await api.commit(head)).tree, ['map.png']);
  const image = mapImageUrl(end.repositoryUrl, head, tree?.some((f) => f.path === 'map.png') ?? false);
  return {
    comment: mapComment(record, { image, run: end.run, commit: head, ...(end.url ? { jobUrl: end.url } : {}) }),
    drawn: { commit: head, image, line: mapDrawnLine(record) },
  };
}

/** How long the tick looks for a map job's workflow run that GitHub cannot find, after its dispatch. */
const LOST_MAP_MS = 24 * 60 * 60 * 1000;

/** Whether a map job's end is still awaited, as far as the record tells (the tick stays on for it). */
export function mapAwaited(files: GitHubRunRecord, now: Date): boolean {
  const sent = files.map?.dispatched;
  return !!sent && files.map?.ended === undefined && now.getTime() - Date.parse(sent.at) < LOST_MAP_MS;
}

/**
 * The tick's look at a map asked for whose job's end no event reported (Actions mode with
 * GITHUB_TOKEN alone hears none; a hosted app can lose one): once the workflow run its dispatch
 * started has completed, it ends as that event would have. Whether the map is still to come.
 */
export async function mapOnTick(ctx: SyncContext, run: string): Promise<boolean> {
  const stored = await ctx.api.loadRun(stateRef(run));
  const map = stored?.files.map;
  if (!stored || !map?.dispatched || map.ended !== undefined) return false;
  const { workflows } = ctx.api;
  const id = map.dispatched.runId ?? (await latestMapRun(ctx.api, run));
  const w = id === null ? null : await workflows.run(id);
  if (w?.status === 'completed') {
    await mapJobEnded(ctx, {
      run,
      workflowRun: w.id,
      conclusion: w.conclusion,
      headBranch: w.head_branch,
      url: w.html_url ?? null,
      repositoryUrl: w.repository.html_url,
      delivery: `tick:map:${w.id}`,
    });
    return false;
  }
  if (w || ctx.now.getTime() - Date.parse(map.dispatched.at) < LOST_MAP_MS) return true;
  // Deleted, or never started: said once, and the tick stops looking.
  const why = `GitHub has no workflow run of its job (${id === null ? `none is titled "${mapRunTitle(run)}"` : `run ${id} is gone`}), a day after its dispatch`;
  await ctx.api.issues.commentOnce(stored.files.issue, `map-lost:${map.asked}`, mapFailedComment(why, null));
  return false;
}

/** The newest dispatched run titled as the run's map job, or null. */
async function latestMapRun(api: GitHubApi, run: string): Promise<number | null> {
  const runs = await api.workflows.runsTitled(GITHUB.workflow, mapRunTitle(run));
  return runs.reduce<number | null>((a, b) => (a !== null && a > b.id ? a : b.id), null);
}

/** Why a workflow run is not the one the latest map dispatch started, on the default branch, or null. */
async function notTheMapRunProblem(api: GitHubApi, files: GitHubRunRecord, end: MapJobEnd): Promise<string | null> {
  const branch = files.map?.dispatched?.branch ?? files.defaultBranch;
  if (end.headBranch !== branch) return `its run is on ${end.headBranch ?? 'an unknown branch'}, not ${branch}`;
  const known = files.map?.dispatched?.runId;
  if (known !== undefined)
    return known === end.workflowRun
      ? null
      : `the map's dispatch started workflow run ${known}, not ${end.workflowRun}`;
  const latest = await latestMapRun(api, end.run);
  if (latest === null) return `no dispatched run of the worker workflow is titled "${mapRunTitle(end.run)}"`;
  return latest === end.workflowRun
    ? null
    : `the map's latest dispatch started workflow run ${latest}, not ${end.workflowRun}`;
}
