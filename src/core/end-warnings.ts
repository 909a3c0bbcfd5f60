// What a finished run says beside its result: that it did nothing worth having (an exit of 1), or
// warnings (the CLI's last lines, the run's GitHub status) that it did less than it seemed to.
import { spent } from './budget.js';
import { extraSpent } from './schedule.js';
import { allEpisodes, type Episode, type RunState, setupFailed } from './state.js';
import { crashedIdle, unscoredSince } from './stop.js';
import { formatNumber } from './text.js';

/** The warnings of a run, none while it has not finished; `quote` for what the grader wrote (inert code on GitHub). */
export function endWarnings(state: RunState, quote: (graderText: string) => string = (t) => t): string[] {
  return [overBudget(state), budgetLeftUnspent(state), sameScoreEverywhere(state), unscoredEnd(state, quote)].filter(
    (w) => w !== null,
  );
}

/**
 * Why a run that ended produced nothing worth having, or null: no episode got a score, every one
 * that did crashed without changing the workspace (it graded the base again), or none ever worked. Such a run
 * ends with exit code 1, never as a success.
 */
export function nothingDone(state: RunState): string | null {
  const ran = allEpisodes(state).filter((e) => e.result && !setupFailed(e));
  const scored = ran.filter((e) => e.result?.score !== null);
  if (scored.length === 0) return 'no episode got a score';
  if (scored.every(crashedIdle))
    return 'no episode did any work: every one that got a score had crashed or timed out without changing the workspace';
  if (ran.every((e) => e.result?.unchanged === true)) {
    const ignored = ran.map((e) => ignoredNamed(e.result?.note)).find((x) => x.length > 0);
    return ignored
      ? `no episode changed what git records: what their agents changed is only in files the repository's .gitignore leaves out (${ignored.map((n) => JSON.stringify(n)).join(', ')}), which no commit takes and the judge never sees: take them out of .gitignore, or have the task's results written to files git tracks`
      : 'no episode did any work: none changed the workspace (does agent.command run the agent on the task, and may it edit files there?)';
  }
  return null;
}

/** The start of an episode's note when all it changed is ignored by the workspace's .gitignore (worker/episode.ts), the names after it as JSON. */
export const IGNORED_ONLY = "what changed is only in files the repository's .gitignore leaves out";

