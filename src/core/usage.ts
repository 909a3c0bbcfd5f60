// What an episode spent, by one set of rules for every agent: tokens per model (`Tally`), a running
// total's share (`shareOf`, never less than can be proven), the CLI's cost or forkflush's price, the bounds.
import { REPORTED_FIGURE_MAX } from './bounds.js';
import type { Unit } from './config.js';
import { priceTokens } from './pricing.js';
import { validUsage } from './records.js';
import type { AgentUsage, ExitReason } from './state.js';
import { formatNumber } from './text.js';

/** What the bounds are checked against: the budget's unit and the episode's allowance in it. */
interface Bounds {
  unit: Unit;
  allowance: number;
}

/** One model's use: `input` counts all input, the cached and cache-written parts included. */
export interface ModelUse {
  input: number;
  cached: number;
  written: number;
  output: number;
  calls: number;
  /** Dollars as the CLI priced them; null when it did not (forkflush prices them). */
  costUsd: number | null;
}

export type Tally = Record<string, ModelUse>;

/** What an episode spent, as a spec reads it. */
export interface Spent {
  tally: Tally;
  /** Model turns, where the CLI counts them otherwise than by calls (null: unknown). */
  turns?: number | null;
  /** The episode's whole cost, where the CLI states it apart from the models (AI credits). */
  costUsd?: number;
  /** Where the figures came from, when not the usual place. */
  notes?: string[];
  /** The tokens are known but not what they cost the budget: the whole allowance is charged. */
  unsure?: boolean;
  /** The spend in the budget's unit, where the agent reports only that (a command agent): no usage. */
  spend?: number;
}

const FIELDS = ['input', 'cached', 'written', 'output', 'calls'] as const;

/** Adds a model's use to a tally (an unknown cost makes the sum unknown). */
export function addUse(t: Tally, model: string, u: Partial<ModelUse>): Tally {
  const cost = u.costUsd ?? null;
  const m = t[model];
  if (!m) t[model] = { ...counts({ input: 0, cached: 0, written: 0, output: 0, calls: 0, ...u }), costUsd: cost };
  else {
    for (const f of FIELDS) m[f] += u[f] ?? 0;
    m.costUsd = m.costUsd === null || cost === null ? null : m.costUsd + cost;
  }
  return t;
}

function counts(u: Omit<ModelUse, 'costUsd'>): Omit<ModelUse, 'costUsd'> {
  return { input: u.input, cached: u.cached, written: u.written, output: u.output, calls: u.calls };
}

/**
 * Why figures read from a CLI cannot be taken as its spend, or null. A count below zero or not a
 * number (a broken provider's usage) would be netted against the rest; a model that answered with no
 * input counted (a provider that reports no usage: a call always reads its prompt) would be a certain 0.
 */
export function unsureFigures(tally: Tally, answered: boolean): string | null {
  for (const [model, m] of Object.entries(tally))
    for (const f of [...FIELDS, 'costUsd'] as const) {
      const v = m[f];
      if (v !== null && !(Number.isFinite(v) && v >= 0))
        return `the usage reported for ${model} cannot be counted (${f}: ${v})`;
    }
  const input = Object.values(tally).reduce((n, m) => n + m.input, 0);
  return answered && input === 0 ? 'the model answered, but no input tokens were reported for it' : null;
}

export function sumTallies(...tallies: (Tally | null)[]): Tally {
  const out: Tally = {};
  for (const t of tallies) for (const [model, u] of Object.entries(t ?? {})) addUse(out, model, u);
  return out;
}

/**
 * This episode's share of running totals: after minus before, figure by figure. A total that went
 * down means the CLI counted afresh: the total after it is charged, with a note (never under-report).
 */
export function ownShare<T extends { [K in keyof T]: number }>(
  before: T | null,
  after: T,
): { share: T; note?: string } {
  const share = { ...after };
  const down: string[] = [];
  for (const key of Object.keys(after) as (keyof T)[]) {
    const b = before?.[key] ?? 0;
    const a = after[key] as number;
    if (a >= b) share[key] = (a - b) as T[keyof T];
    else down.push(String(key));
  }
  return down.length > 0
    ? {
        share,
        note: `the running totals went down (${down.join(', ')}): the CLI counted afresh, so the totals after the episode are charged as its own`,
      }
    : { share };
}

/** `ownShare` of two tallies, model by model. */
export function shareOf(before: Tally | null, after: Tally): { share: Tally; note?: string } {
  const share: Tally = {};
  let note: string | undefined;
  for (const [model, a] of Object.entries(after)) {
    const b = before?.[model];
    const own = ownShare(b ? counts(b) : null, counts(a));
    note ??= own.note;
    const costUsd =
      a.costUsd === null ? null : b?.costUsd != null && a.costUsd >= b.costUsd ? a.costUsd - b.costUsd : a.costUsd;
    // A figure that is not a count (NaN) stays, for unsureFigures to see: dropped, it would be a 0.
    if (FIELDS.some((f) => !(own.share[f] <= 0))) share[model] = { ...own.share, costUsd };
  }
  return note ? { share, note } : { share };
}

