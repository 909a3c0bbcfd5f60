// Starting, stopping and steering a GitHub run: the label that starts (or resumes) it, the
// comment commands, and the nightly tick. Each changes the run's record, then syncs.
//
// Each event that steers a run (a label, its removal, a command) is acted on once: its keys (the
// delivery id, and a command's comment id) are saved in the run's record (`seen`) in the same
// compare-and-swap as what it changed, and an event whose key is there changes nothing. So a
// delivery GitHub sends twice, or one replayed later, cannot fork twice or resume a stopped run;
// a new event (another comment, the label added again after it was removed) is a new request.
import { CONFIG_PATH, type Config, ConfigError, parseConfig } from '../core/config.js';
import { forgeAlsoProtected } from '../core/globs.js';
import { remember, roundLimitProblem, runsPerRepoProblem, seenAny } from '../core/limits.js';
import { GITHUB, issueRunId, type RefsLayout, runRefs, stateRef } from '../core/names.js';
import { loadTemplates } from '../core/prompts.js';
import { RecordError } from '../core/records.js';
import { mixSeed } from '../core/rng.js';
import { extraRefusal, extraRounds, forkRefusal, requestFork } from '../core/schedule.js';
import { newRunState, type RunState } from '../core/state.js';
import { retryStopped } from '../core/stop.js';
import { visibleText } from '../core/text.js';
import { workerTimeoutProblem } from '../core/worker-workflow.js';
import { ConflictError, type GitHubForge, type RunFiles, type StoredRun } from './forge.js';
import { protectedDigest } from './observe.js';
import { refsOf } from './record.js';
import { type SyncContext, syncOrYield, syncStored } from './sync.js';

/** Permissions that may start and steer runs. */
const WRITERS: readonly string[] = ['admin', 'maintain', 'write'];

/** Whether a permission (forge.permission) may start and steer runs. */
export function canWrite(permission: string): boolean {
  return WRITERS.includes(permission);
}

/** Who asked for a change, and the events that asked. */
export interface Steer {
  /** The login of the person who asked; their write access is checked before. */
  by: string;
  /** The keys of the events that asked (core/limits.ts deliveryKey, commentKey): each is acted on once. */
  keys: string[];
}

export interface IssueRef {
  number: number;
  title: string;
  body: string | null;
}

/**
 * Starts the run of an issue (or resumes a stopped one). Returns a message for the user on a
 * problem; `{ state: null }` when there was nothing to do (the event was acted on already, or
 * another handler saved first).
 */
