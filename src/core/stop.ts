// The run's stop policy: when a run must stop before it spends the rest of its budget, what it
// says, and what a resume does then. Each rule is about something that would fail every later
// episode the same way:
//   - an agent failure that does not pass (core/failure.ts: a refused key, an exhausted quota, an
//     unknown model, a program that cannot start, a path the sandbox hides; or a rate limit still
//     refusing after the worker's tries): the next episode would fail alike (code 2);
//   - crashes or time-outs that repeat: every branch of the first fork round, or CRASH_STREAK
//     episodes in a row, crashed or ran until agent.timeout without changing the workspace: an
//     agent that cannot work here, or one that hangs (a prompt, the network); on GitHub, worker
//     jobs that gave no result count so too (a permission, a lost runner) (code 2);
//   - a round in which every branch's setup failed (setup: in the config) let no agent work, and
//     the next round starts from the same commits (code 2);
//   - an opening round in which no episode got a score usually means a grader that cannot score
//     anything (code 1). (A workspace may legitimately start without a score: the paper starts
//     from an empty one. Its first round gets a score, or something is wrong.) So do whole rounds
//     that got no score, CRASH_STREAK episodes or more, after one did: a grader broken in the night.
// A stop whose cause can be fixed outside the run's config is resumable: the episodes that
// stopped it run again (retryStopped), their spend kept, while running them again fits the budget.
// A fix to the config needs a new run.
import { spent } from './budget.js';
import { FAILURE_WHAT, GENERIC_FIX, isTransient, resumableFailure } from './failure.js';
import { judgeHint } from './judge-hints.js';
import { AGENT_TRIES, CRASH_STREAK } from './method.js';
import type { Action } from './reconcile.js';
import { reconcile } from './reconcile.js';
import { extraRounds, extraSpent } from './schedule.js';
import {
  allEpisodes,
  type Episode,
  type EpisodeResult,
  gaveNoResult,
  type RecordedFailure,
  type Round,
  type RunState,
  setupFailed,
} from './state.js';
import { formatNumber, inertCodeSpan } from './text.js';
import { WORKER_CANNOT_READ } from './versions.js';

export interface RunStop {
  /** 2: something must be fixed first (the config, the agent's key, its setup); 1: the run produced nothing. */
  code: 1 | 2;
  /** One line: what happened, the agent's (or setup's, or the grader's) own words, and what to do. */
  message: string;
  /** The message for GitHub: what an agent, its setup or the grader wrote in it as inert code. */
  markdown: string;
  /** The grader scored nothing of the opening round: another run of the task would fare the same. */
  graderScoredNothing?: true;
  /** The grader scored nothing in the rounds since it last did (noScoreSince). */
  graderStoppedScoring?: true;
}

/** Text that quotes what an agent wrote, `quote` applied to those parts. */
type Quoting = (quote: (agentText: string) => string) => string;

function stop(code: 1 | 2, text: Quoting): RunStop {
  return { code, message: text((t) => t), markdown: text(inertCodeSpan) };
}

/** Why the run stops, and which episodes a resume runs again (none: a resume cannot help). */
interface Cause {
  stop: RunStop;
  retry: Episode[] | null;
}

export function stopReason(state: RunState): RunStop | null {
  return cause(state)?.stop ?? null;
}

/** Whether what stopped the run is its provider's passing failure (a rate limit, an overload, the network): one to wait out. */
export function outageStop(state: RunState): boolean {
  const retry = cause(state)?.retry ?? [];
  return retry.length > 0 && retry.every((e) => isTransient(stoppingFailure(e.result)?.kind ?? 'crash'));
}

/**
 * Why the run stops. A resume never takes the run past its budget (budget.total; schedule.budget
 * for a round after the plan): the episodes it would run again may spend their allowances anew,
 * on top of what their stopped tries were charged (a job that gave no result: its whole allowance).
 */
