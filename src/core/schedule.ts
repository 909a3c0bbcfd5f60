// The schedule: given what a run has spent so far, which round comes next. Rounds fire at fixed
// fractions of the budget spent, never on a "plateau" signal (method.md: 15 of 25 plateau-triggered
// runs ran out of budget first). `plan()` previews the whole run by simulating the schedule with
// episodes that spend exactly their allowance, so the preview and the real run share one rule.
import { charged, minBranch, minEpisode, spentOnSchedule } from './budget.js';
import type { Config, Strategy } from './config.js';
import { DIRECTIVE_SEED_SALT, LEAST_EPISODE_SHARE, maxSerialEpisodes } from './method.js';
import { mixSeed, pickIndices } from './rng.js';
import { type ContextMode, type Episode, episodeId, type Round, type RoundKind, type RunState } from './state.js';
import { formatNumber } from './text.js';

/** Strategies that run parallel fork rounds (the others only run serial episodes). */
export function forks(strategy: Strategy): boolean {
  return strategy === 'fork-and-flush' || strategy === 'fork-only';
}

/** How many lineages a strategy keeps: best-of-n runs N = fork.branches of them. */
export function lineageCount(config: Config): number {
  return config.strategy === 'best-of-n' ? config.fork.branches : 1;
}

/**
 * Where each segment of the schedule starts, in budget units. Segment 0 starts at once; segment s
 * starts at fork point s (fork-and-flush and fork-only fork there, flush-only clears the context).
 */
export function segmentStarts(config: Config): number[] {
  if (config.strategy === 'single-run' || config.strategy === 'best-of-n') return [0];
  return [0, ...config.fork.at.map((a) => a * config.budget.total)];
}

/**
 * Splits what is left of a stretch into equal episodes of about one episode budget each; a
 * remainder of up to LEAST_EPISODE_SHARE of an episode joins the last one rather than becoming an
 * episode of its own.
 */
function serialAllowance(left: number, episodeBudget: number): number {
  return left / Math.max(1, Math.ceil(left / episodeBudget - LEAST_EPISODE_SHARE - 1e-9));
}

/** The next round to open, or null when the budget is spent (the run is finished). */
export function nextRound(state: RunState): Round | null {
  if (state.rounds.some((r) => !r.decision)) throw new Error('nextRound: a round is still open');
  const extraDone = state.rounds.filter((r) => r.extra).length;
  // An extra round asked for opens if what is left of schedule.budget still pays for it (two
  // requests at once may find it spent: the second then opens nothing).
  const each = (state.extraForks ?? 0) > extraDone ? extraAllowance(state) : null;
  if (each !== null) return forkRound(state, Math.max(0, state.rounds.at(-1)?.segment ?? 0), true, each);
  return state.config.strategy === 'best-of-n' ? nextBestOfNRound(state) : nextLeaderRound(state);
}

/**
 * The rounds after the plan (on GitHub: nightly ones, and those `/autoresearch fork` asks for):
 * whether one runs each night, what they may spend together (schedule.budget), and
 * their end (the last day, how many in all). A config's `schedule: none` asks only for rounds on
 * request, up to budget.total more; `nightly` alone is how runs recorded before schedule had a
 * budget said it: the same budget, nightly, with no end but limits.rounds.
 */
export interface ExtraRounds {
  nightly: boolean;
  budget: number;
  until: string | null;
  rounds: number | null;
}

export function extraRounds(config: Config): ExtraRounds {
  const s = config.schedule;
  if (typeof s === 'object')
    return { nightly: s.nightly, budget: s.budget, until: s.until ?? null, rounds: s.rounds ?? null };
  return { nightly: s === 'nightly', budget: config.budget.total, until: null, rounds: null };
}

/** What the rounds after the plan have spent. */
export function extraSpent(state: RunState): number {
  let sum = 0;
  for (const r of state.rounds) if (r.extra) for (const e of r.episodes) sum += charged(e);
  return sum;
}

/** Rounds after the plan asked for: those opened, and those asked for and not opened yet. */
export function extraAsked(state: RunState): number {
  return Math.max(state.extraForks ?? 0, state.rounds.filter((r) => r.extra).length);
}

/** What one branch of the next round after the plan may spend, or null when what is left pays for no round. */
function extraAllowance(state: RunState): number | null {
  const c = state.config;
  const left = extraRounds(c).budget - extraCommitted(state);
  const each = Math.min(c.fork.branch_budget * c.budget.total, left / c.fork.branches);
  return each >= minBranch(state) ? each : null;
}

/**
 * What the rounds after the plan have spent or may still spend: finished episodes' spend, the
 * allowance of each that has no result yet. (Rounds asked for and not opened are not counted:
 * each opens only with what is left then.)
 */
function extraCommitted(state: RunState): number {
  let sum = 0;
  for (const r of state.rounds) {
    if (!r.extra) continue;
    for (const e of r.episodes) sum += e.result ? charged(e) : Math.max(e.allowance, charged(e));
  }
  return sum;
}

