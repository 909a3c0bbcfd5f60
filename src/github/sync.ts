// One reconcile of a GitHub run. Every trigger (a label, a finished job, a comment command, the
// nightly tick) ends here: observe what landed (observe.ts), let the core decide (advance), claim
// the work the core lists (dueWork) with a compare-and-swap of the run's record, carry it out
// (work.ts), record it done (record.ts). A duplicated, late or lost event changes nothing: the
// next sync finds the same state and does what is still due.
import { finalPrBody, finalPrTitle, issueComment } from '../core/github-status.js';
import { commentMarker, contextNote, type GitHubView, PRIVILEGED_CI_NOTE, type RunPhase } from '../core/github-text.js';
import { advanceWithinLimits, roundLimitNotes } from '../core/limits.js';
import { journalWindow, recordLosers } from '../core/losers.js';
import { STALE_CLAIM_MINUTES } from '../core/method.js';
import { refName, stateRef } from '../core/names.js';
import type { RunState } from '../core/state.js';
import { haltsOnGitHub, stopBefore } from '../core/stop.js';
import { carryOut, dueWork } from '../core/work.js';
import type { GitHubApi, GitHubRunRecord, StoredRun } from './api.js';
import { Commits, type EventFacts, observe, observeBase } from './observe.js';
import { layoutOf, phaseOf, resultCommit, saveDone, textDigest, viewOf, workDone } from './record.js';
import { ConflictError, rateLimited, status } from './requests.js';
import { windDown } from './wind-down.js';
import { GitHubWork, runCheckFields } from './work.js';

export interface SyncContext extends EventFacts {
  api: GitHubApi;
  /** Actions mode: the tick's workflow, enabled while a run needs it (commands.ts wakeTick). */
  tick?: string;
  /** A line for the log; `fields` say what it is about (the app's logger keeps them: run, round, episode). */
  log?: (line: string, fields?: { run?: string; round?: number; episode?: string }) => void;
}

/** Reconciles one run until it waits for jobs (or is finished or stopped). */
export async function syncRun(ctx: SyncContext, run: string): Promise<RunState | null> {
  const stored = await ctx.api.loadRun(stateRef(run));
  return stored ? syncOrYield(ctx, stored) : null;
}

/**
 * syncStored, where losing a race to another handler is no error: that handler saved first, and
 * its work stands (a command's or an event's, say the events of the app's own changes).
 */
export async function syncOrYield(ctx: SyncContext, stored: StoredRun): Promise<RunState | null> {
  try {
    return await syncStored(ctx, stored);
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
    ctx.log?.(`${stored.state.id}: another handler changed the run first; leaving the work to it`);
    return null;
  }
}