/** The names an episode's note gives after IGNORED_ONLY, where the note starts with it (forkflush's part: never the agent's words). */
function ignoredNamed(note: string | undefined): string[] {
  const list = note?.startsWith(`${IGNORED_ONLY}: [`) ? note.slice(IGNORED_ONLY.length + 2) : '';
  const json = /^\[(?:"(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*)?\]/.exec(list)?.[0];
  try {
    const names: unknown = json ? JSON.parse(json) : [];
    return Array.isArray(names) ? names.filter((n): n is string => typeof n === 'string') : [];
  } catch {
    return [];
  }
}

/**
 * A finished run that spent past budget.total (rounds after the plan have a budget of their own),
 * said as a warning naming the episodes that spent past their allowance: a command agent reports
 * its spend when it ends, and a CLI's usage is read between its model calls. Null otherwise.
 */
export function overBudget(state: RunState): string | null {
  const { total, unit } = state.config.budget;
  const used = spent(state) - extraSpent(state);
  if (state.status !== 'finished' || used <= total * (1 + 1e-9)) return null;
  const episodes = state.rounds.flatMap((r) => (r.extra ? [] : r.episodes));
  const own = (e: Episode) => e.result?.spent ?? 0;
  // An attempt past its allowance is the agent's doing; an interrupted attempt charged beside the
  // one that ran again on resume is the interruption's, said apart.
  const over = episodes
    .filter((e) => own(e) > e.allowance * (1 + 1e-9))
    .sort((a, b) => own(b) - b.allowance - (own(a) - a.allowance));
  const named = over.slice(0, 3).map((e) => `${e.id}: ${formatNumber(own(e), 3)} of ${formatNumber(e.allowance, 3)}`);
  const rerun = episodes.filter((e) => (e.interruptedSpent ?? 0) > 0);
  const rerunJobs = episodes.filter((e) => (e.result?.earlierSpent ?? 0) > 0);
  const why = [
    ...(over.length > 0
      ? [
          `${over.length === 1 ? 'an episode' : `${over.length} episodes`} spent past ${over.length === 1 ? 'its allowance' : 'their allowances'} (${named.join(', ')}${over.length > 3 ? ', ...' : ''}); ` +
            (state.config.agent.kind === 'command'
              ? 'a command agent reports its spend when it ends, so forkflush cannot stop it at its allowance: have it stop itself at $FORKFLUSH_BUDGET'
              : 'an agent CLI is stopped at the first reading of its usage past its allowance, so one long model call can pass it'),
        ]
      : []),
    ...(rerun.length > 0
      ? [
          `${rerun.length === 1 ? 'an episode' : `${rerun.length} episodes`} ran again after an interruption (a stop, Ctrl-C), ` +
            `what ${rerun.length === 1 ? 'its interrupted attempts' : 'their interrupted attempts'} spent charged too (${formatNumber(
              rerun.reduce((n, e) => n + (e.interruptedSpent ?? 0), 0),
              3,
            )})`,
        ]
      : []),
    ...(rerunJobs.length > 0
      ? [
          `${rerunJobs.length === 1 ? "an episode's job was" : `${rerunJobs.length} episodes' jobs were`} run again by hand on GitHub ("Re-run failed jobs"), ` +
            `each attempt before charged its whole allowance, an estimate (${formatNumber(
              rerunJobs.reduce((n, e) => n + (e.result?.earlierSpent ?? 0), 0),
              3,
            )})`,
        ]
      : []),
  ];
  return `the run spent ${formatNumber(used, 3)} of its ${formatNumber(total, 3)} ${unit}: ${why.join('; and ')}`;
}

/**
 * A finished run that left most of its budget unspent, said as a warning: its episodes ended
 * having spent next to nothing, so each stretch of them stopped at its cap (method.ts
 * maxSerialEpisodes) rather than at its budget. Null otherwise.
 */
export function budgetLeftUnspent(state: RunState): string | null {
  const { total, unit } = state.config.budget;
  const used = spent(state);
  if (state.status !== 'finished' || unit === 'minutes' || used >= total / 2) return null;
  const episodes = allEpisodes(state).filter((e) => e.result).length;
  const grade = unit === 'evaluations' ? '; does the agent call "$FORKFLUSH_GRADE"?' : '';
  return `the run ended having spent ${formatNumber(used, 3)} of its ${formatNumber(total, 3)} ${unit}: its ${episodes} episodes spent little each, so each stretch of them stopped at its cap of twice its plan${grade}`;
}

/**
 * A finished run whose grader gave the same score to the initial workspace and to every one of at
 * least three episodes that changed it, said as a warning: a grader that does not read the
 * workspace it runs in (a fixed path, a cached result) makes every run a draw. Null otherwise.
 */
export function sameScoreEverywhere(state: RunState): string | null {
  const changed = allEpisodes(state).filter((e) => e.result && e.result.unchanged !== true && !setupFailed(e));
  const score = state.base.score;
  if (state.status !== 'finished' || score === null || changed.length < 3) return null;
  if (!changed.every((e) => e.result?.score === score)) return null;
  return `the grader gave the initial workspace and all ${changed.length} episodes that changed it the same score (${score}): does grader.command grade the workspace it runs in? Run it by hand after a change to see`;
}

/** A finished run whose last rounds got no score (unscoredSince), said as a warning; null otherwise. */
function unscoredEnd(state: RunState, quote: (t: string) => string): string | null {
  const u = state.status === 'finished' ? unscoredSince(state) : null;
  return u && `${u.what(quote)}: ${u.fix}`;
}
