// The plan: a preview of the whole run, phase by phase, made by running the real schedule with
// episodes that spend exactly their allowance. Every strategy plans to spend exactly budget.total.

import { SIMULATED_MAX_ROUNDS } from './bounds.js';
import type { Config } from './config.js';
import { episodeLimitSeconds, LEAST_USEFUL_EPISODE, roundDeadlineMinutes, SETUP_RUNS } from './method.js';
import { applyResult, reconcile } from './reconcile.js';
import { extraRoundsText } from './schedule.js';
import { type Episode, type EpisodeResult, findEpisode, newRunState, type RoundKind, type RunState } from './state.js';
import { formatNumber, textTable } from './text.js';
import { advance } from './work.js';

export interface PlanPhase {
  phase: string;
  kind: RoundKind;
  /** Parallel episodes per round: K for a fork round, the lineages for a serial one. */
  branches: number;
  rounds: number;
  budgetEach: number;
  spend: number;
  cumulative: number;
}

/** What a simulated episode spends and scores. */
export type SimulatedOutcome = (episode: Episode) => { spent: number; score: number | null };

/** Runs the schedule to the end without agents: the whole run's rounds, as the core would decide them. */
export function simulate(
  config: Config,
  outcome: SimulatedOutcome,
  seed = 0,
  maxRounds = SIMULATED_MAX_ROUNDS,
): RunState {
  let state = newRunState({ id: 'plan', seed, config, baseCommit: 'base', baseScore: null });
  for (let round = 0; round < maxRounds; round++) {
    // The same steps as the local runner and the GitHub sync take, with made-up episodes.
    state = advance(state).state;
    const pending = reconcile(state).flatMap((a) => (a.type === 'run' ? [a.episode] : []));
    if (pending.length === 0) return state;
    for (const id of pending) {
      const episode = findEpisode(state, id) as Episode;
      const { spent, score } = outcome(episode);
      const result: EpisodeResult = {
        commit: `commit-${episode.id}`,
        score,
        spent,
        exit: 'finished',
        protectedChanged: [],
        agentSeconds: 0,
        graderSeconds: 0,
        wallSeconds: 0,
      };
      state = applyResult(state, episode.id, result);
    }
  }
  throw new Error(`simulate: the schedule did not finish within ${maxRounds} rounds`);
}

/** The planned phases of a run. */
export function plan(config: Config): PlanPhase[] {
  const state = simulate(config, (e) => ({ spent: e.allowance, score: null }));
  const phases: PlanPhase[] = [];
  let cumulative = 0;
  for (const round of state.rounds) {
    const spend = round.episodes.reduce((s, e) => s + e.allowance, 0);
    cumulative += spend;
    const last = phases.at(-1);
    if (last && last.phase === round.phase && last.kind === round.kind) {
      last.rounds += 1;
      last.spend += spend;
      last.cumulative = cumulative;
      continue;
    }
    phases.push({
      phase: round.phase,
      kind: round.kind,
      branches: round.episodes.length,
      rounds: 1,
      budgetEach: round.episodes[0]?.allowance ?? 0,
      spend,
      cumulative,
    });
  }
  return phases;
}

/** `forkflush plan` output: one row a phase. */
export function planTable(config: Config): string {
  const unit = config.budget.unit;
  const total = config.budget.total;
  const phases = plan(config);
  const rows = phases.map((p) => [
    p.phase,
    p.kind === 'fork' ? `fork round` : 'serial',
    String(p.branches),
    String(p.rounds),
    formatNumber(p.budgetEach, 2),
    formatNumber(p.spend, 2),
    `${formatNumber(p.cumulative, 2)} (${Math.round((p.cumulative / total) * 100)}%)`,
  ]);
  const title = `strategy ${config.strategy}, budget ${formatNumber(total)} ${unit}${widthText(config, phases)}`;
  const after = extraRoundsText(config);
  return `${title}\n\n${textTable(
    ['phase', 'kind', 'branches', 'episodes', `budget each (${unit})`, 'spend', 'cumulative'],
    rows,
  )}${after ? `\n\non GitHub, after the plan: ${after}` : ''}`;
}

/** ", K = 4" where the plan runs branches side by side; nothing for a plan of one branch at a time (single-run). */
export function widthText(config: Config, phases = plan(config)): string {
  return phases.some((p) => p.branches > 1) ? `, K = ${config.fork.branches}` : '';
}

