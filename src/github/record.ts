// The run's record on GitHub (`state.json` and `run.json` on the run's state ref) and its
// compare-and-swap: how a handler saves what it did when another handler may have saved first.
import { stateRef } from '../core/names.js';
import type { RunState } from '../core/state.js';
import type { WorkDone } from '../core/work.js';
import { ConflictError, type GitHubForge, type RunFiles } from './forge.js';

/** What the record says was carried out, as the core's work list reads it. */
export function workDone(files: RunFiles): WorkDone {
  return {
    opened: Object.keys(files.dispatched).map(Number),
    published: Object.keys(files.published),
    settled: files.settled,
    best: files.bestCommit,
    finished: files.finalPr !== null,
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
  forge: GitHubForge,
  state: RunState,
  mine: RunFiles,
  released: string[],
  expected: string,
): Promise<string> {
  let candidate = { state, files: mine, sha: expected };
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await forge.saveRun(
        stateRef(state.id),
        candidate.state,
        candidate.files,
        candidate.sha,
        'forkflush: work done',
      );
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
      const latest = await forge.loadRun(stateRef(state.id));
      if (!latest) throw e;
      candidate = { state: latest.state, files: mergeDone(latest.files, mine, released), sha: latest.sha };
    }
  }
  throw new ConflictError(`${state.id}: the run kept changing; could not record the work done in 5 tries`);
}

/** The latest record, with what `mine` did added and the claims `released` given back. */
function mergeDone(latest: RunFiles, mine: RunFiles, released: string[]): RunFiles {
  const claims = { ...latest.claims };
  for (const key of released) delete claims[key];
  return {
    ...latest,
    dispatched: { ...latest.dispatched, ...mine.dispatched },
    published: { ...latest.published, ...mine.published },
    settled: [...new Set([...latest.settled, ...mine.settled])].sort((a, b) => a - b),
    finalPr: latest.finalPr ?? mine.finalPr,
    bestCommit: mine.bestCommit ?? latest.bestCommit,
    commentId: latest.commentId ?? mine.commentId,
    commentDigest: mine.commentDigest ?? latest.commentDigest,
    claims,
  };
}
