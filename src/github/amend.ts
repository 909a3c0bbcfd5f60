// What every change a person asks for shares: who may ask, and the change made once per event.
//
// Each event that steers a run (a label, its removal, a command) is acted on once: its keys (the
// delivery id, and a command's comment id) are saved in the run's record (`seen`) in the same
// compare-and-swap as what it changed, and an event whose key is there changes nothing. So a
// delivery GitHub sends twice, or one replayed later, cannot fork twice or resume a stopped run;
// a new event (another comment, the label added again after it was removed) is a new request.
import { stateRef } from '../core/names.js';
import { remember, seenAny } from '../core/seen-events.js';
import type { RunState } from '../core/state.js';
import type { GitHubApi, GitHubRunRecord, StoredRun } from './api.js';
import { ConflictError } from './requests.js';
import type { SyncContext } from './sync.js';

/** Permissions that may start and steer runs. */
const WRITERS: readonly string[] = ['admin', 'maintain', 'write'];

/** Whether a permission (api.permission) may start and steer runs. */
export function canWrite(permission: string): boolean {
  return WRITERS.includes(permission);
}

/** Who asked for a change to a run, and the events that asked. */
export interface ChangeRequest {
  /** The login of the person who asked; their write access is checked before. */
  by: string;
  /** The keys of the events that asked (core/limits.ts deliveryKey, commentKey): each is acted on once. */
  keys: string[];
}

/**
 * Actions mode: the tick workflow (GITHUB.tickWorkflow) runs only while a run needs it, so a run
 * that starts, resumes or is asked for a round turns it on (a repeat is harmless); the tick turns
 * it off once no run is left that needs it. A repository without it (the hosted app ticks itself,
 * or it was not copied) is fine.
 */
export async function wakeTick(ctx: SyncContext): Promise<void> {
  if (!ctx.tick) return;
  const there = await ctx.api.workflows.setEnabled(ctx.tick, true);
  if (!there) ctx.log?.(`no ${ctx.tick} to enable: rounds move on only with events and the hourly tick's workflow`);
}

/**
 * Changes a run's record, once per event: applies the change to the record the caller read and
 * records the event's keys, compare-and-swaps; on a conflict it reads the newer record and tries
 * again. Null when the record is gone, or has one of the keys (the event was acted on already).
 */
export async function amendOnce(
  api: GitHubApi,
  read: StoredRun,
  message: string,
  keys: readonly string[],
  change: (stored: StoredRun) => { state: RunState; files: GitHubRunRecord },
): Promise<StoredRun | null> {
  const run = read.state.id;
  for (let attempt = 0; attempt < 5; attempt++) {
    const stored = attempt === 0 ? read : await api.loadRun(stateRef(run));
    if (!stored || seenAny(stored.files.seen, keys)) return null;
    const next = change(stored);
    const files = keys.length > 0 ? { ...next.files, seen: remember(next.files.seen, keys) } : next.files;
    try {
      return {
        state: next.state,
        files,
        sha: await api.saveRun(stateRef(run), next.state, files, stored.sha, message),
      };
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
    }
  }
  throw new ConflictError(`${run}: the run kept changing; try again`);
}
