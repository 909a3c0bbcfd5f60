// What one GitHub run may open and how many may run at once in a repository (`limits.rounds`,
// `limits.runs_per_repo`), as pure checks with the words the issue is told. (The events a run has
// acted on, so that a delivery GitHub sends twice is acted on once, are core/seen-events.ts.)
//
// The round limit. `limits.rounds` counts every round a run opens: the plan's, and the nightly and
// requested ones. Its default is what the schedule may need plus EXTRA_ROUNDS. "What it may need"
// is not the plan's table (`forkflush plan`, every episode spending exactly its allowance): agents
// that stop early get more serial episodes, up to maxSerialEpisodes per stretch, so the default
// counts the schedule with episodes that spend nothing, its most rounds. A run whose schedule goes
// by its plan therefore never meets the default; only extra rounds and an explicit, lower
// `limits.rounds` do.

import { SCHEDULES_REMEMBERED_MAX, SIMULATED_MAX_ROUNDS } from './bounds.js';
import type { Config } from './config.js';
import { EXTRA_ROUNDS } from './method.js';
import { simulate } from './plan.js';
import { type Action, applyFinish } from './reconcile.js';
import { nextRound } from './schedule.js';
import type { RunState } from './state.js';
import { advance } from './work.js';

const scheduled = new Map<string, number>();

/**
 * The most rounds the schedule of this config may open: every serial stretch at its cap, as when
 * each agent stops at once having spent nothing (spending more only reaches the fork points sooner).
 */
export function scheduleRounds(config: Config): number {
  const key = JSON.stringify(config);
  const known = scheduled.get(key);
  if (known !== undefined) return known;
  let rounds: number;
  try {
    rounds = simulate(config, () => ({ spent: 0, score: null })).rounds.length;
  } catch {
    rounds = SIMULATED_MAX_ROUNDS;
  }
  if (scheduled.size >= SCHEDULES_REMEMBERED_MAX) scheduled.clear();
  scheduled.set(key, rounds);
  return rounds;
}

/** The rounds a run may open in all: `limits.rounds`, else what its schedule may need plus EXTRA_ROUNDS. */
export function roundLimit(config: Config): number {
  return config.limits.rounds ?? scheduleRounds(config) + EXTRA_ROUNDS;
}

/** Rounds the run has opened, and extra fork rounds asked for and not opened yet. */
export function roundsUsed(state: RunState): number {
  const extrasOpened = state.rounds.filter((r) => r.extra).length;
  return state.rounds.length + Math.max(0, (state.extraForks ?? 0) - extrasOpened);
}

/** How many more rounds the run may open or ask for (0: none). */
export function roundsLeft(state: RunState): number {
  return Math.max(0, roundLimit(state.config) - roundsUsed(state));
}

/** Why the run may ask for no more rounds (a fork, a nightly round), for the issue; null when it may. */
export function roundLimitProblem(state: RunState): string | null {
  if (roundsLeft(state) > 0) return null;
  const used = roundsUsed(state);
  return (
    `${state.id} has opened or asked for ${used} ${used === 1 ? 'round' : 'rounds'}, all that it may (${limitText(state.config)}), ` +
    'so forkflush opens no more. A new issue starts a new run (its config may set a higher `limits.rounds`).'
  );
}

/**
 * The core's own steps (advance), except that a round beyond the limit is not opened: the run
 * finishes there instead, with what it has. `capped` says the limit ended it.
 */
export function advanceWithinLimits(
  state: RunState,
  halt: (state: RunState, next: Action) => boolean = () => false,
): { state: RunState; steps: Action[]; capped: boolean } {
  const limit = roundLimit(state.config);
  let capped = false;
  const out = advance(state, (s, next) => {
    if (halt(s, next)) return true;
    if (next.type !== 'open' || s.rounds.length < limit) return false;
    capped = true;
    return true;
  });
  if (!capped) return { ...out, capped };
  return { state: applyFinish(out.state), steps: [...out.steps, { type: 'finish' }], capped };
}

/** Whether a finished run ended at its round limit while its schedule, or a request, wanted another round. */
export function endedAtRoundLimit(state: RunState): boolean {
  if (state.status !== 'finished' || state.rounds.length < roundLimit(state.config)) return false;
  if (state.rounds.some((r) => !r.decision)) return false;
  return nextRound(state) !== null;
}

/** The note the issue comment carries for a run the round limit ended (empty otherwise). */
export function roundLimitNotes(state: RunState): string[] {
  if (!endedAtRoundLimit(state)) return [];
  return [
    `The run ended at its round limit: it opened ${state.rounds.length} rounds, all that it may (${limitText(state.config)}), before its schedule was done.`,
  ];
}

function limitText(config: Config): string {
  return config.limits.rounds !== undefined
    ? `\`limits.rounds\`: ${config.limits.rounds}`
    : `\`limits.rounds\` by default: the ${scheduleRounds(config)} its schedule may need + ${EXTRA_ROUNDS}`;
}

/**
 * Why a run may not start (or resume) while these other runs of the repository are running, for
 * the issue; null when it may. `again` says how to try again.
 */
export function runsPerRepoProblem(config: Config, running: readonly string[], again: string): string | null {
  const limit = config.limits.runs_per_repo;
  if (running.length < limit) return null;
  const which = running.join(', ');
  return (
    `${running.length === 1 ? '1 run is' : `${running.length} runs are`} already running in this repository (${which}), ` +
    `as many as \`limits.runs_per_repo\` allows (${limit}). Stop one (\`/autoresearch stop\` on its issue) or wait for one to finish, then ${again}.`
  );
}