function cause(state: RunState): Cause | null {
  const c = stopCause(state);
  const open = state.rounds.find((r) => !r.decision);
  if (!c?.retry || c.retry.length === 0 || !open) return c;
  // A resume runs again what stopped the run, and what the stop halted in flight (no result yet).
  const halted = open.episodes.filter((e) => !e.result && !c.retry?.includes(e));
  const again = [...c.retry, ...halted].reduce((n, e) => n + e.allowance, 0);
  const [used, bound, which] = open.extra
    ? [extraSpent(state), extraRounds(state.config).budget, 'schedule.budget']
    : [spent(state), state.config.budget.total, 'budget.total'];
  if (used + again <= bound * (1 + 1e-9)) return c;
  const also = halted.length > 0 ? ` and the ${halted.map((e) => e.id).join(', ')} it halted` : '';
  const note = `; a resume cannot run ${c.retry.length === 1 ? 'it' : 'them'}${also} again: with ${formatNumber(used)} of ${which}'s ${formatNumber(bound)} spent, their allowances (${formatNumber(again)}) would take the run past it, so start a new run`;
  return { stop: { ...c.stop, message: c.stop.message + note, markdown: c.stop.markdown + note }, retry: null };
}

function stopCause(state: RunState): Cause | null {
  const open = state.rounds.find((r) => !r.decision);
  if (open) {
    const failed = open.episodes.filter((e) => stoppingFailure(e.result) !== null);
    const first = failed[0];
    if (first) {
      const f = stoppingFailure(first.result) as RecordedFailure;
      const resumable = failed.every((e) => resumableFailure((stoppingFailure(e.result) as RecordedFailure).kind));
      return { stop: agentFailed(first, f), retry: resumable ? failed : null };
    }
    const crashed = crashedRun(state, open);
    if (crashed) return crashed;
    if (open.episodes.length > 0 && open.episodes.every(setupFailed))
      return { stop: everySetupFailed(open, state.config.setup.commands.length > 0), retry: open.episodes };
  }
  return noScoreYet(state);
}

/**
 * No episode of the run got a score, once its opening round is decided: a grader that cannot
 * score anything (when the initial workspace has none either), or one that scores only what the
 * agent has not touched (the judge lacks what a changed tree needs), or workspaces that cannot
 * be recorded. With a scored initial workspace, CRASH_STREAK decided episodes at least, as for
 * crashes: one branch that broke the code is no pattern. The grader is judged by `gradedEpisodes`.
 */
function noScoreYet(state: RunState): Cause | null {
  if (!state.rounds[0]?.decision) return null;
  const tried = gradedEpisodes(state);
  if (tried.length === 0) return null;
  if (tried.some((e) => e.result?.score !== null)) return noScoreSince(state);
  const decided = tried.filter((e) => state.rounds.find((r) => r.index === e.round)?.decision);
  const base = state.base.score;
  if (base !== null && decided.length < CRASH_STREAK) return null;
  const reasons = [...new Set(decided.map((e) => e.result?.reason ?? 'no reason given'))];
  const quoted = (q: (t: string) => string) => reasons.slice(0, 3).map(q).join('; ');
  const text: Quoting =
    base === null
      ? (q) =>
          `neither the initial workspace nor any episode of the opening round got a score (${quoted(q)}), so the run stopped ` +
          `rather than spend the rest of its budget: run the grader by hand on the workspace, fix it, then start a new run${judgeHint(reasons)}`
      : (q) =>
          `the initial workspace got a score (${formatNumber(base)}) but none of the ${decided.length} episodes since did (${quoted(q)}), ` +
          `so the run stopped rather than spend the rest of its budget: ${noScoreFix(decided, reasons)}`;
  return { stop: { ...stop(1, text), graderScoredNothing: true }, retry: null };
}

/**
 * No episode got a score in the whole rounds decided since the last that scored one, CRASH_STREAK
 * episodes at least, as with a scored initial workspace (noScoreYet): a grader that stopped
 * working in the night (a dependency gone, a service down), or an agent that now breaks what the
 * judge needs every time. Rounds are judged whole, as for crashes: their branches finish in any
 * order, and one branch that broke the code is no pattern.
 */
