// Steering a running GitHub run: stopping it (the label removed, the issue closed, `/autoresearch
// stop`), resuming it, and one more fork round now (`/autoresearch fork`). Each changes the run's
// record once per event (amend.ts), then syncs.
import { roundLimitProblem } from '../core/limits.js';
import { extraRefusal, forkRefusal, requestFork } from '../core/schedule.js';
import type { RunState } from '../core/state.js';
import { retryStopped } from '../core/stop.js';
import { amendOnce, type ChangeRequest, wakeTick } from './amend.js';
import type { GitHubRunRecord, StoredRun } from './api.js';
import { refsOf } from './record.js';
import { type SyncContext, syncOrYield } from './sync.js';
import { windDown } from './wind-down.js';

/**
 * Stops a run cleanly (cancels its jobs, closes its open pull requests), or resumes it: the open
 * round's episodes still without a result are dispatched again, since stopping cancelled them,
 * and a round whose every setup failed runs again (retryStopped). Who resumes it takes its nightly
 * rounds on. Null when the event was acted on already.
 */
export async function setStopped(
  ctx: SyncContext,
  stored: StoredRun,
  stopped: boolean,
  asked?: ChangeRequest,
): Promise<RunState | null> {
  const message = stopped ? 'forkflush: stop' : 'forkflush: resume';
  // 1. The retried episodes' branches go back to their bases first: until the record says the round
  // runs again, their setup results stand, and a branch at its base holds no result to observe.
  const retry = stopped ? null : retryStopped(stored.state);
  const refs = refsOf(stored.state, stored.files);
  for (const e of retry?.episodes ?? []) {
    const ref = refs.episode(e.round, e.branch);
    if ((await ctx.api.refSha(ref)) === e.result?.commit) await ctx.api.setRef(ref, e.base);
  }
  // 2. The record says it, once per event.
  const next = await amendOnce(ctx.api, stored, message, asked?.keys ?? [], (s) =>
    stoppedOrResumed(s, stopped, retry, asked),
  );
  if (!next) return null;
  // 3. A resume wakes the tick; a stop cancels the jobs, ends the checks, closes the pull requests.
  if (stopped) await windDown(ctx, next);
  else await wakeTick(ctx);
  // 4. One sync: a resume dispatches the open round again.
  return syncOrYield(ctx, next);
}

/**
 * The record of a run stopped or resumed. Checked again on the record being swapped (the latest
 * after a conflict): the round runs again only while its setup results are the ones whose branches
 * the handler moved back (another handler may have retried it, and the retry may have failed its
 * setup anew).
 */
function stoppedOrResumed(
  s: StoredRun,
  stopped: boolean,
  retry: ReturnType<typeof retryStopped>,
  asked: ChangeRequest | undefined,
): { state: RunState; files: GitHubRunRecord } {
  const again = retry ? retryStopped(s.state) : null;
  const moved = new Map(retry?.episodes.map((e) => [e.id, e.result?.commit]));
  const rerun = again?.episodes.every((e) => moved.get(e.id) === e.result?.commit) ? again : null;
  // A resume dispatches the open round again only for a stopped run or a round that runs again:
  // a second resume at once, of a run the first one set going, must not dispatch it twice.
  if (!stopped && !s.files.stopped && !rerun) return s;
  const files = { ...structuredClone(s.files), stopped };
  // The open round as it runs on: dispatched again only when an episode of it has no result (a
  // stop no resume can help leaves every one with its result, and nothing to dispatch).
  const state = rerun?.state ?? s.state;
  const open = state.rounds.find((r) => !r.decision && r.episodes.some((e) => !e.result));
  for (const e of rerun?.episodes ?? []) {
    delete files.published[e.id];
    delete files.claims[`publish:${e.id}`];
    // Its check run told the failed setup: the new attempt gets one of its own.
    delete files.checks?.[e.id];
  }
  if (!stopped && open) {
    delete files.dispatched[String(open.index)];
    delete files.claims[`dispatch:${open.index}`];
    // The stop cancelled the episodes' jobs: the new dispatch makes new checks. The old ones are
    // completed by the sync (a stop that died before completing them left them queued), from the
    // record, so a handler that dies after this save leaves none queued either.
    for (const e of open.episodes) {
      const check = files.checks?.[e.id];
      if (e.result || check === undefined) continue;
      files.orphanChecks = [...(files.orphanChecks ?? []), check];
      delete files.checks?.[e.id];
    }
  }
  if (!stopped && asked) files.startedBy = asked.by;
  // Resumed where its issue was found gone: it is back (Issues turned on again), or the resume came
  // from the run's pull request.
  if (!stopped) delete files.issueGone;
  // Stopped by forkflush, or by the round's run cancelled in Actions: a resume goes on from there.
  if (!stopped) delete files.stopReason;
  return { state, files };
}

/**
 * `/autoresearch fork`: one more fork round of the leader, now, within the run's round limit (the
 * caller says why not when it is reached), its branches told `toTry` when said (`/autoresearch
 * fork <what>`, a review). Who asks takes the nightly rounds on.
 */
export async function forkNow(
  ctx: SyncContext,
  stored: StoredRun,
  asked?: ChangeRequest,
  toTry?: string,
): Promise<RunState | null> {
  const next = await amendOnce(ctx.api, stored, 'forkflush: fork requested', asked?.keys ?? [], (s) => ({
    // Checked again on the record being swapped (the latest after a conflict): another fork may
    // have been asked for meanwhile, and taken what was left of the round limit or schedule.budget.
    state: forkProblem(s.state, ctx.now) === null ? requestFork(s.state, toTry) : s.state,
    files: asked ? { ...s.files, startedBy: asked.by } : s.files,
  }));
  if (next) await wakeTick(ctx);
  return next ? syncOrYield(ctx, next) : null;
}

/**
 * Why no fork round may be asked for now (the issue is told), or null: a run with no single leader,
 * the round limit, or what the rounds after the plan may still do (schedule.budget, until, rounds).
 */
export function forkProblem(state: RunState, now: Date): string | null {
  const refusal = forkRefusal(state);
  if (refusal) return `${refusal}.`;
  const limit = roundLimitProblem(state);
  if (limit) return limit;
  const extra = extraRefusal(state, now);
  return extra ? `${extra}, so forkflush opens no more rounds after the plan.` : null;
}
