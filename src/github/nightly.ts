// The nightly tick: every run a lost event left behind is reconciled, and finished runs configured
// with `schedule: nightly` get one more fork round a day, within schedule.budget, while their issue
// is open and labelled and the person they run for can still write. In Actions mode the tick's own
// workflow is turned off once no run needs it (amend.ts wakeTick turns it on).
import { ConfigError, parseConfig } from '../core/config.js';
import { GITHUB, isLabel, stateRef } from '../core/names.js';
import { extraRounds, forkRefusal, requestFork } from '../core/schedule.js';
import type { RunState } from '../core/state.js';
import { canWrite } from './amend.js';
import type { StoredRun } from './api.js';
import { mapAwaited, mapOnTick } from './map.js';
import { ConflictError } from './requests.js';
import { runsPerRepo } from './start.js';
import { forkProblem } from './steer.js';
import { type SyncContext, syncStored } from './sync.js';

/**
 * The nightly tick: repairs every run a lost event left behind, and forks the leader of finished
 * runs configured with `schedule: nightly` into one more round (once a day), while the run may
 * open more rounds and the person it runs for (`startedBy`) still has write access; otherwise the
 * issue is told why, once. A run whose tick fails is logged and the next one goes on; the tick
 * then fails, naming them. With `rounds` false it only repairs (an installation restored by day:
 * the night's round waits for its hour). `night` is the day (YYYY-MM-DD) whose round the tick
 * serves, that of its hour mark (default: today's, in UTC): a run has one round a night.
 */
export async function nightly(
  ctx: SyncContext,
  clock: () => Date = () => ctx.now,
  rounds = true,
  night?: string,
): Promise<string[]> {
  const touched: string[] = [];
  const failed = new Map<string, unknown>();
  let active = false;
  for (const run of await takingTurns(ctx, await ctx.api.listRuns())) {
    try {
      const tick = await nightlyRun({ ...ctx, now: clock() }, run, rounds, night);
      if (tick.synced) touched.push(run);
      active ||= tick.active;
    } catch (e) {
      // A run that could not be ticked may need the next tick.
      active = true;
      if (e instanceof ConflictError) continue;
      // One broken run (a record that cannot be read, a call that fails) must not keep the
      // runs after it from their repair; it is said, and tried again at the next tick.
      ctx.log?.(`${run}: the nightly tick failed: ${(e as Error).message}`, { run });
      failed.set(run, e);
    }
  }
  if (failed.size > 0)
    throw new AggregateError([...failed.values()], `the nightly tick failed for ${[...failed.keys()].join(', ')}`);
  // Actions mode: nothing left that needs a tick, so the tick's workflow rests until a run wakes it.
  if (!active && ctx.tick && (await ctx.api.workflows.setEnabled(ctx.tick, false))) {
    // A run started, resumed or forked since the runs were read woke the tick (amend.ts wakeTick)
    // just before this put it to rest: read them again, and wake it back.
    if (await anyNeedsTick(ctx)) await ctx.api.workflows.setEnabled(ctx.tick, true);
    else
      ctx.log?.(`no run needs the tick: ${ctx.tick} is disabled until a run starts, resumes or is asked for a round`);
  }
  return touched;
}

/**
 * Whether any run, read now, needs the tick: it runs, work of it is claimed (a handler that died
 * may leave it), or its idea map's end is awaited.
 */
async function anyNeedsTick(ctx: SyncContext): Promise<boolean> {
  for (const run of await ctx.api.listRuns()) {
    const stored = await ctx.api.loadRun(stateRef(run)).catch(() => null);
    if (!stored || stored.files.stopped) continue;
    if (stored.state.status !== 'finished' || workHeld(stored) || mapAwaited(stored.files, ctx.now)) return true;
  }
  return false;
}

/** Work of the run a handler claimed and has not done, and that is not blocked (the issue says why): a later tick takes it over. */
function workHeld(stored: StoredRun): boolean {
  return Object.keys(stored.files.claims).some((key) => key !== stored.files.blocked?.work);
}

/**
 * The runs in the order the tick offers them a round: the one whose last nightly round is oldest
 * first (none yet: first of all), so that under limits.runs_per_repo the runs take turns instead of
 * the first listed taking every night's. A record that cannot be read goes first: its tick says why.
 */
async function takingTurns(ctx: SyncContext, runs: string[]): Promise<string[]> {
  const last = new Map<string, string>();
  for (const run of runs) {
    const stored = await ctx.api.loadRun(stateRef(run)).catch(() => null);
    last.set(run, stored?.files.lastNightly ?? '');
  }
  const day = (run: string) => last.get(run) ?? '';
  return [...runs].sort((a, b) => day(a).localeCompare(day(b)));
}

/**
 * One run's nightly tick: whether it was synced (false: it is gone or stopped), and whether it
 * still needs ticks (running, or finished with nightly rounds still to come).
 */
