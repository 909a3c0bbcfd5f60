// How `forkflush map` makes its judge calls: several at once, each retried once after a failure,
// each within an allowance of map.budget, stopping when the budget is spent, the judge cannot
// start, or it fails MAP_FAILURES_IN_A_ROW calls in a row.
import { MAP_FAILURES_IN_A_ROW } from '../core/method.js';
import { askJudge, type JudgeCall, type JudgeReply, type JudgeSetup, type MapStep } from './map-judge.js';

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
  ) {}

  /** The calls still to make: their expected cost, and what the cached answers the map now uses cost. */
  plan(calls: Record<MapStep, number>, reused = 0): void {
    this.weightLeft = calls.spec * this.weights.spec + calls.triplet * this.weights.triplet;
    this.spent += reused;
  }

  /** A call's allowance, or null when the budget has none left. A retry does not use up its share. */
  take(step: MapStep, retry: boolean): number | null {
    const w = this.weights[step];
    const free = this.budget - this.spent - this.inFlight;
    if (free <= this.budget * 1e-9) return null;
    const share = w > 0 && this.weightLeft > w ? w / this.weightLeft : 1;
    if (!retry) this.weightLeft = Math.max(0, this.weightLeft - w);
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
    const allowance = ledger.take(call.step, attempt > 0);
    if (allowance === null) return null;
    let got: JudgeReply | null = null;
    try {
      got = await askJudge(s, call, allowance);
    } finally {
      // An interrupted call is charged what it was allowed: what it spent is not known.
      ledger.settle(allowance, got === null ? allowance : got.spent);
    }
    reply = got;
    if (reply.ok || reply.notStarted) return reply;
  }
  return reply;
}

export type PoolEnd =
  | { kind: 'done'; firstError: string | null }
  | { kind: 'budget' }
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
      if (r === null) end ??= { kind: 'budget' };
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
  return end ?? { kind: 'done', firstError };
}
