// One episode's agent, tried again when it fails in a way that passes. Each try's failure is
// recognised: the agent's spec says it (AgentOutcome.failure), or forkflush reads it from what
// the agent's last process printed (a program that did not start, a path the sandbox hides, the
// common shapes of providers' errors: core/failure.ts). A rate limit, an overloaded provider or a
// network error is tried again after a backoff (retryWait: the provider's retry-after honoured),
// within what the failed tries left of the episode's allowance and time; the adapter opens the
// context the failed try left, so a CLI that saved its session resumes it. After AGENT_TRIES tries,
// or when no time or allowance is left, the failure stands and stops the run (core/stop.ts).
// The same code runs in the local runner and in the Action: both get the retries.
import { rm } from 'node:fs/promises';
import type { AgentAdapter, AgentOutcome, AgentSession } from '../agents/agent.js';
import { EGRESS_OFFLINE_STOP_MS, EGRESS_UNREACHABLE_CHECK_MS } from '../core/bounds.js';
import { type ChargeInput, chargeFor, type TryFacts } from '../core/charge.js';
import {
  type AgentFailure,
  couldNotStart,
  GENERIC_FIX,
  isTransient,
  notFoundPaths,
  quoteLine,
  recognizeFailure,
  retryWait,
} from '../core/failure.js';
import { RETRY_LEAST_SECONDS } from '../core/method.js';
import type { AgentUsage, Retry } from '../core/state.js';
import { failureLine, formatNumber } from '../core/text.js';
import { shareOf, type Tally, tallySpend, usageOf } from '../core/usage.js';
import { awakeNow } from '../io/awake.js';
import type { RunResult } from '../io/process.js';

export interface TriesInput {
  agent: AgentAdapter;
  /** The first try's session; a later one gets what the tries before it left of the allowance and the time. */
  session: AgentSession;
  /** Ctrl-C, a halted run: the try is an interrupted attempt, and no other follows. */
  interrupt: AbortSignal;
  /** What the charge rule needs besides the tries (core/charge.ts). */
  charge: Omit<ChargeInput, 'tries' | 'evaluations' | 'unchanged'>;
  /** Grader runs the agent asked for so far (the evaluations unit). */
  evaluations: () => number;
  /** Why names the agent's output says were not found are hidden by the sandbox (null: they are not, or no sandbox). */
  hiddenCause?: (missing: string[], text: string) => Promise<AgentFailure | null>;
  /** The model use the egress proxy relayed so far (worker/answer-meter.ts): each try's share is its charge's floor. */
  metered?: () => Tally;
  /** The connections the egress proxy refused so far, and its note on them (worker/egress.ts). */
  refused?: { count(): number; note(): string | null };
  /**
   * The egress proxy's connections to allowed targets, and its note on those it could not reach: a
   * try that reached none and failed for `stopAfterMs` (EGRESS_OFFLINE_STOP_MS) is stopped as a
   * network failure, looked at every `checkMs` (EGRESS_UNREACHABLE_CHECK_MS).
   */
  offline?: {
    traffic(): { reached: number; failed: number };
    note(): string | null;
    stopAfterMs?: number;
    checkMs?: number;
  };
  /** Waits before a retry; ends early, without error, when the signal aborts. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Milliseconds, for the time the tries used (awake time by default: io/awake.ts). */
  clock?: () => number;
  /** A line between two tries, for the agent's log. */
  mark?: (line: string) => Promise<void>;
}

export interface Tried {
  /** The last try's outcome; its seconds the tries' together, its usage theirs summed. */
  outcome: AgentOutcome;
  tries: TryFacts[];
  /** The tries before the last, each failed in a way that passes. */
  retries: Retry[];
  /** The last try's failure, as recognised; a passing kind here is one given up on. */
  failure: AgentFailure | null;
  /** Why the retries stopped, when they were given up on. */
  gaveUp?: string;
}