/**
 * Why no more round may be asked for after the plan now (a nightly one, `/autoresearch fork`), for
 * the issue; null when one may. `now` is the day it would start on.
 */
export function extraRefusal(state: RunState, now: Date): string | null {
  const x = extraRounds(state.config);
  const unit = state.config.budget.unit;
  const asked = extraAsked(state);
  if (x.rounds !== null && asked >= x.rounds) {
    return `the run has had the ${x.rounds} round${x.rounds === 1 ? '' : 's'} after its plan that \`schedule.rounds\` allows`;
  }
  if (x.until !== null && now.toISOString().slice(0, 10) > x.until) {
    return `\`schedule.until\` (${x.until}) has passed`;
  }
  // A round asked for and not opened yet takes what is left first.
  const pending = asked - state.rounds.filter((r) => r.extra).length;
  const perRound = state.config.fork.branches * state.config.fork.branch_budget * state.config.budget.total;
  const left = x.budget - extraCommitted(state) - pending * perRound;
  if (left / state.config.fork.branches < minBranch(state)) {
    return (
      `the rounds after the plan have spent ${formatNumber(extraSpent(state), 2)} of their ${formatNumber(x.budget)} ${unit}` +
      ` (${typeof state.config.schedule === 'object' ? '`schedule.budget`' : '`budget.total` more, without `schedule.budget`'}), too little is left for another round`
    );
  }
  return null;
}

/** Why a new run's config cannot have its rounds after the plan: its `schedule.until` is past; or null. */
export function untilPassed(config: Config, now: Date): string | null {
  const { until } = extraRounds(config);
  const today = now.toISOString().slice(0, 10);
  if (until === null || today <= until) return null;
  return `\`schedule.until\` (${until}) has passed (today is ${today}, UTC), so no round after the plan could run: set a later date`;
}

/** The rounds after the plan, in a line for the plan and the issue (null: a config that asks for none nightly and sets no budget). */
export function extraRoundsText(config: Config): string | null {
  const x = extraRounds(config);
  if (config.schedule === 'none' || forkRefusalOf(config) !== null) return null;
  const unit = config.budget.unit;
  const each = formatNumber(config.fork.branch_budget * config.budget.total, 2);
  const end = [
    ...(x.rounds !== null ? [`at most ${x.rounds} round${x.rounds === 1 ? '' : 's'}`] : []),
    ...(x.until !== null ? [`until ${x.until}`] : []),
  ];
  return (
    `${x.nightly ? 'one fork round of the leader a night, and ' : ''}rounds asked for with /autoresearch fork, ` +
    `${config.fork.branches} branches of up to ${each} ${unit} each, ${formatNumber(x.budget)} ${unit} in all` +
    (end.length > 0 ? `, ${end.join(', ')}` : '')
  );
}

/** Why a config's runs have no leader to fork after the plan (best-of-n keeps N lineages), or null. */
function forkRefusalOf(config: Config): string | null {
  return lineageCount(config) === 1 ? null : `${config.strategy} has no single leader to fork`;
}

/** Why the run has no leader to fork one more round from (best-of-n keeps N lineages), or null. */
export function forkRefusal(state: RunState): string | null {
  return state.lineages.length === 1 ? null : forkRefusalOf(state.config);
}

/** Asks for one more fork round of the leader now, beyond the schedule (and its budget). */
export function requestFork(state: RunState, asked?: string): RunState {
  const refusal = forkRefusal(state);
  if (refusal) throw new Error(refusal);
  const extraForks = (state.extraForks ?? 0) + 1;
  const forkAsks = asked ? { ...state.forkAsks, [extraForks]: asked } : state.forkAsks;
  return { ...state, status: 'running', extraForks, ...(forkAsks ? { forkAsks } : {}) };
}

function nextLeaderRound(state: RunState): Round | null {
  const c = state.config;
  const total = c.budget.total;
  const used = spentOnSchedule(state);
  const tiny = minEpisode(state);
  const points = segmentStarts(c);
  const last = state.rounds.at(-1);
  const segment = last ? last.segment : -1;
  const next = segment + 1;
  const startNext = () => openSegment(state, next, used);
  const due = next < points.length && used >= (points[next] as number) - tiny;
  // A fork round due is measured by its branches' size, not a serial episode's.
  if (due && forks(c.strategy) && (total - used) / c.fork.branches >= minBranch(state)) return startNext();
  if (total - used <= tiny) return null;
  if (due) return startNext();

  const end = next < points.length ? (points[next] as number) : total;
  const left = end - used;
  const serialSoFar = state.rounds.filter((r) => r.segment === segment && r.kind === 'serial' && !r.extra).length;
  const span = end - (points[segment] as number);
  if (left <= tiny || serialSoFar >= maxSerialEpisodes(span, c.budget.episode)) {
    return next < points.length ? startNext() : null;
  }
  const lineage = state.lineages[0];
  if (!lineage) throw new Error('run state has no lineage');
  const context: ContextMode = lineage.context ? 'carry' : 'fresh';
  return serialRound(state, segment, [{ lineage: 0, allowance: serialAllowance(left, c.budget.episode), context }]);
}

