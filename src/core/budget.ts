// Budget accounting. The ledger is the episodes' actual spend, never their allowances.
import { LEAST_EPISODE_SHARE } from './method.js';
import type { Episode, RunState } from './state.js';

/** What finished episodes spent, in the budget's unit. */
export function spent(state: RunState, lineage?: number): number {
  let sum = 0;
  for (const r of state.rounds) {
    for (const e of r.episodes) if (lineage === undefined || e.lineage === lineage) sum += charged(e);
  }
  return sum;
}

/** What an episode cost: its result's spend, and what its interrupted attempts (and a re-run's earlier ones) spent. */
export function charged(e: Episode): number {
  return (e.result?.spent ?? 0) + (e.result?.earlierSpent ?? 0) + (e.interruptedSpent ?? 0);
}

/** How much of `spent(state)` is an estimate (core/charge.ts): spend of agents that reported no usage. */
export function estimatedSpent(state: RunState): number {
  let sum = 0;
  for (const e of state.rounds.flatMap((r) => r.episodes)) {
    if (e.result?.spentBasis === 'estimated') sum += e.result.spent;
    if (e.interruptedBasis === 'estimated') sum += e.interruptedSpent ?? 0;
    sum += e.result?.earlierSpent ?? 0;
  }
  return sum;
}

/**
 * Below this, what is left of a stretch of budget is not worth an episode of its own
 * (LEAST_EPISODE_SHARE of one): agents that stop a little early would otherwise trail ever smaller episodes.
 */
export function minEpisode(state: RunState): number {
  return state.config.budget.episode * LEAST_EPISODE_SHARE;
}

/** The same for a fork round's branch, whose budget may be smaller than a serial episode's. */
export function minBranch(state: RunState): number {
  const branch = state.config.fork.branch_budget * state.config.budget.total;
  return Math.min(branch * LEAST_EPISODE_SHARE, minEpisode(state));
}

/**
 * What the schedule has spent: extra fork rounds (asked for by a command or a nightly schedule)
 * come on top of the budget, so they do not move the schedule's fork points.
 */
export function spentOnSchedule(state: RunState, lineage?: number): number {
  let sum = 0;
  for (const r of state.rounds) {
    if (r.extra) continue;
    for (const e of r.episodes) if (lineage === undefined || e.lineage === lineage) sum += charged(e);
  }
  return sum;
}