/** Warnings about a plan that will run but hardly make sense: an agent CLI's episodes too small, or fractional gradings. */
export function planWarnings(config: Config, phases = plan(config)): string[] {
  const unit = config.budget.unit;
  const smallest = Math.min(...phases.map((p) => p.budgetEach));
  const warnings: string[] = [];
  const least = LEAST_USEFUL_EPISODE[unit];
  // A command agent counts in units of its own; an agent CLI's steps cost what model calls cost.
  if (config.agent.kind !== 'command' && smallest < least && !(unit === 'tokens' && smallest < 1)) {
    warnings.push(
      `the smallest episode gets ${formatNumber(smallest, 3)} ${unit}, less than one agent step usually costs (${least} ${unit}): ` +
        'raise budget.total or budget.episode, or lower fork.branches',
    );
  }
  if (unit === 'tokens' && smallest < 1) {
    warnings.push(
      `the smallest episode gets ${formatNumber(smallest, 3)} tokens, less than one token: raise budget.total or budget.episode, or lower fork.branches`,
    );
  }
  warnings.push(...setupWarnings(config, smallest));
  // A budget in minutes is time the agent may work: agent.timeout cutting it short leaves it unspent.
  const largest = Math.max(...phases.map((p) => p.budgetEach));
  if (unit === 'minutes' && largest * 60 > config.agent.timeout) {
    warnings.push(
      `the largest episode gets ${formatNumber(largest, 3)} minutes, but agent.timeout (${config.agent.timeout} s) stops ` +
        `every episode at ${formatNumber(config.agent.timeout / 60, 3)}: set agent.timeout to at least ${Math.ceil(largest * 60)}`,
    );
  }
  const a = config.agent;
  const given = { model: a.model !== undefined, max_turns: a.max_turns !== undefined, args: a.args.length > 0 };
  const unread = a.kind === 'command' ? Object.keys(given).filter((k) => given[k as keyof typeof given]) : [];
  if (unread.length > 0)
    warnings.push(
      `${unread.map((k) => `agent.${k}`).join(', ')} ${unread.length > 1 ? 'are' : 'is'} for agent CLIs: the command agent ` +
        'reads none of it (put it into agent.command), or set agent.kind to the CLI it is for',
    );
  // A pipe (not `||`) between the grader and forkflush: the graded code can open it through
  // /proc and write the last line itself. forkflush's own end is a socket, which it cannot.
  if (/(^|[^|])\|(?!\|)/.test(config.grader.command)) {
    warnings.push(
      'grader.command pipes its output (|): the code it grades can write into that pipe and so print the last line, ' +
        'the score; have the grader itself print the score, and run what it grades with its output captured',
    );
  }
  if (unit === 'evaluations') {
    const fractional = phases.filter((p) => Math.abs(p.budgetEach - Math.round(p.budgetEach)) > 1e-9);
    if (fractional.length > 0) {
      warnings.push(
        `episodes get fractional evaluations (${fractional.map((p) => formatNumber(p.budgetEach, 2)).join(', ')}): ` +
          'each may call the grader only a whole number of times (rounded down, at least once); choose budget.total so that they divide it',
      );
    }
  }
  return warnings;
}

/**
 * A setup that may take longer than the work it prepares: longer than agent.timeout (or, in
 * minutes, than the smallest episode's allowance). It runs twice per episode (the workspace, the
 * judge's checkout), so a job that runs an episode needs room for both.
 */
function setupWarnings(config: Config, smallest: number): string[] {
  const setup = config.setup;
  if (setup.commands.length === 0) return [];
  const work = config.budget.unit === 'minutes' ? Math.min(config.agent.timeout, smallest * 60) : config.agent.timeout;
  if (setup.timeout <= work) return [];
  const which =
    work < config.agent.timeout
      ? `the smallest episode's ${formatNumber(smallest, 2)} minutes`
      : `agent.timeout (${formatNumber(config.agent.timeout)} s)`;
  return [
    `setup may take up to ${formatNumber(setup.timeout)} s (setup.timeout), longer than the episode it prepares (${which}); ` +
      `it runs ${SETUP_RUNS} times per episode (the workspace, the judge's checkout), so an episode may take up to ` +
      `${formatNumber(episodeLimitSeconds(config) / 60, 1)} minutes and on GitHub a round is waited for ${formatNumber(roundDeadlineMinutes(config), 1)} minutes: ` +
      "give the worker job's timeout-minutes at least that, or lower setup.timeout",
  ];
}
