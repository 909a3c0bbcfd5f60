// The run's record on GitHub (`state.json` and `run.json` on the run's state ref) and its
// compare-and-swap: how a handler saves what it did when another handler may have saved first.
import { createHash } from 'node:crypto';
import type { GitHubView, RunPhase } from '../core/github-text.js';
import { type RefsLayout, type RunRefs, refName, runRefs, stateRef } from '../core/names.js';
import { findEpisode, type RunState } from '../core/state.js';
import type { WorkDone } from '../core/work.js';
import type { GitHubApi, GitHubRunRecord, StoredRun } from './api.js';
import { ConflictError } from './requests.js';

/** Where the run keeps its work: records made before there was a choice are layout 1. */
export function layoutOf(files: GitHubRunRecord): RefsLayout {
  return files.refsLayout ?? 1;
}

/** The run's refs, in its layout. */
export function refsOf(state: RunState, files: GitHubRunRecord): RunRefs {
  return runRefs(state.id, layoutOf(files));
}

/** Where the run stands, as the texts on GitHub say it. */
export function phaseOf(state: RunState, files: GitHubRunRecord): RunPhase {
  return files.stopped ? 'stopped' : state.status === 'finished' ? 'finished' : 'running';
}

/** Where the run's work is, as the texts on GitHub name it. */
export function viewOf(state: RunState, files: GitHubRunRecord): GitHubView {
  const refs = refsOf(state, files);
  return {
    lineage: refName(refs.lineage(0, state.lineages.length)),
    best: refName(refs.best),
    issue: files.issue,
    resultPr: files.finalPr || null,
    ...(files.baseGrade ? { baseGrade: files.baseUngraded ? 'lost' : files.baseGrade } : {}),
    ...(files.overrides ? { overrides: files.overrides } : {}),
    ...(files.stopReason ? { stopReason: files.stopReason } : {}),
    ...(files.blocked ? { blocked: files.blocked } : {}),
    ...(files.map?.drawn ? { map: { image: files.map.drawn.image, line: files.map.drawn.line } } : {}),
    ...(files.resultAutomation?.length ? { automation: files.resultAutomation } : {}),
  };
}

/** The lineage that holds the run's result: the one of the best score (best-of-n keeps several), else the first. */
export function resultLineage(state: RunState): number {
  const best = state.best ? findEpisode(state, state.best.episode) : undefined;
  return best?.lineage ?? 0;
}

/** The commit the run's result is: the head of the lineage that holds its best score. */
export function resultCommit(state: RunState): string {
  const lineage = state.lineages[resultLineage(state)] ?? state.lineages[0];
  return lineage?.head ?? state.base.commit;
}

/**
 * What the record says was carried out, as the core's work list reads it. A run's result is
 * published once its pull request is open and (layout 2) its branch is at the result: a round
 * after the end (a nightly one) that moves the lineage makes it due again.
 */
export function workDone(state: RunState, files: GitHubRunRecord): WorkDone {
  const at = layoutOf(files) === 1 || files.resultHead === resultCommit(state);
  return {
    opened: Object.keys(files.dispatched).map(Number),
    published: Object.keys(files.published),
    settled: files.settled,
    best: files.bestCommit,
    finished: files.finalPr !== null && at,
  };
}

/**
 * Saves what a handler did. When another handler saved first (a conflict), the latest record is
 * read again and this handler's facts are merged into it: rounds dispatched and settled, results
 * published, the best branch, the final pull request, the comment, and the claims it released.
 *
 * Server errors and lost connections are not retried here: Octokit's retry plugin already repeats
 * each request of the save (3 times, with backoff), and each is safe to repeat (saveRun sees its
 * own commit on the ref as done). A save that still fails leaves the work claimed but not recorded:
 * the handler that takes the claim over once it is stale checks what was done before redoing it.
 */
export async function saveDone(
  api: GitHubApi,
  state: RunState,
  mine: GitHubRunRecord,
  released: string[],
  expected: string,
  completedChecks: readonly number[] = [],
  /** This handler stopped the run (its issue gone): the stop stands over what saved meanwhile. */
  stopped = false,
): Promise<StoredRun> {
  let candidate = { state, files: mine, sha: expected };
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const sha = await api.saveRun(
        stateRef(state.id),
        candidate.state,
        candidate.files,
        candidate.sha,
        'forkflush: work done',
      );
      return { ...candidate, sha };
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
      const latest = await api.loadRun(stateRef(state.id));
      if (!latest) throw e;
      candidate = {
        state: latest.state,
        files: mergeDone(latest.files, mine, released, completedChecks, stopped),
        sha: latest.sha,
      };
    }
  }
  throw new ConflictError(`${state.id}: the run kept changing; could not record the work done in 5 tries`);
}

/**
 * The latest record, with what `mine` did added, the claims `released` given back and the orphaned
 * checks it completed taken off the list.
 */
function mergeDone(
  latest: GitHubRunRecord,
  mine: GitHubRunRecord,
  released: string[],
  completedChecks: readonly number[],
  stopped: boolean,
): GitHubRunRecord {
  const claims = { ...latest.claims };
  for (const key of released) delete claims[key];
  const { orphanChecks: listed, blocked: _theirs, ...rest } = latest;
  const orphanChecks = listed?.filter((c) => !completedChecks.includes(c)) ?? [];
  return {
    ...rest,
    ...(orphanChecks.length > 0 ? { orphanChecks } : {}),
    dispatched: { ...latest.dispatched, ...mine.dispatched },
    published: { ...latest.published, ...mine.published },
    settled: [...new Set([...latest.settled, ...mine.settled])].sort((a, b) => a - b),
    finalPr: latest.finalPr ?? mine.finalPr,
    ...pick(mine, latest, 'resultHead'),
    ...pick(mine, latest, 'resultDigest'),
    ...pick(mine, latest, 'resultAutomation'),
    ...pick(mine, latest, 'runCheck'),
    // What this handler last tried is what holds the run up now, or nothing does.
    ...(mine.blocked ? { blocked: mine.blocked } : {}),
    ...(mine.checks || latest.checks ? { checks: { ...latest.checks, ...mine.checks } } : {}),
    bestCommit: mine.bestCommit ?? latest.bestCommit,
    commentId: latest.commentId ?? mine.commentId,
    commentDigest: mine.commentDigest ?? latest.commentDigest,
    claims,
    ...(stopped && mine.issueGone ? { issueGone: latest.issueGone ?? mine.issueGone, stopped: true } : {}),
  };
}

/** A field of the record as this handler left it, else as the latest record has it. */
function pick<K extends keyof GitHubRunRecord>(
  mine: GitHubRunRecord,
  latest: GitHubRunRecord,
  key: K,
): Partial<Pick<GitHubRunRecord, K>> {
  const value = mine[key] ?? latest[key];
  return value === undefined ? {} : ({ [key]: value } as Partial<Pick<GitHubRunRecord, K>>);
}

/** A short digest of a text forkflush keeps current on GitHub: it is edited only when this changes. */
export function textDigest(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}