export async function startRun(
  ctx: SyncContext,
  issue: IssueRef,
  steer: Steer,
): Promise<{ problem: string } | { state: RunState | null }> {
  const { forge } = ctx;
  const run = issueRunId(issue.number);
  const existing = await forge.loadRun(stateRef(run));
  if (existing) {
    if (seenAny(existing.files.seen, steer.keys)) {
      ctx.log?.(`${run}: this event was acted on already; nothing to do`);
      return { state: null };
    }
    if (existing.files.stopped) {
      const busy = await runsPerRepo(forge, existing.state.config, run, 'label the issue again');
      if (busy) return { problem: busy };
      return { state: await setStopped(ctx, existing, false, steer) };
    }
    // Running or finished: the event is recorded, so that a replay of it after a stop resumes nothing.
    const next = await amendOnce(forge, existing, 'forkflush: labelled', steer.keys, (s) => s);
    return { state: next ? await syncOrYield(ctx, next) : null };
  }
  const repository = await forge.repository();
  const branch = repository.defaultBranch;
  const text = await forge.readFile(CONFIG_PATH, branch);
  if (text === null) {
    return {
      problem: `There is no \`${CONFIG_PATH}\` on \`${branch}\`: add one (see the forkflush README), then label the issue again.`,
    };
  }
  let config: ReturnType<typeof parseConfig>;
  try {
    config = parseConfig(text, CONFIG_PATH);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return {
      problem: `\`${CONFIG_PATH}\` on \`${branch}\` is not valid, so no run started. Fix these and label the issue again:\n\n${e.problems.map((p) => `- ${p}`).join('\n')}`,
    };
  }
  const loaded = await loadTemplates(config, (path) => forge.readFile(path, branch), `\`${branch}\``);
  if ('problem' in loaded)
    return { problem: `${loaded.problem} (fix it on \`${branch}\`, then label the issue again).` };
  // Without the worker workflow the round's dispatch would fail on every trigger, saying nothing.
  const worker = await forge.readFile(`.github/workflows/${GITHUB.workflow}`, branch);
  if (worker === null) return { problem: missingWorkerProblem(branch) };
  // Checked here, not locked: two issues labelled at the same moment may both start.
  const busy = await runsPerRepo(forge, config, run, 'label this issue again');
  if (busy) return { problem: busy };
  const base = await forge.refSha(`refs/heads/${branch}`);
  if (!base) return { problem: `The default branch \`${branch}\` has no commits.` };
  // What every result must keep of the base: its protected files (checked against each result's tree).
  const baseCommit = await forge.commit(base);
  const baseTree = await forge.treeFiles(baseCommit.tree);
  const globs = [...config.grader.protected, ...forgeAlsoProtected(CONFIG_PATH)];
  const state = newRunState({ id: run, seed: mixSeed(issue.number), config, baseCommit: base, baseScore: null });
  const layout = layoutFor(config);
  const refs = runRefs(run, layout);
  const task = visibleText(`# ${issue.title}\n\n${issue.body ?? ''}`);
  const files: RunFiles = {
    task: task.text,
    ...(task.hidden > 0 ? { hiddenInTask: task.hidden } : {}),
    templates: loaded.templates,
    configPath: CONFIG_PATH,
    defaultBranch: branch,
    issue: issue.number,
    commentId: null,
    stopped: false,
    dispatched: {},
    published: {},
    settled: [],
    finalPr: null,
    bestCommit: null,
    lastNightly: null,
    claims: {},
    ...(baseTree ? { protectedDigest: protectedDigest(baseTree, globs) } : {}),
    privateRepository: repository.private,
    startedBy: steer.by,
    seen: remember([], steer.keys),
    refsLayout: layout,
    // Graded once, by a job of the opening round's dispatch (action/base-job.ts).
    baseGrade: 'asked',
    baseTree: baseCommit.tree,
  };
  // Said in the status comment, once: a job Actions would stop before an episode is graded.
  const timeout = workerTimeoutProblem(worker, config);
  if (timeout) files.workerWarning = timeout;
  for (const l of state.lineages) await forge.createRef(refs.lineage(l.index, state.lineages.length), base);
  try {
    const sha = await forge.saveRun(stateRef(run), state, files, null, 'forkflush: new run');
    await wakeTick(ctx);
    return { state: await syncStored(ctx, { state, files, sha }) };
  } catch (e) {
    if (e instanceof ConflictError) return { state: null };
    throw e;
  }
}

/** What a repository without the worker workflow is told, once, on the issue that would start a run. */
export function missingWorkerProblem(branch: string): string {
  return (
    `There is no \`.github/workflows/${GITHUB.workflow}\` on \`${branch}\`: it is the workflow whose jobs run the agents. ` +
    'Run `forkflush init --github` in a clone of this repository, commit and push the workflows it writes ' +
    `to \`${branch}\` (README, "On GitHub"), then label the issue again.`
  );
}

/**
 * Where a new run keeps its work: out of the repository's workflows' sight (2), unless its config
 * asks for a pull request per episode or per fork round's winner, which needs their branches (1).
 */
export function layoutFor(config: Config): RefsLayout {
  return config.pull_requests === 'episodes' || config.pull_requests === 'winners' ? 1 : 2;
}

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
  steer?: Steer,
): Promise<RunState | null> {
  const run = stored.state.id;
  const message = stopped ? 'forkflush: stop' : 'forkflush: resume';
  // The retried episodes' branches go back to their bases first: until the record says the round
  // runs again, their setup results stand, and a branch at its base holds no result to observe.
  const retry = stopped ? null : retryStopped(stored.state);
  const refs = refsOf(stored.state, stored.files);
  for (const e of retry?.episodes ?? []) {
    const ref = refs.episode(e.round, e.branch);
    if ((await ctx.forge.refSha(ref)) === e.result?.commit) await ctx.forge.setRef(ref, e.base);
  }
  const next = await amendOnce(ctx.forge, stored, message, steer?.keys ?? [], (s) => {
    // Checked again on the record being swapped (the latest after a conflict): the round runs again only while its setup results are
    // the ones whose branches this handler moved back (another handler may have retried it, and
    // the retry may have failed its setup anew).
    const again = retry ? retryStopped(s.state) : null;
    const moved = new Map(retry?.episodes.map((e) => [e.id, e.result?.commit]));
    const rerun = again?.episodes.every((e) => moved.get(e.id) === e.result?.commit) ? again : null;
    // A resume dispatches the open round again only for a stopped run or a round that runs again:
    // a second resume at once, of a run the first one set going, must not dispatch it twice.
    if (!stopped && !s.files.stopped && !rerun) return s;
    const files = { ...structuredClone(s.files), stopped };
    const open = s.state.rounds.find((r) => !r.decision);
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
    if (!stopped && steer) files.startedBy = steer.by;
    return { state: rerun?.state ?? s.state, files };
  });
  if (!next) return null;
  if (!stopped) await wakeTick(ctx);
  if (stopped) {
    await ctx.forge.cancelRuns(GITHUB.workflow, run);
    // Every check still waiting ends: an episode without a result, and one whose result was not
    // published yet (publishing completes the check; a resume publishes it over this).
    for (const e of next.state.rounds.flatMap((r) => r.episodes)) {
      const check = next.files.checks?.[e.id];
      if (check === undefined || next.files.published[e.id]) continue;
      await ctx.forge.updateCheckRun(check, {
        status: 'completed',
        conclusion: 'cancelled',
        completedAt: ctx.now.toISOString(),
        output: {
          title: `${e.id}: stopped`,
          summary: e.result
            ? "The run was stopped before this episode's result was published; a resume publishes it."
            : 'The run was stopped before this episode had a result; a resume runs it again.',
        },
      });
    }
    for (const round of next.state.rounds.filter((r) => !next.files.settled.includes(r.index))) {
      for (const e of round.episodes) {
        const pr = next.files.published[e.id]?.pr;
        if (pr) await ctx.forge.closePullRequest(pr, 'The run was stopped; this branch is kept as it is.');
      }
    }
  }
  return syncOrYield(ctx, next);
}

