// The calls `forkflush map` makes and what they cost: the plan (how many specs and triplets, and
// their estimated spend, which --dry-run prints), the budget shared between calls, and the calls
// themselves: several at once, each retried once after a failure, stopping when the budget is
// spent, the judge cannot start, or it fails MAP_FAILURES_IN_A_ROW calls in a row.
import type { Config } from '../core/config.js';
import type { MapRecord, MapSnapshot } from '../core/map/record.js';
import { newQuestions } from '../core/map/sample.js';
import { type MapSettings, tripletCount } from '../core/map/settings.js';
import { MAP_CALL_ESTIMATE, MAP_ESTIMATE_FROM, MAP_FAILURES_IN_A_ROW, MAP_MOST_FAILED } from '../core/method.js';
import type { MapCache } from './map-cache.js';
import { askJudge, type JudgeCall, type JudgeReply, type JudgeSetup, type MapStep } from './map-judge.js';
import type { MapTarget } from './map-target.js';

/** What a map would ask, and what it may spend: `--dry-run` prints it, a real map starts from it. */
export interface MapPlan {
  target: MapRecord['target'];
  folder: string;
  runs: number;
  snapshots: number;
  specs: { cached: number; toAsk: number };
  triplets: { total: number; cached: number; toAsk: number };
  estimate: Record<MapStep, Estimate> & { total: number };
  budget: number;
  unit: MapSettings['unit'];
  judge: string;
}

export interface Estimate {
  each: number;
  /** "cache": the mean of this judge's calls so far; "rough": forkflush's figure for an LLM judge. */
  from: 'cache' | 'rough';
}

/**
 * The map's budget, shared between calls: each gets the budget left (less what the calls in flight
 * may still spend) in proportion to what it is expected to cost among the calls still to make, so
 * the committed spend never passes map.budget; a call that reports nothing is charged its allowance.
 */
export class Ledger {
  private inFlight = 0;
  private weightLeft = 0;

  constructor(
    readonly budget: number,
    /** What the answers the map reuses cost when they were made. */
    public spent: number,
    /** What a call of each step is expected to cost. */
    private readonly weights: Record<MapStep, number>,
    /** Keeps what a call that brought no answer cost, for the next map's ledger (an answer's is kept with it). */
    readonly keepUnanswered: (spent: number) => Promise<void> = async () => {},
  ) {}

  /**
   * The calls still to make: their expected cost, with room for retries (the most a map may fail,
   * MAP_MOST_FAILED, asked again), and what the cached answers the map now uses cost.
   */
  plan(calls: Record<MapStep, number>, reused = 0): void {
    const expected = calls.spec * this.weights.spec + calls.triplet * this.weights.triplet;
    this.weightLeft = expected * (1 + MAP_MOST_FAILED);
    this.spent += reused;
  }

  /** A call's allowance (a retry's too), or null when the budget has none left. */
  take(step: MapStep): number | null {
    const w = this.weights[step];
    const free = this.budget - this.spent - this.inFlight;
    if (free <= this.budget * 1e-9) return null;
    const share = w > 0 && this.weightLeft > w ? w / this.weightLeft : 1;
    this.weightLeft = Math.max(0, this.weightLeft - w);
    const allowance = free * share;
    this.inFlight += allowance;
    return allowance;
  }

  settle(allowance: number, spent: number): void {
    this.inFlight -= allowance;
    this.spent += spent;
  }
}

/**
 * Asks once, and once more after a failure that is not the judge failing to start. null: the
 * budget has no allowance left for the call.
 */
export async function ask(s: JudgeSetup, ledger: Ledger, call: JudgeCall): Promise<JudgeReply | null> {
  let reply: JudgeReply | null = null;
  for (let attempt = 0; attempt < 2; attempt++) {
    const allowance = ledger.take(call.step);
    if (allowance === null) return null;
    let got: JudgeReply | null = null;
    try {
      got = await askJudge(s, call, allowance);
    } finally {
      // An interrupted call is charged what it was allowed: what it spent is not known.
      const spent = got === null ? allowance : got.spent;
      ledger.settle(allowance, spent);
      if (!got?.ok && spent > 0) await ledger.keepUnanswered(spent);
    }
    reply = got;
    if (reply.ok || reply.notStarted) return reply;
  }
  return reply;
}

