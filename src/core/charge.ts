// What an episode is charged: what it spent where that is known, an estimate said as one where it
// is not. The ledger is money, so it is counted, not guessed, wherever it can be:
//   - minutes: the time the agent ran, measured; evaluations: the grader runs it asked for, counted;
//   - tokens and usd: what the agent reported (its CLI's usage, a command agent's usage file), never
//     less than the answers of the model calls forkflush's egress proxy relayed stated.
// An agent that reported nothing (a command agent without a usage file, one that crashed before
// writing it) leaves only estimates:
//   - one that crashed within QUICK_FAILURE_SECONDS without changing the workspace is charged
//     nothing: it failed before it could do a turn's work (a refused key answers in a second), and
//     charging it its allowance made a broken setup spend the whole budget;
//   - one that crashed later, or was stopped (Ctrl-C, a halted run), its allowance in proportion to
//     the time it used of its limit: the share of its turn it had;
//   - one that ran its course (finished, its budget or time used up) its whole allowance: it used
//     its turn, and a working agent must not be charged less than it may have spent.
// An episode tried again after a failure that passes is charged every try, each within what the
// tries before it left.
import { QUICK_FAILURE_SECONDS } from './method.js';
import type { EpisodeResult, ExitReason, SpentBasis } from './state.js';
import { formatNumber } from './text.js';

/** One try of an episode's agent, as the worker saw it end. */
export interface TryFacts {
  /** How long the agent ran. */
  seconds: number;
  /** What the agent reported it spent, in the budget's unit (tokens and usd only); null: nothing. */
  reportedSpend: number | null;
  /**
   * What the answers of the model calls forkflush's egress proxy relayed stated, in the budget's
   * unit (worker/answer-meter.ts): the charge is never less. A CLI does not count what code its agent
   * wrote asks the model with the placeholder key.
   */
  meteredSpend?: number;
  exit: ExitReason;
  /** Stopped by forkflush before it ended (Ctrl-C, a halted run): an attempt, not a result. */
  interrupted?: boolean;
}

export interface ChargeInput {
  unit: 'usd' | 'tokens' | 'minutes' | 'evaluations';
  allowance: number;
  /** The agent's time limit, in seconds (agent.timeout, or the minutes budget if less). */
  limitSeconds: number;
  tries: TryFacts[];
  /** Grader runs the agent asked for, in all its tries (the evaluations unit). */
  evaluations: number;
  /** The workspace is as the episode found it (unknown for an interrupted attempt: false). */
  unchanged: boolean;
}

export interface Charge {
  spent: number;
  basis: SpentBasis;
  /** How an estimate (or nothing) was arrived at, for the episode's note. */
  note?: string;
}

/** The charge for an episode's tries (see the top of this file). */
export function chargeFor(c: ChargeInput): Charge {
  const seconds = c.tries.reduce((s, t) => s + t.seconds, 0);
  if (c.unit === 'minutes') return { spent: round(seconds / 60), basis: 'measured' };
  if (c.unit === 'evaluations') return { spent: c.evaluations, basis: 'measured' };
  let left = c.allowance;
  let spent = 0;
  const bases = new Set<SpentBasis>();
  const estimates: string[] = [];
  for (const t of c.tries) {
    const one = tryCharge(t, left, c);
    spent += one.spent;
    left = Math.max(0, left - one.spent);
    bases.add(one.basis);
    if (one.note) estimates.push(one.note);
  }
  const basis: SpentBasis = bases.has('estimated')
    ? 'estimated'
    : bases.size === 1 && bases.has('none')
      ? 'none'
      : 'measured';
  const note =
    estimates.length === 0
      ? undefined
      : basis === 'estimated'
        ? `no usage reported: charged ${formatNumber(spent, 6)} ${c.unit} as an estimate (${estimates.join('; ')})`
        : estimates.join('; ');
  return { spent: round(spent), basis, ...(note ? { note } : {}) };
}

function tryCharge(t: TryFacts, allowance: number, c: ChargeInput): Charge {
  const own = agentCharge(t, allowance, c);
  const seen = t.meteredSpend ?? 0;
  if (!(seen > own.spent)) return own;
  const said = t.reportedSpend === null ? 'reported nothing' : `reported ${formatNumber(t.reportedSpend, 6)}`;
  return {
    spent: seen,
    basis: 'measured',
    note: `the model calls forkflush's proxy relayed stated ${formatNumber(seen, 6)} ${c.unit} in their answers and the agent ${said}: the larger charged`,
  };
}

/** A try's charge by what its agent reported, or estimated where it reported nothing. */
function agentCharge(t: TryFacts, allowance: number, c: ChargeInput): Charge {
  if (t.reportedSpend !== null) return { spent: t.reportedSpend, basis: 'measured' };
  const failed = t.exit === 'crash' || t.interrupted === true;
  if (!failed)
    return { spent: allowance, basis: 'estimated', note: `it ran its course (${t.exit}): its whole allowance` };
  if (!t.interrupted && c.unchanged && t.seconds < QUICK_FAILURE_SECONDS)
    return {
      spent: 0,
      basis: 'none',
      note: `charged nothing: it failed after ${formatNumber(t.seconds, 1)} s, before it could spend (under ${QUICK_FAILURE_SECONDS} s, no usage reported, the workspace unchanged)`,
    };
  const share = c.limitSeconds > 0 ? Math.min(1, t.seconds / c.limitSeconds) : 1;
  return {
    spent: allowance * share,
    basis: 'estimated',
    note: `${t.interrupted ? 'stopped' : 'crashed'} after ${formatNumber(t.seconds, 1)} s of its ${formatNumber(c.limitSeconds, 0)} s: that share of its allowance`,
  };
}

/**
 * A result of a re-run job (GitHub's "Re-run failed jobs") with what the `earlier` attempts of the
 * job may have spent: a lost runner pushes no result, so what its agent spent is in no record. Each
 * is charged the episode's whole allowance, an estimate said as one.
 */
export function withEarlierAttempts<R extends Pick<EpisodeResult, 'earlierSpent' | 'note'>>(
  r: R,
  earlier: number,
  allowance: number,
  unit: string,
): R {
  if (!(earlier >= 1)) return r;
  const extra = round(allowance * earlier);
  const before = earlier === 1 ? 'the attempt before it' : `each of the ${earlier} attempts before it`;
  const note = `a re-run (attempt ${earlier + 1} of its workflow run): ${before} may have run the agent with no result recorded, charged its whole allowance (${formatNumber(extra, 6)} ${unit} in all, an estimate)`;
  return { ...r, earlierSpent: extra, note: [r.note, note].filter(Boolean).join('; ') };
}

/** Six decimals are plenty for any unit and keep float noise out of commits and reports. */
function round(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