export async function syncStored(ctx: SyncContext, stored: StoredRun): Promise<RunState> {
  const { api, now } = ctx;
  let state = stored.state;
  const files: GitHubRunRecord = structuredClone(stored.files);
  let sha = stored.sha;
  const commits = new Commits(api);
  let stoppedHere = false;
  // The open round's own run cancelled, not by the app (its stops and deadlines cancel runs of
  // stopped runs or decided rounds): a person's stop, said on the issue, that a resume goes on from.
  const cancelled = ctx.runCancelled;
  if (!files.stopped && cancelled && state.rounds.find((r) => !r.decision)?.index === cancelled.round) {
    files.stopped = true;
    files.stopReason = `round ${cancelled.round}'s workflow run ${cancelled.workflowRun} was cancelled in Actions (by a person, a job's \`timeout-minutes\`, or a runner that shut down), and forkflush dispatches nothing more`;
    stoppedHere = true;
  }
  // 1. What landed, and what the core decides from it (nothing for a stopped run).
  if (!files.stopped) state = await observeAndDecide(ctx, commits, state, files);
  // 2. Claim the work in the same compare-and-swap that records the decisions: of two racing
  // handlers, only the one whose save lands does the work.
  const due = dueWork(state, workDone(state, files));
  // A stale claim on work no longer due: its handler did the work, then died before letting go.
  // (A stopped run keeps its other claims: they tell whoever resumes it what may be half done.)
  for (const [key, at] of Object.entries(files.claims)) {
    if (!due.some((w) => w.key === key) && isUnclaimed(at, now)) delete files.claims[key];
  }
  let work = files.stopped ? [] : due.filter((w) => isUnclaimed(files.claims[w.key], now));
  // The issue is the run's one control and voice: gone (deleted, or Issues turned off), the run
  // stops, by this sync (whose save then carries the stop, and which winds the run down).
  const stopForGoneIssue = () => {
    stoppedHere ||= !files.stopped;
    files.stopped = true;
    files.issueGone ??= now.toISOString();
  };
  // A round's dispatch spends: only while the issue is there.
  if (work.some((w) => w.type === 'open-round') && (await api.issues.gone(files.issue))) {
    stopForGoneIssue();
    work = [];
  }
  // A claim already there (stale, or it would not be taken), or an attempt that failed: its handler
  // may have done part of it.
  const retaking = new Set(
    work.filter((w) => files.claims[w.key] !== undefined || files.blocked?.work === w.key).map((w) => w.key),
  );
  for (const w of work) files.claims[w.key] = now.toISOString();
  if (state !== stored.state || JSON.stringify(files) !== JSON.stringify(stored.files)) {
    sha = await api
      .saveRun(stateRef(state.id), state, files, sha, `forkflush: ${summaryLine(state)}`)
      .catch(async (e: unknown) => {
        // Refused for want of a permission (the app lost `contents: write`): nothing can be recorded
        // or done, so the issue says why the run stands still (`issues: write` is another permission).
        if (status(e) === 403 && !rateLimited(e)) {
          const unsaved = { ...structuredClone(stored.files), blocked: blockedBy('record', e, undefined, now) };
          await present(api, stored.state, unsaved, now).catch(() => {});
        }
        throw e;
      });
  }
  // 3. Carry it out, then what people read.
  const claimed = JSON.stringify(files);
  const github = new GitHubWork(api, commits, files, now);
  const completed: number[] = [];
  let failure: unknown = null;
  // An item no longer due no longer holds the run up (a stop, a resume, another handler did it).
  if (files.blocked && !due.some((w) => w.key === files.blocked?.work)) delete files.blocked;
  try {
    // A handler that has worked for half a claim's life takes no new item: past its claim's life
    // another handler would take the same item over (a long rate-limit wait, say). The rest stays
    // claimed and is taken over once the claims go stale.
    const started = Date.now();
    for (const w of work) {
      if (Date.now() - started > (STALE_CLAIM_MINUTES * 60_000) / 2) break;
      await carryOut(github, state, w, retaking.has(w.key)).catch((e: unknown) => {
        if (!(e instanceof ConflictError)) {
          files.blocked = blockedBy(w.key, e, files.blocked, now);
          // Given up, not held for a claim's life: the next event tries again (a person who fixed
          // what the issue names says `/autoresearch status`, and is answered), as a retake.
          delete files.claims[w.key];
        }
        throw e;
      });
      delete files.claims[w.key];
      if (files.blocked?.work === w.key) delete files.blocked;
    }
  } catch (e) {
    failure = e;
  }
  // What people read, also after an item failed: a run that cannot go on says so, and why.
  if (!(failure instanceof ConflictError)) {
    try {
      completed.push(...(await completeOrphanChecks(api, files, now)));
      await present(api, state, files, now);
    } catch (e) {
      // Gone (410), or maybe moved: a transferred issue's comments answer 404, where it can be read.
      if (status(e) === 410 || (status(e) === 404 && (await api.issues.gone(files.issue).catch(() => false))))
        stopForGoneIssue();
      else failure ??= e;
    }
  }
  // 4. What was done is recorded, in one save, even when another handler saved meanwhile or an item failed.
  let saved: StoredRun | null = null;
  if (JSON.stringify(files) !== claimed) {
    saved = await saveDone(
      api,
      state,
      files,
      work.map((w) => w.key).filter((key) => !(key in files.claims)),
      sha,
      completed,
      stoppedHere,
    );
  }
  // Stopped by this sync: what the run still had going ends as at a person's stop.
  if (stoppedHere) await windDown(ctx, { state, files });
  // Stopped by a person while this handler worked (a round dispatched as the label came off): the
  // stop's wind-down could not see what this one started. It ends now, and the issue says stopped.
  else if (saved?.files.stopped && !files.stopped && work.length > 0) {
    await windDown(ctx, saved);
    await syncOrYield(ctx, saved);
  }
  if (failure) throw failure;
  return state;
}