export type PoolEnd =
  | { kind: 'done'; firstError: string | null }
  | { kind: 'budget'; firstError: string | null }
  | { kind: 'failed'; error: string; notStarted: boolean };

/**
 * Runs `work` over the items, `concurrency` at once, saying how far it got (each tenth). Takes no
 * new item once the budget is spent, the judge cannot start, or it failed too many in a row.
 */
export async function pool<T>(
  items: T[],
  concurrency: number,
  what: string,
  log: (line: string) => void,
  work: (item: T) => Promise<JudgeReply | null>,
): Promise<PoolEnd> {
  let next = 0;
  let done = 0;
  let inARow = 0;
  let said = 0;
  let end: PoolEnd | null = null;
  let firstError: string | null = null;
  const worker = async () => {
    while (end === null && next < items.length) {
      const r = await work(items[next++] as T);
      done++;
      if (r === null) end ??= { kind: 'budget', firstError };
      else if (r.ok) inARow = 0;
      else {
        firstError ??= r.error;
        inARow++;
        if (r.notStarted || inARow >= MAP_FAILURES_IN_A_ROW)
          end ??= { kind: 'failed', error: r.error, notStarted: r.notStarted };
      }
      const tenth = Math.floor((done * 10) / items.length);
      if (tenth > said) {
        said = tenth;
        log(`${what}: ${done} of ${items.length}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  // The first error of the pool's end: a call in flight when the budget ran out may have failed since.
  // (Set by the workers: TypeScript does not see the closures assign it.)
  const last = end as PoolEnd | null;
  if (last?.kind === 'budget') return { kind: 'budget', firstError };
  return last ?? { kind: 'done', firstError };
}

export function planOf(
  target: Pick<MapTarget, 'kind' | 'id' | 'folder'> & { runs: readonly unknown[] },
  snapshots: MapSnapshot[],
  specs: Map<string, { spent: number }>,
  cache: MapCache,
  settings: MapSettings,
  seed: number,
): MapPlan {
  const ids = snapshots.map((x) => x.commit);
  const inMap = new Set(ids);
  const cached = [...cache.judgments.values()].filter((j) => inMap.has(j.anchor) && inMap.has(j.a) && inMap.has(j.b));
  const total = tripletCount(settings, snapshots.length);
  const toAsk = newQuestions(ids, total, new Set(cache.judgments.keys()), seed).length;
  const spec = estimate(
    'spec',
    [...specs.values()].map((x) => x.spent),
    settings,
  );
  const triplet = estimate(
    'triplet',
    [...cache.judgments.values()].map((x) => x.spent),
    settings,
  );
  const specsToAsk = snapshots.filter((x) => !specs.has(x.commit)).length;
  return {
    target: { kind: target.kind, id: target.id },
    folder: target.folder,
    runs: target.runs.length,
    snapshots: snapshots.length,
    specs: { cached: snapshots.length - specsToAsk, toAsk: specsToAsk },
    triplets: { total: Math.max(total, cached.length), cached: cached.length, toAsk },
    estimate: { spec, triplet, total: specsToAsk * spec.each + toAsk * triplet.each },
    budget: settings.budget,
    unit: settings.unit,
    judge: judgeLabel(settings.judge),
  };
}

/** What a call of the step costs: this judge's mean so far, or forkflush's rough figure. */
function estimate(step: MapStep, spent: number[], settings: MapSettings): Estimate {
  if (spent.length >= MAP_ESTIMATE_FROM)
    return { each: spent.reduce((s, x) => s + x, 0) / spent.length, from: 'cache' };
  return { each: MAP_CALL_ESTIMATE[step][settings.unit], from: 'rough' };
}

export function judgeLabel(j: Config['agent']): string {
  if (j.kind === 'command') return `command (${j.command ?? '?'})`;
  return j.model ? `${j.kind} (${j.model})` : j.kind;
}