/**
 * `/autoresearch fork`: one more fork round of the leader, now, within the run's round limit (the
 * caller says why not when it is reached). Who asks takes the nightly rounds on.
 */
export async function forkNow(ctx: SyncContext, stored: StoredRun, steer?: Steer): Promise<RunState | null> {
  const next = await amendOnce(ctx.forge, stored, 'forkflush: fork requested', steer?.keys ?? [], (s) => ({
    // Checked again on the record being swapped (the latest after a conflict): another fork may
    // have been asked for meanwhile, and taken what was left of the round limit or schedule.budget.
    state: forkProblem(s.state, ctx.now) === null ? requestFork(s.state) : s.state,
    files: steer ? { ...s.files, startedBy: steer.by } : s.files,
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

/**
 * Actions mode: the tick workflow (GITHUB.tickWorkflow) runs only while a run needs it, so a run
 * that starts, resumes or is asked for a round turns it on (a repeat is harmless); the tick turns
 * it off once no run is left that needs it. A repository without it (the hosted app ticks itself,
 * or it was not copied) is fine.
 */
export async function wakeTick(ctx: SyncContext): Promise<void> {
  if (!ctx.tick) return;
  const there = await ctx.forge.setWorkflowEnabled(ctx.tick, true);
  if (!there) ctx.log?.(`no ${ctx.tick} to enable: rounds move on only with events and the hourly tick's workflow`);
}

/**
 * Changes a run's record, once per event: applies the change to the record the caller read and
 * records the event's keys, compare-and-swaps; on a conflict it reads the newer record and tries
 * again. Null when the record is gone, or has one of the keys (the event was acted on already).
 */
export async function amendOnce(
  forge: GitHubForge,
  read: StoredRun,
  message: string,
  keys: readonly string[],
  change: (stored: StoredRun) => { state: RunState; files: RunFiles },
): Promise<StoredRun | null> {
  const run = read.state.id;
  for (let attempt = 0; attempt < 5; attempt++) {
    const stored = attempt === 0 ? read : await forge.loadRun(stateRef(run));
    if (!stored || seenAny(stored.files.seen, keys)) return null;
    const next = change(stored);
    const files = keys.length > 0 ? { ...next.files, seen: remember(next.files.seen, keys) } : next.files;
    try {
      return {
        state: next.state,
        files,
        sha: await forge.saveRun(stateRef(run), next.state, files, stored.sha, message),
      };
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
    }
  }
  throw new ConflictError(`${run}: the run kept changing; try again`);
}

/**
 * Why no other run may start or resume now (limits.runs_per_repo), or null: the repository's
 * runs that are running (not stopped, not finished), besides `self`, counted up to the limit. A
 * record that cannot be read (broken, or not sealed by this app) runs nothing, so it is not counted.
 */
export async function runsPerRepo(
  forge: GitHubForge,
  config: Config,
  self: string,
  again: string,
): Promise<string | null> {
  const running: string[] = [];
  for (const run of await forge.listRuns()) {
    if (run === self) continue;
    let stored: StoredRun | null;
    try {
      stored = await forge.loadRun(stateRef(run));
    } catch (e) {
      if (e instanceof RecordError) continue;
      throw e;
    }
    if (stored && !stored.files.stopped && stored.state.status !== 'finished') running.push(run);
    if (running.length >= config.limits.runs_per_repo) break;
  }
  return runsPerRepoProblem(config, running, again);
}

/**
 * The nightly tick: repairs every run a lost event left behind, and forks the leader of finished
 * runs configured with `schedule: nightly` into one more round (once a day), while the run may
 * open more rounds and the person it runs for (`startedBy`) still has write access; otherwise the
 * issue is told why, once. A run whose tick fails is logged and the next one goes on; the tick
 * then fails, naming them.
 */
export async function nightly(ctx: SyncContext): Promise<string[]> {
  const touched: string[] = [];
  const failed = new Map<string, unknown>();
  let active = false;
  for (const run of await ctx.forge.listRuns()) {
    try {
      const tick = await nightlyRun(ctx, run);
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
  if (!active && ctx.tick && (await ctx.forge.setWorkflowEnabled(ctx.tick, false)))
    ctx.log?.(`no run needs the tick: ${ctx.tick} is disabled until a run starts, resumes or is asked for a round`);
  return touched;
}

/**
 * One run's nightly tick: whether it was synced (false: it is gone or stopped), and whether it
 * still needs ticks (running, or finished with nightly rounds still to come).
 */
async function nightlyRun(ctx: SyncContext, run: string): Promise<{ synced: boolean; active: boolean }> {
  const stored = await ctx.forge.loadRun(stateRef(run));
  if (!stored || stored.files.stopped) return { synced: false, active: false };
  const today = ctx.now.toISOString().slice(0, 10);
  const wantsRound =
    extraRounds(stored.state.config).nightly &&
    stored.state.status === 'finished' &&
    forkRefusal(stored.state) === null &&
    stored.files.lastNightly !== today;
  const skip = wantsRound ? await nightlySkip(ctx, stored) : null;
  let state: RunState | null;
  if (skip) {
    if (stored.files.nightlySkipped === skip.key || skip.quiet) {
      state = await syncStored(ctx, stored);
    } else {
      // Saved first: of two ticks racing, only the one whose save lands tells the issue.
      const files = { ...stored.files, nightlySkipped: skip.key };
      const sha = await ctx.forge.saveRun(
        stateRef(run),
        stored.state,
        files,
        stored.sha,
        'forkflush: no nightly round',
      );
      await ctx.forge.comment(stored.files.issue, `forkflush ran no nightly round: ${skip.text}`);
      state = await syncStored(ctx, { state: stored.state, files, sha });
    }
  } else if (wantsRound) {
    const { nightlySkipped: _told, ...rest } = stored.files;
    const files = { ...rest, lastNightly: today };
    const asked = requestFork(stored.state);
    const sha = await ctx.forge.saveRun(stateRef(run), asked, files, stored.sha, 'forkflush: nightly round');
    state = await syncStored(ctx, { state: asked, files, sha });
  } else {
    // Finished runs too: a lost event may have left their last decision or final pull request undone.
    state = await syncStored(ctx, stored);
  }
  const after = state ?? stored.state;
  // A skip for good (the budget spent, the end passed, the round limit) needs no more ticks; a
  // closed issue or a writer gone may come back.
  const nightlyAhead = extraRounds(after.config).nightly && forkProblem(after, ctx.now) === null;
  return { synced: true, active: after.status !== 'finished' || nightlyAhead };
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
  const issue = await ctx.forge.issue(stored.files.issue);
  const labelled = issue?.labels.some((l) => l === GITHUB.label || l === GITHUB.doneLabel) ?? false;
  if (!issue?.open || !labelled) {
    const why = !issue ? 'the issue is gone' : !issue.open ? 'the issue is closed' : "the issue lost forkflush's label";
    return { key: 'issue', text: why, quiet: true };
  }
  const take =
    'Someone with write access can take them on: `/autoresearch fork` runs one round now, and the nightly rounds go on for them.';
  const by = stored.files.startedBy;
  if (!by) {
    return {
      key: 'permission',
      text: `the run's record does not say who started it (it is older than that), and nightly rounds run only for someone who still has write access. ${take}`,
    };
  }
  const permission = await ctx.forge.permission(by);
  if (canWrite(permission)) return null;
  return {
    key: `permission:${by}`,
    text: `the nightly rounds run for \`${by}\`, who started this run (or last resumed it, or asked for a fork), and they no longer have write access to the repository (${permission}). ${take}`,
  };
}