function noScoreSince(state: RunState): Cause | null {
  const u = unscoredSince(state);
  const text: Quoting = (q) =>
    `${u?.what(q)}, so the run stopped rather than spend the rest of its budget; its best so far is kept: ${u?.fix}`;
  return u && { stop: { ...stop(1, text), graderStoppedScoring: true }, retry: null };
}

/** The episodes the grader is judged by: not setup-failed (no try), without result, or machine-starved (void). */
function gradedEpisodes(state: RunState): Episode[] {
  return allEpisodes(state).filter(
    (e) => e.result && !e.result.machineShort && !setupFailed(e) && !gaveNoResult(e.result),
  );
}

/** The episodes of the rounds decided since the last that got a score (none of them did), said; null when too few. */
export function unscoredSince(state: RunState) {
  const tried = gradedEpisodes(state);
  const last = tried.findLast((e) => e.result?.score !== null);
  const decided = (e: Episode) => state.rounds.find((r) => r.index === e.round)?.decision !== undefined;
  const since = tried.filter((e) => last && e.round > last.round && decided(e));
  if (!last || since.length < CRASH_STREAK) return null;
  const reasons = [...new Set(since.map((e) => e.result?.reason ?? 'no reason given'))];
  return {
    what: (q: (t: string) => string) =>
      `the grader scored none of the ${since.length} episodes since ${last.id} got one (${reasons.slice(0, 3).map(q).join('; ')})`,
    fix: noScoreFix(since, reasons),
  };
}

/** The start of an episode's reason when its workspace could not be committed (worker/episode.ts): nothing was graded. */
export const UNRECORDED = 'the workspace could not be recorded';

/** What to do when no episode got a score though the initial workspace did: the agent's doing, or the grader's where it is graded. */
function noScoreFix(episodes: Episode[], reasons: string[]): string {
  if (episodes.every((e) => (e.result?.protectedChanged.length ?? 0) > 0))
    return (
      'the agent changes what grader.protected keeps every time: say in the task that it must not, or take the path ' +
      'out of grader.protected if the agent may change it, then start a new run'
    );
  if (reasons.every((r) => r.startsWith(UNRECORDED)))
    return (
      'keep what the agent makes that git cannot take (a file over its size limit, a special file) out of the workspace ' +
      '(.gitignore it, or tell the agent in the task), then start a new run'
    );
  return `run the grader by hand on an episode's branch, fix what fails where it is graded, then start a new run${judgeHint(reasons)}`;
}

/**
 * The failure of a result that stops the run: a permanent one, or a passing one the worker gave
 * up on (it records a transient kind only then). A result of an earlier release that could not
 * start its agent (`agentNotStarted`) is a `cli` failure.
 */
export function stoppingFailure(r: EpisodeResult | undefined): RecordedFailure | null {
  if (!r) return null;
  if (r.failure) return r.failure.kind === 'crash' ? null : r.failure;
  return r.agentNotStarted ? { kind: 'cli', quote: r.agentNotStarted } : null;
}

function agentFailed(e: Episode, f: RecordedFailure): RunStop {
  const fix = f.fix ?? GENERIC_FIX[f.kind];
  if (f.kind === 'cli') {
    // The spec's fix (an install line) inside the one that always holds: the command is the config's.
    const install = f.fix ? `check agent.command (and agent.kind): ${f.fix}, then start a new run` : fix;
    return stop(
      2,
      (q) => `the agent could not start in ${e.id} (${q(f.quote)}), so it will not start in any episode: ${install}`,
    );
  }
  const tries = isTransient(f.kind) ? ` in ${(e.result?.retries?.length ?? 0) + 1} tries (at most ${AGENT_TRIES})` : '';
  return stop(
    2,
    (q) =>
      `the agent failed in ${e.id}: ${FAILURE_WHAT[f.kind]}${tries} (${q(f.quote)}), so every episode would fail the same way and the run stopped: ${fix}`,
  );
}