/**
 * What landed on GitHub read back into the state (observe.ts), and the core's steps from there:
 * rounds decided and opened within the round limit, and the losers' notes a decided round keeps.
 */
async function observeAndDecide(
  ctx: SyncContext,
  commits: Commits,
  read: RunState,
  files: GitHubRunRecord,
): Promise<RunState> {
  const { api } = ctx;
  let state = await observe(api, commits, read, files, ctx);
  state = await observeBase(api, commits, state, files, ctx);
  // A stop (a round whose every branch failed setup, an agent that cannot work, a grader that
  // scored nothing once the initial workspace's grade is in) halts the run before its next step:
  // nothing more is dispatched, and the issue comment says why.
  // At limits.rounds the run finishes with what it has instead of opening another round.
  const settled = files.baseGrade === 'done';
  state = advanceWithinLimits(state, (s, next) => haltsOnGitHub(stopBefore(s, next), settled)).state;
  // With fork.losers: journal, each decided round's losers' notes, read while their branches are
  // there and saved with the claim below: before the next round is dispatched, whose jobs read them.
  const journal = state.config.journal;
  state = await recordLosers(state, async (commit) => journalWindow(await api.readFile(journal, commit)));
  return state;
}

/** The record of a work item that failed: since its first failure in a row. */
function blockedBy(work: string, e: unknown, was: GitHubRunRecord['blocked'], now: Date): GitHubRunRecord['blocked'] {
  const status = (e as { status?: unknown } | null)?.status;
  const said = e instanceof Error ? e.message : String(e);
  const message = (typeof status === 'number' ? `HTTP ${status}: ${said}` : said).slice(0, 500);
  return { work, message, since: was?.work === work ? was.since : now.toISOString() };
}

/**
 * Completes, as cancelled, the check runs a resume let go of (GitHubRunRecord.orphanChecks), and takes
 * each off the list once done (or gone); returns those done. Every sync does this until none is
 * left: the resume that listed them may have died before completing them.
 */
async function completeOrphanChecks(api: GitHubApi, files: GitHubRunRecord, now: Date): Promise<number[]> {
  const done: number[] = [];
  for (const check of files.orphanChecks ?? []) {
    await api.checks.update(check, {
      status: 'completed',
      conclusion: 'cancelled',
      completedAt: now.toISOString(),
      output: { title: 'stopped', summary: 'The run was stopped; the resume runs this episode again.' },
    });
    done.push(check);
    const left = (files.orphanChecks ?? []).filter((c) => c !== check);
    if (left.length > 0) files.orphanChecks = left;
    else delete files.orphanChecks;
  }
  return done;
}

/**
 * What people read, kept current: the issue's status comment and the result pull request's title
 * and body, each edited only when what it says changed.
 */