async function nightlyRun(
  ctx: SyncContext,
  run: string,
  rounds: boolean,
  night?: string,
): Promise<{ synced: boolean; active: boolean }> {
  const stored = await ctx.api.loadRun(stateRef(run));
  if (!stored || stored.files.stopped) return { synced: false, active: false };
  const thisNight = night ?? ctx.now.toISOString().slice(0, 10);
  const wantsRound =
    rounds &&
    extraRounds(stored.state.config).nightly &&
    stored.state.status === 'finished' &&
    forkRefusal(stored.state) === null &&
    stored.files.lastNightly !== thisNight;
  const skip = wantsRound ? await nightlySkip(ctx, stored) : null;
  let state: RunState | null;
  if (skip) {
    if (stored.files.nightlySkipped === skip.key || skip.quiet) {
      state = await syncStored(ctx, stored);
    } else {
      // Saved first: of two ticks racing, only the one whose save lands tells the issue.
      const files = { ...stored.files, nightlySkipped: skip.key };
      const sha = await ctx.api.saveRun(stateRef(run), stored.state, files, stored.sha, 'forkflush: no nightly round');
      await ctx.api.issues.comment(stored.files.issue, `forkflush ran no nightly round: ${skip.text}`);
      state = await syncStored(ctx, { state: stored.state, files, sha });
    }
  } else if (wantsRound) {
    const { nightlySkipped: _told, ...rest } = stored.files;
    const files = { ...rest, lastNightly: thisNight };
    const asked = requestFork(stored.state);
    const sha = await ctx.api.saveRun(stateRef(run), asked, files, stored.sha, 'forkflush: nightly round');
    state = await syncStored(ctx, { state: asked, files, sha });
  } else {
    // Finished runs too: a lost event may have left their last decision or final pull request undone.
    state = await syncStored(ctx, stored);
  }
  const after = state ?? stored.state;
  // A skip for good (the budget spent, the end passed, the round limit) needs no more ticks; a
  // closed issue or a writer gone may come back.
  const nightlyAhead = extraRounds(after.config).nightly && forkProblem(after, ctx.now) === null;
  // A map asked for whose end no event reported (read again only when the record awaits one).
  const sent = stored.files.map;
  const mapAhead = sent?.dispatched && sent.ended === undefined ? await mapOnTick(ctx, run) : false;
  // Work claimed before this sync (by a handler that may have died, its claim not yet stale): a
  // later tick takes it over. (What this sync did itself costs one more tick at most.)
  return { synced: true, active: after.status !== 'finished' || nightlyAhead || workHeld(stored) || mapAhead };
}

/**
 * Why the default branch's config turns the nightly rounds off (gone, or its `schedule` without
 * them), or null. A run keeps the config it started with, but for this switch: a team that takes
 * the nightly rounds out of the config means them to stop. A config that does not parse (an edit
 * in progress) changes nothing.
 */
async function nightlyOffOnDefaultBranch(ctx: SyncContext, stored: StoredRun): Promise<string | null> {
  const { configPath } = stored.files;
  // The default branch as it is now: renamed since the run started, it is read under its new name.
  const defaultBranch = await ctx.api.defaultBranch();
  const text = await ctx.api.readFile(configPath, defaultBranch);
  const where = `\`${configPath}\` on \`${defaultBranch}\``;
  const rest =
    'while it does not (the run keeps the rest of the config it started with; `/autoresearch fork` still runs one round)';
  if (text === null) return `${where} is gone: no nightly round runs ${rest}`;
  try {
    if (extraRounds(parseConfig(text, configPath)).nightly) return null;
  } catch (e) {
    if (e instanceof ConfigError) return null;
    throw e;
  }
  return `${where} no longer asks for nightly rounds (its \`schedule\`): none runs ${rest}`;
}

/**
 * Why tonight's round of a run must not run (a key, to tell the issue once, and the words), or
 * null. A closed issue, or one without forkflush's labels, gets no round and no word: someone
 * closed it or took the label off to stop the run.
 */
async function nightlySkip(
  ctx: SyncContext,
  stored: StoredRun,
): Promise<{ key: string; text: string; quiet?: true } | null> {
  const problem = forkProblem(stored.state, ctx.now);
  if (problem) return { key: 'rounds', text: problem };
  const issue = await ctx.api.issues.get(stored.files.issue);
  const labelled = issue?.labels.some((l) => isLabel(l, GITHUB.label) || isLabel(l, GITHUB.doneLabel)) ?? false;
  if (!issue?.open || !labelled) {
    const why = !issue ? 'the issue is gone' : !issue.open ? 'the issue is closed' : "the issue lost forkflush's label";
    return { key: 'issue', text: why, quiet: true };
  }
  const off = await nightlyOffOnDefaultBranch(ctx, stored);
  if (off) return { key: 'config', text: off };
  const take =
    'Someone with write access can take them on: `/autoresearch fork` runs one round now, and the nightly rounds go on for them.';
  const by = stored.files.startedBy;
  if (!by) {
    return {
      key: 'permission',
      text: `the run's record does not say who started it (it is older than that), and nightly rounds run only for someone who still has write access. ${take}`,
    };
  }
  const permission = await ctx.api.permission(by);
  if (canWrite(permission)) {
    // A nightly round sets the run going again: within limits.runs_per_repo, as a start is.
    const busy = await runsPerRepo(
      ctx.api,
      stored.state.config,
      stored.state.id,
      'the next nightly tick runs its round',
    );
    return busy ? { key: 'busy', text: busy } : null;
  }
  return {
    key: `permission:${by}`,
    text: `the nightly rounds run for \`${by}\`, who started this run (or last resumed it, or asked for a fork), and they no longer have write access to the repository (${permission}). ${take}`,
  };
}