export async function runTries(input: TriesInput): Promise<Tried> {
  const clock = input.clock ?? awakeNow;
  const sleep = input.sleep ?? abortableSleep;
  const first = input.session;
  const started = clock();
  const tries: TryFacts[] = [];
  const outcomes: AgentOutcome[] = [];
  const retries: Retry[] = [];
  let session = first;
  for (;;) {
    let last: RunResult | null = null;
    const spawn: AgentSession['spawn'] = async (file, args, options) => {
      last = await first.spawn(file, args, options);
      return last;
    };
    const refusedBefore = input.refused?.count() ?? 0;
    const meteredBefore = input.metered?.() ?? null;
    const offline = new AbortController();
    const unwatch = watchOffline(input, () => offline.abort('offline'));
    const outcome = await input.agent
      .run({ ...session, spawn, signal: AbortSignal.any([session.signal, offline.signal]) })
      .finally(unwatch);
    outcomes.push(outcome);
    const interrupted = input.interrupt.aborted;
    const metered = input.metered ? meteredSpend(input, shareOf(meteredBefore, input.metered()).share, outcome) : null;
    tries.push({
      seconds: outcome.seconds,
      reportedSpend: outcome.reportedSpend,
      ...(metered ? { meteredSpend: metered } : {}),
      exit: outcome.exit,
      ...(interrupted ? { interrupted: true } : {}),
    });
    const cut = offline.signal.aborted ? (input.offline?.note() ?? 'no allowed host could be reached') : null;
    const failure = interrupted
      ? null
      : cut
        ? { kind: 'network' as const, quote: cut }
        : refusedCause(input, refusedBefore, await recognise(input, session, outcome, last));
    const done = (gaveUp?: string): Tried => ({
      outcome: merged(outcomes),
      tries,
      retries,
      failure,
      ...(gaveUp ? { gaveUp } : {}),
    });
    if (!failure || !isTransient(failure.kind)) return done();
    const plan = retryWait(tries.length, failure, first.seed);
    if ('giveUp' in plan) return done(plan.giveUp);
    const leftMs = first.deadlineMs - (clock() - started) - plan.waitMs;
    if (leftMs < RETRY_LEAST_SECONDS * 1000)
      return done(`too little of the episode's time is left for another try after a ${seconds(plan.waitMs)} wait`);
    const charged = chargeFor({ ...input.charge, tries, evaluations: input.evaluations(), unchanged: false }).spent;
    const left = first.allowance - charged;
    if (!(left > 0)) return done('the tries spent the allowance');
    retries.push({ kind: failure.kind, quote: failure.quote, waitedSeconds: plan.waitMs / 1000 });
    await input.mark?.(
      `\n--- forkflush: try ${tries.length} failed (${failure.kind}: ${failure.quote}); try ${tries.length + 1} after ${seconds(plan.waitMs)} ---\n`,
    );
    await sleep(plan.waitMs, first.signal);
    // A retry's own report: what the failed try wrote is in its charge already.
    await rm(first.usageFile, { force: true });
    session = { ...first, allowance: left, deadlineMs: leftMs };
    if (input.interrupt.aborted) {
      tries.push({ seconds: 0, reportedSpend: null, exit: 'crash', interrupted: true });
      return done();
    }
  }
}

/** Stops the try (`stop`) once it has failed to reach any allowed target for long enough, having reached none; returns the unwatch. */
function watchOffline(input: TriesInput, stop: () => void): () => void {
  const o = input.offline;
  if (!o) return () => {};
  const before = o.traffic();
  let failingSince: number | null = null;
  const timer = setInterval(() => {
    const now = o.traffic();
    if (now.reached > before.reached) return void clearInterval(timer);
    if (now.failed > before.failed) failingSince ??= awakeNow();
    if (failingSince !== null && awakeNow() - failingSince >= (o.stopAfterMs ?? EGRESS_OFFLINE_STOP_MS)) {
      clearInterval(timer);
      stop();
    }
  }, o.checkMs ?? EGRESS_UNREACHABLE_CHECK_MS);
  return () => clearInterval(timer);
}

/**
 * Why a try failed: its spec's word (src/agents/runner.ts: the CLI's statuses, a command agent's
 * exit codes), or else what its last process printed. A program that could not start is first
 * looked for outside the sandbox: found there, the sandbox hides it, and that is the cause.
 * Nothing when it did not crash, or when forkflush stopped it (its budget, its time, a big log).
 */