/** The first round of a segment: a fork round, or (flush-only, single-run) a fresh serial episode. */
function openSegment(state: RunState, segment: number, used: number): Round {
  const c = state.config;
  const total = c.budget.total;
  if (!forks(c.strategy)) {
    const points = segmentStarts(c);
    const end = segment + 1 < points.length ? (points[segment + 1] as number) : total;
    // Overspending can carry a run past a whole segment: flush at the latest point instead.
    if (end - used <= minEpisode(state) && segment + 1 < points.length) return openSegment(state, segment + 1, used);
    const allowance = serialAllowance(end - used, c.budget.episode);
    return serialRound(state, segment, [{ lineage: 0, allowance, context: 'fresh' }]);
  }
  return forkRound(state, segment, false, Math.min(c.fork.branch_budget * total, (total - used) / c.fork.branches));
}

/** K branches from the leader's workspace (an opening round when nothing has run yet). */
function forkRound(state: RunState, segment: number, extra: boolean, budget?: number): Round {
  const c = state.config;
  const k = c.fork.branches;
  const index = state.rounds.length;
  const allowance = budget ?? c.fork.branch_budget * c.budget.total;
  const opening = state.rounds.length === 0;
  const leader = state.lineages[0];
  if (!leader) throw new Error('run state has no lineage');
  // fork-only branches inherit a copy of the leader's context; fork-and-flush branches start fresh.
  const copy = c.strategy === 'fork-only' && leader.context !== null;
  const extras = state.rounds.filter((r) => r.extra).length;
  // What a person asked an extra round to try goes to each of its branches, in place of the directive.
  const asked = extra ? state.forkAsks?.[extras + 1] : undefined;
  const directed =
    opening || asked ? [] : pickIndices(k, c.fork.directives, mixSeed(state.seed, index, DIRECTIVE_SEED_SALT));
  const episodes: Episode[] = Array.from({ length: k }, (_, branch) => ({
    id: episodeId(index, branch),
    round: index,
    branch,
    lineage: 0,
    base: leader.head,
    allowance,
    context: copy ? 'copy' : 'fresh',
    contextFrom: copy ? leader.context : null,
    directive: directed.includes(branch),
    ...(asked ? { asked } : {}),
    seed: mixSeed(state.seed, index, branch),
  }));
  const phase = extra ? `extra fork ${extras + 1}` : opening ? 'opening' : `fork ${segment}`;
  return { index, segment, phase, kind: 'fork', episodes, ...(extra ? { extra: true } : {}) };
}

function nextBestOfNRound(state: RunState): Round | null {
  const c = state.config;
  const share = c.budget.total / state.lineages.length;
  // A share smaller than an episode is each lineage's whole run, not a remainder.
  const tiny = Math.min(minEpisode(state), share * LEAST_EPISODE_SHARE);
  const wanted: { lineage: number; allowance: number; context: ContextMode }[] = [];
  for (const lineage of state.lineages) {
    const left = share - spentOnSchedule(state, lineage.index);
    const episodes = state.rounds.filter((r) => r.episodes.some((e) => e.lineage === lineage.index)).length;
    if (left <= tiny || episodes >= maxSerialEpisodes(share, c.budget.episode)) continue;
    wanted.push({
      lineage: lineage.index,
      allowance: serialAllowance(left, c.budget.episode),
      context: lineage.context ? 'carry' : 'fresh',
    });
  }
  return wanted.length === 0 ? null : serialRound(state, 0, wanted);
}

function serialRound(
  state: RunState,
  segment: number,
  wanted: { lineage: number; allowance: number; context: ContextMode }[],
): Round {
  const index = state.rounds.length;
  const c = state.config;
  const episodes = wanted.map(({ lineage, allowance, context }): Episode => {
    const l = state.lineages[lineage];
    if (!l) throw new Error(`run state has no lineage ${lineage}`);
    // Within best-of-n each lineage keeps its own branch number, so names stay stable.
    const branch = lineage;
    return {
      id: episodeId(index, branch),
      round: index,
      branch,
      lineage,
      base: l.head,
      allowance,
      context,
      contextFrom: context === 'fresh' ? null : l.context,
      directive: false,
      seed: mixSeed(state.seed, index, branch),
    };
  });
  const lastSegment = c.strategy === 'single-run' || c.strategy === 'best-of-n' ? 0 : c.fork.at.length;
  const phase = lastSegment === 0 ? 'solo' : segment === lastSegment ? 'final' : `solo ${segment + 1}`;
  return { index, segment, phase, kind: 'serial' as RoundKind, episodes };
}