/**
 * An episode whose agent crashed, or ran until agent.timeout, and left the workspace as it found
 * it. A time-out counts: a CLI that hangs (waiting on a prompt, a blocked host) may report next to
 * no spend, so its budget would never stop a run of them, each costing agent.timeout of the night.
 */
export function crashedIdle(e: Episode): boolean {
  return (e.result?.exit === 'crash' || e.result?.exit === 'timeout') && e.result.unchanged === true;
}

/**
 * An episode whose agent ended cleanly, changed nothing and reported no usage (none, or zero): no
 * sign that it ever worked on the task. One that reported what it spent may have tried ideas and
 * kept none, or had too small an allowance to try one (the bundled example's agent on a small
 * budget): no reason to stop the run, though a run of nothing else ends with exit 1 (nothingDone).
 */
function neverWorked(e: Episode): boolean {
  const r = e.result;
  return r?.exit === 'finished' && r.unchanged === true && (r.spentBasis !== undefined || r.spent === 0);
}

/**
 * An episode stopped for its budget having spent over twice its allowance, changing nothing: its
 * agent's first steps cost more than an episode may spend (a CLI's first request of 20,000 tokens
 * on an allowance of 6), so every episode would be charged that and do nothing.
 */
function overranIdle(e: Episode): boolean {
  const r = e.result;
  return r?.exit === 'budget' && r.unchanged === true && r.spent > 2 * e.allowance;
}

/**
 * Crashes that repeat: every branch of the first fork round or of a round after the plan (two at
 * least), or the last CRASH_STREAK episodes with a result (by round and branch; setup failures,
 * whose agent never ran, are passed over), crashed without changing the workspace. Those rounds
 * are judged whole: their branches run at once and finish in any order, so a streak inside one
 * would depend on which finished first; and a night's round (schedule.nightly) whose every job
 * failed would fail alike the next night. A streak ends at the first episode still running:
 * those after it are not "in a row". Only while the last of them is in the open round: a stop
 * comes before its round is decided. While no episode of the run has changed the workspace at all, a clean end
 * that reported no usage counts too (neverWorked), and an overrun that changed nothing
 * (overranIdle): an agent.command that prints its help, or a wrapper that never calls the agent,
 * ends at once every time and would be charged its allowance each time.
 */
function crashedRun(state: RunState, open: Round): Cause | null {
  const tried = allEpisodes(state).filter((e) => e.result && !setupFailed(e));
  const noWorkYet = tried.every((e) => e.result?.unchanged === true);
  const idle = (e: Episode) => crashedIdle(e) || (noWorkYet && (neverWorked(e) || overranIdle(e)));
  const stopFor = (episodes: Episode[], where: string) =>
    crashStop(episodes, where, open, state.config.agent.timeout, !episodes.every(crashedIdle));
  const firstFork = state.rounds.find((r) => r.kind === 'fork');
  if ((firstFork === open || open.extra) && open.episodes.length > 1) {
    const branches = open.episodes.filter((e) => !setupFailed(e));
    const which = firstFork === open ? 'the first fork round' : `round ${open.index}, after the plan`;
    if (branches.length > 0 && open.episodes.every((e) => e.result) && branches.every(idle))
      return stopFor(branches, `every branch of ${which} (${branches.map((e) => e.id).join(', ')})`);
    return null;
  }
  const all = allEpisodes(state);
  const pending = all.findIndex((e) => !e.result);
  const ran = (pending < 0 ? all : all.slice(0, pending)).filter((e) => !setupFailed(e));
  const streak: Episode[] = [];
  for (let i = ran.length - 1; i >= 0 && idle(ran[i] as Episode); i--) streak.unshift(ran[i] as Episode);
  if (streak.length < CRASH_STREAK || streak.at(-1)?.round !== open.index) return null;
  return stopFor(streak, `${streak.length} episodes in a row (${streak.map((e) => e.id).join(', ')})`);
}