async function present(api: GitHubApi, state: RunState, files: GitHubRunRecord, now: Date): Promise<void> {
  const view = viewOf(state, files);
  // A comment refused (the issue locked, or gone) does not keep the run's check and pull request from saying
  // where the run stands: they are written first, and the refusal after. A lock alone fails nothing:
  // the status is written once the issue is unlocked.
  const commented = await updateComment(api, state, files, view).then(
    () => null,
    (e: unknown) => (status(e) === 403 && /\blocked\b/i.test(String((e as Error).message)) ? null : e),
  );
  // The run's check: in progress while rounds run, then the result (made by the first round).
  const check = files.runCheck;
  if (check) {
    const { digest, ...fields } = runCheckFields(state, files, now);
    // A completed check is not made to run again: the round that runs next makes a new one.
    if (digest !== check.digest && !(check.done && fields.status !== 'completed')) {
      // One a person deleted is left gone: its next home (the result) gets a new one.
      await api.checks.update(check.id, fields);
      files.runCheck = { ...check, digest, done: fields.status === 'completed' };
    }
  }
  // Not while the result branch is behind the result (its move failed): the pull request would
  // claim a result its branch does not hold.
  const behind = layoutOf(files) === 2 && files.resultHead !== undefined && files.resultHead !== resultCommit(state);
  if (files.finalPr && !behind) {
    const title = finalPrTitle(state);
    const body = finalPrBody(state, files.issue, view);
    const digest = textDigest(`${title}\n${body}`);
    if (digest !== files.resultDigest) {
      await api.pulls.edit(files.finalPr, title, body);
      files.resultDigest = digest;
    }
  }
  if (commented) throw commented;
}

/**
 * The round refs a settle left in place, as they hold a person's commit, as they are now: one the
 * team deleted (having merged what it wanted) drops out; one pushed on again is named where it is.
 */
async function keptRefsNote(api: GitHubApi, files: GitHubRunRecord): Promise<string[]> {
  if (!files.keptRefs) return [];
  const now: Record<string, string> = {};
  for (const ref of Object.keys(files.keptRefs)) {
    const at = await api.refSha(ref);
    if (at !== null) now[ref] = at;
  }
  if (Object.keys(now).length > 0) files.keptRefs = now;
  else delete files.keptRefs;
  const refs = Object.entries(now);
  if (refs.length === 0) return [];
  const listed = refs.map(([ref, at]) => `\`${refName(ref)}\` (at ${at.slice(0, 7)})`).join(', ');
  return [
    `Kept, not deleted with their round: ${listed}. They hold commits forkflush did not make (a push by a person); the run does not use them. Merge what you want from them, then delete them.`,
  ];
}

/** The issue comment that says where the run stands, edited only when what it says changed. */
async function updateComment(api: GitHubApi, state: RunState, files: GitHubRunRecord, view: GitHubView): Promise<void> {
  const phase: RunPhase = phaseOf(state, files);
  const notes = [
    ...(files.hiddenInTask
      ? [
          `The issue text had ${files.hiddenInTask} hidden part(s) (HTML comments or invisible characters). The agent gets the text as GitHub shows it, without them.`,
        ]
      : []),
    ...(files.workerWarning ? [`**Warning:** ${files.workerWarning}`] : []),
    ...(await keptRefsNote(api, files)),
    ...contextNote(state, files.privateRepository),
    ...roundLimitNotes(state),
    ...(layoutOf(files) === 1 ? [PRIVILEGED_CI_NOTE] : []),
    ...(api.sealsRecords
      ? []
      : [
          "This run's record is not sealed (the app has no FORKFLUSH_RECORD_KEY): forkflush cannot tell a record it wrote from one rewritten with a leaked token.",
        ]),
  ];
  const body = issueComment(state, phase, notes, view);
  const digest = textDigest(body);
  if (digest !== files.commentDigest || files.commentId === null) {
    files.commentId = await api.issues.upsertComment(files.issue, files.commentId, body, commentMarker(state.id));
    files.commentDigest = digest;
    // The issue answered: it is there again (Issues turned back on). The run stays stopped till resumed.
    delete files.issueGone;
  }
}

/** A journal read through the API, as the local forge reads it: '' when missing or too large. */
function isUnclaimed(claimedAt: string | undefined, now: Date): boolean {
  return claimedAt === undefined || now.getTime() - Date.parse(claimedAt) > STALE_CLAIM_MINUTES * 60_000;
}

function summaryLine(state: RunState): string {
  const open = state.rounds.find((r) => !r.decision);
  return open ? `round ${open.index} (${open.phase})` : state.status;
}