async function recognise(
  input: TriesInput,
  session: AgentSession,
  outcome: AgentOutcome,
  last: RunResult | null,
): Promise<AgentFailure | null> {
  // The spec's word, but for a program that could not start: the sandbox may be hiding it.
  const spec = outcome.failure ?? null;
  if (spec && spec.kind !== 'cli') return spec;
  if (outcome.exit !== 'crash') return spec;
  if (last === null) {
    // No process ran: the session core found no key or login (its note says how to log in).
    const login = input.agent.missingLogin(session.env);
    return login
      ? { kind: 'auth', quote: quoteLine(login), fix: 'log in as it says, then resume the run' }
      : { kind: 'crash', quote: quoteLine(outcome.note ?? 'the agent ended without running a program') };
  }
  if (last.stopped !== null) return spec;
  const text = `${last.stderr}\n${last.stdout}`;
  const missing = notFoundPaths(text);
  const hidden = missing.length > 0 ? await input.hiddenCause?.(missing, text) : null;
  if (hidden) return hidden;
  if (spec) return spec;
  const said = failureLine(last.stderr || last.stdout);
  if (couldNotStart(last))
    return {
      kind: 'cli',
      quote: quoteLine(last.spawnError ?? `exit ${last.exitCode}: ${said || 'no output'}`),
      fix: GENERIC_FIX.cli,
    };
  // stdout only when stderr is empty: a CLI's stdout is its conversation, which may talk of anything.
  const known = recognizeFailure(last.stderr.trim() ? last.stderr : last.stdout);
  if (known) return known;
  const how = last.signal ? `signal ${last.signal}` : `exit ${last.exitCode}`;
  return { kind: 'crash', quote: quoteLine(said ? `${how}: ${said}` : how) };
}

/**
 * A try's share of the model use the proxy relayed, in the budget's unit, where its answers stated
 * more tokens than the agent reported (null where not): with the same tokens, the CLI's own price
 * stands over forkflush's table.
 */
function meteredSpend(input: TriesInput, seen: Tally, outcome: AgentOutcome): number | null {
  const tokens = (u: { inputTokens: number; outputTokens: number }) => u.inputTokens + u.outputTokens;
  const said = outcome.usage ? tokens(outcome.usage) : 0;
  return tokens(usageOf({ tally: seen })) > said ? tallySpend(input.charge.unit, seen) : null;
}

/**
 * A failure that reads as the proxy's refusal (a 403, a proxy, a tunnel), in a try in which the
 * proxy refused connections: the host the sandbox's network does not allow is the cause, not the
 * key (a Python client says "Tunnel connection failed: 403 Forbidden"), and it fails every episode.
 */
function refusedCause(input: TriesInput, before: number, failure: AgentFailure | null): AgentFailure | null {
  if (!failure || !['auth', 'network', 'crash'].includes(failure.kind) || !input.refused) return failure;
  if (input.refused.count() <= before || !/\b403\b|forbidden|proxy|tunnel|sandbox\.network/i.test(failure.quote))
    return failure;
  const note = input.refused.note();
  return { kind: 'egress', quote: failure.quote, fix: `${note ? `${note}: ` : ''}${GENERIC_FIX.egress}` };
}

/** The tries as one outcome: the last one's, with their time and their usage added up. */
function merged(outcomes: AgentOutcome[]): AgentOutcome {
  const last = outcomes.at(-1) as AgentOutcome;
  if (outcomes.length === 1) return last;
  const usages = outcomes.flatMap((o) => (o.usage ? [o.usage] : []));
  const usage = usages.length > 0 ? usages.reduce(addUsage) : undefined;
  const notes = [...new Set(outcomes.flatMap((o) => (o.note ? [o.note] : [])))];
  return {
    ...last,
    seconds: outcomes.reduce((s, o) => s + o.seconds, 0),
    ...(usage ? { usage } : {}),
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
  };
}

function addUsage(a: AgentUsage, b: AgentUsage): AgentUsage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    costUsd: a.costUsd === null || b.costUsd === null ? null : a.costUsd + b.costUsd,
    turns: a.turns === null || b.turns === null ? null : a.turns + b.turns,
    ...(a.pricedFrom || b.pricedFrom ? { pricedFrom: (a.pricedFrom ?? b.pricedFrom) as string } : {}),
  };
}

function seconds(ms: number): string {
  return `${formatNumber(ms / 1000, 1)} s`;
}

/** setTimeout as a promise that resolves early when the signal aborts. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((done) => {
    if (signal.aborted) return done();
    const timer = setTimeout(finish, ms);
    function finish() {
      clearTimeout(timer);
      signal.removeEventListener('abort', finish);
      done();
    }
    signal.addEventListener('abort', finish, { once: true });
  });
}