/** The stop for episodes that left the workspace as they found it (`noWork`: some ended cleanly, and none of the run did any work). */
function crashStop(crashed: Episode[], where: string, open: Round, agentTimeout: number, noWork: boolean): Cause {
  const last = crashed.at(-1)?.result;
  if (crashed.every(overranIdle)) {
    const e = crashed.at(-1) as Episode;
    return {
      stop: stop(
        2,
        () =>
          `the agent spent more than twice its allowance without changing the workspace in ${where} (the last ${formatNumber(e.result?.spent ?? 0)} of its ${formatNumber(e.allowance)}), ` +
          'so its first steps cost more than an episode may spend and the run stopped: give each episode more (a larger budget.total, ' +
          'budget.episode or fork.branch_budget, or fewer fork.branches) and start a new run',
      ),
      retry: null,
    };
  }
  if (crashed.every((e) => gaveNoResult(e.result))) {
    return {
      stop: stop(
        2,
        (q) =>
          `the worker jobs of ${where} ended without a result, the last with ${q(last?.reason ?? 'no reason given')}, so the run stopped before it spent more: ${NO_RESULT_FIX}`,
      ),
      retry: crashed.filter((e) => e.round === open.index),
    };
  }
  // The agent's own words where the worker read them; else forkflush's note on it, said as such.
  const words = (q: (t: string) => string) =>
    last?.failure?.quote
      ? `the last with ${q(last.failure.quote)}`
      : last?.note
        ? `forkflush's note on the last: ${q(last.note)}`
        : 'the last printing nothing';
  const timedOut = crashed.filter((e) => e.result?.exit === 'timeout').length;
  const what = noWork
    ? 'ended'
    : timedOut === 0
      ? 'crashed'
      : timedOut === crashed.length
        ? `ran until its time limit (agent.timeout: ${formatNumber(agentTimeout, 0)} s)`
        : 'crashed or ran until its time limit (agent.timeout)';
  const fix = noWork ? NO_WORK_FIX : timedOut === 0 ? GENERIC_FIX.crash : TIMED_OUT_FIX;
  const yet = noWork ? ', and no episode of the run has changed it,' : ',';
  return {
    stop: stop(
      2,
      (q) =>
        `the agent ${what} without changing the workspace in ${where}${yet} ${words(q)}, so the run stopped before it spent more: ${fix}`,
    ),
    retry: crashed.filter((e) => e.round === open.index),
  };
}

/** What to do when the episodes' jobs give no result (they are charged their whole allowance each). */
const NO_RESULT_FIX =
  "read those jobs' logs in Actions: the worker's token may lack a permission (contents: write), a job may have reached its " +
  'timeout-minutes, the runner may have been lost or Actions refused to run (billing); fix that, then resume the run';

/** What to do when the agent never changed anything: it most likely never worked on the task at all. */
const NO_WORK_FIX =
  'run the agent by hand on a checkout of the task (agent.command, or its CLI with agent.args) and see that it edits files ' +
  '(a CLI waiting for approval to edit does not): after a fix outside the config (the CLI, its login) resume the run; ' +
  'one to agent.command, agent.args or the task needs a new run';

/** What to do after time-outs with nothing to show: the log says whether it hung or needed longer. */
const TIMED_OUT_FIX =
  "read the episodes' agent.log (episodes/ of the run folder; on GitHub, the episode job's log) to see where the agent waited: if it hung (a question, " +
  'a host the sandbox refuses, a command that never ends), fix that and resume the run; if it needed more time, ' +
  'start a new run with a larger agent.timeout';

/** What a resume does after a setup stop (retryStopped). */
const RESUME = 'resume the run: its round runs again';