/** What an episode spent of a conversation's running totals (`shareOf` before and after), with its note. */
export function spentSince(before: Tally | null, after: Tally, rest: Omit<Spent, 'tally'> = {}): Spent {
  const own = shareOf(before, after);
  return { ...rest, tally: own.share, notes: [...(rest.notes ?? []), ...(own.note ? [own.note] : [])] };
}

/** The episode's usage: tokens in and out, its cost (the CLI's, else priced), its turns. */
export function usageOf(spent: Spent): AgentUsage {
  let inputTokens = 0;
  let outputTokens = 0;
  let cost = 0;
  let calls = 0;
  const priced = new Set<string>();
  for (const [model, m] of Object.entries(spent.tally)) {
    inputTokens += m.input;
    outputTokens += m.output;
    calls += m.calls;
    if (m.costUsd !== null) cost += m.costUsd;
    else if (m.input + m.output > 0) {
      // litellm's and opencode's names carry a provider ("openai/gpt-4o").
      const p = priceTokens(model.replace(/^.*\//, ''), {
        input: m.input,
        cachedInput: m.cached,
        cacheWrite: m.written,
        output: m.output,
      });
      cost += p.costUsd;
      priced.add(p.pricedFrom);
    }
  }
  return {
    inputTokens,
    outputTokens,
    costUsd: Math.round((spent.costUsd ?? cost) * 1e9) / 1e9,
    turns: spent.turns === undefined ? calls : spent.turns,
    ...(priced.size > 0 && spent.costUsd === undefined ? { pricedFrom: [...priced].join('; ') } : {}),
  };
}

/** The spend in the budget's unit from an episode's usage (null for units the agent does not measure). */
export function spendOf(
  s: Pick<Bounds, 'unit'>,
  u: { inputTokens: number; outputTokens: number; costUsd: number | null },
) {
  if (s.unit === 'tokens') return u.inputTokens + u.outputTokens;
  if (s.unit === 'usd') return u.costUsd;
  return null;
}

/** The spend in the budget's unit of a tally, priced as usageOf prices it (null for units that are not tokens or usd). */
export function tallySpend(unit: Unit, tally: Tally): number | null {
  return spendOf({ unit }, usageOf({ tally }));
}

/** Why a session has gone past its bounds (turns, tokens, dollars), or undefined while it has not. */
export function overrunReason(
  s: Bounds,
  usage: { inputTokens: number; outputTokens: number; costUsd: number | null },
  turns: number,
  maxTurns: number | undefined,
): string | undefined {
  if (maxTurns !== undefined && turns > maxTurns) return `passed agent.max_turns (${maxTurns})`;
  const spent =
    s.unit === 'tokens' ? usage.inputTokens + usage.outputTokens : s.unit === 'usd' ? (usage.costUsd ?? 0) : 0;
  if (spent <= s.allowance || (s.unit !== 'tokens' && s.unit !== 'usd')) return undefined;
  return s.unit === 'tokens'
    ? `spent ${spent} tokens of its ${formatNumber(s.allowance, 6)}`
    : `spent $${formatNumber(spent, 6)} of its $${formatNumber(s.allowance, 6)}`;
}

/** The bounds, checked once more on the final usage: an overrun the watcher did not catch is one all the same. */
export function settleBounds<
  O extends { exit: ExitReason; reportedSpend: number | null; usage?: AgentUsage; note?: string },
>(s: Bounds, o: O, maxTurns?: number): O {
  if (o.exit !== 'finished') return o;
  const measured = s.unit === 'tokens' || s.unit === 'usd';
  const turns = o.usage?.turns ?? null;
  const why =
    measured && o.reportedSpend !== null && o.reportedSpend > s.allowance
      ? `it spent ${Number(o.reportedSpend.toPrecision(6))} of its ${formatNumber(s.allowance, 6)} ${s.unit}`
      : maxTurns !== undefined && turns !== null && turns > maxTurns
        ? `it took ${turns} turns, past agent.max_turns (${maxTurns})`
        : null;
  if (!why) return o;
  const note = `an overrun: ${why} (found when the session ended)`;
  return { ...o, exit: 'budget', note: o.note ? `${o.note}; ${note}` : note };
}

/**
 * An outcome whose figures a record can hold: a reported spend or usage that is negative, not a
 * finite number or past REPORTED_FIGURE_MAX is not taken, with a note; the spend is then unknown,
 * and charged as such (core/charge.ts).
 */
export function believableFigures<O extends { reportedSpend: number | null; usage?: AgentUsage; note?: string }>(
  o: O,
): O {
  const believable = (x: number | null) => x === null || (Number.isFinite(x) && x >= 0 && x <= REPORTED_FIGURE_MAX);
  const notes: string[] = [];
  const out = { ...o };
  if (!believable(o.reportedSpend)) {
    notes.push(`the agent reported a spend of ${o.reportedSpend}, which cannot be: not taken`);
    out.reportedSpend = null;
  }
  const u = o.usage;
  if (u && (!validUsage(u) || ![u.inputTokens, u.outputTokens, u.costUsd, u.turns].every(believable))) {
    notes.push(
      `the agent reported usage that cannot be (${u.inputTokens} tokens in, ${u.outputTokens} out, $${u.costUsd}, ${u.turns} turns): not taken`,
    );
    delete out.usage;
  }
  if (notes.length > 0) out.note = [o.note, ...notes].filter(Boolean).join('; ');
  return out;
}