/** Every branch of the round failed its setup: no agent worked, and the next round would start from the same commits. */
function everySetupFailed(round: Round, hasCommands: boolean): RunStop {
  const reasons = [...new Set(round.episodes.map((e) => e.result?.reason ?? 'no reason given'))];
  const bases = [...new Set(round.episodes.map((e) => e.base.slice(0, 10)))];
  const where = bases.length === 1 ? `commit ${bases[0]}` : `commits ${bases.join(', ')}`;
  return stop(
    2,
    (q) =>
      `setup failed in every branch of round ${round.index} (${round.phase}) on ${where} (${reasons.slice(0, 3).map(q).join('; ')}), ` +
      'so no agent could work and the run stopped: ' +
      (round.episodes.every((e) => e.result?.reason?.startsWith(WORKER_CANNOT_READ))
        ? `update the worker Action as the reasons say, then ${RESUME}`
        : hasCommands
          ? `run setup.commands by hand in a fresh checkout of ${bases.length === 1 ? 'that commit' : 'those commits'} and fix what fails: ` +
            `after a fix outside the repository (a registry, a secret, the runner), ${RESUME}; ` +
            'a fix to the config or to the files of the commit needs a new run'
          : `fix what the reasons say (the agent CLI install, or the worker), then ${RESUME}`),
  );
}

/**
 * Why the run must stop before its next step, `next` (what reconcile returns first): a stop with
 * code 2 always stops it; no score stops it only while there is budget left to save (one with
 * nothing left finishes as usual). Both shells ask this before each step: the local runner (exit
 * with the stop's code) and the GitHub sync (`advance(state, (s, next) => stopBefore(s, next)?.code === 2)`:
 * nothing more is opened or decided).
 */
export function stopBefore(state: RunState, next: Action | undefined): RunStop | null {
  const s = stopReason(state);
  return s && (s.code === 2 || (next !== undefined && next.type !== 'finish')) ? s : null;
}

/**
 * Whether a stop halts a run on GitHub: one with code 2, or a grader that stopped scoring, always; a
 * grader that scored nothing once the initial workspace's grade is in (`baseSettled`: runs started before forkflush graded it on
 * GitHub have none, and there a missing grade says nothing about the grader).
 */
export function haltsOnGitHub(s: RunStop | null, baseSettled: boolean): s is RunStop {
  return (
    s !== null && (s.code === 2 || s.graderStoppedScoring === true || (baseSettled && s.graderScoredNothing === true))
  );
}

/**
 * Whether a run (advanced as far as it goes) is stopped, and why: for the issue comment, the
 * reports and the sync. On GitHub a stop with code 1 halts the run only once the initial
 * workspace's grade is in (haltsOnGitHub).
 */
export function runStop(state: RunState): RunStop | null {
  if (state.status === 'finished') return null;
  return stopBefore(state, reconcile(state)[0]);
}

/**
 * The run with what stopped it opened again, for a resume once the cause is fixed (a key set, a
 * quota raised, a registry back up, a worker Action pinned too old): the results of the open
 * round's episodes that stopped it are cleared, and those episodes run again from the same bases.
 * What they spent stays charged (as `interruptedSpent`). The shells move the episodes' branches
 * back to their bases. Null when nothing stopped the run, or when a resume cannot help (the fix is
 * to the config, which a run keeps: a new run).
 */
export function retryStopped(state: RunState): { state: RunState; episodes: Episode[] } | null {
  if (state.status === 'finished') return null;
  const c = cause(state);
  const open = state.rounds.find((r) => !r.decision);
  if (!c?.retry || c.retry.length === 0 || !open) return null;
  const ids = new Set(c.retry.map((e) => e.id));
  const cleared = open.episodes.map((e) => (ids.has(e.id) ? withoutResult(e) : e));
  return {
    state: { ...state, rounds: state.rounds.map((r) => (r === open ? { ...r, episodes: cleared } : r)) },
    episodes: c.retry,
  };
}

/** An episode without its result, what the result spent (and a re-run's earlier attempts) kept as an earlier attempt's. */
function withoutResult({ result, ...e }: Episode): Episode {
  const spent = (result?.spent ?? 0) + (result?.earlierSpent ?? 0);
  if (!(spent > 0)) return e;
  const estimated = result?.spentBasis === 'estimated' || (result?.earlierSpent ?? 0) > 0 || e.interruptedBasis;
  return {
    ...e,
    interruptedSpent: Number(((e.interruptedSpent ?? 0) + spent).toFixed(6)),
    ...(estimated ? { interruptedBasis: 'estimated' as const } : {}),
  };
}
