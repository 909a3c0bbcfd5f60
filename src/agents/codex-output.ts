// Pure readers of what Codex CLI (`codex exec --json`, 0.171) leaves behind: its JSONL event stream
// on stdout, its session file (the "rollout") and forkflush's own session record. No I/O here:
// src/agents/codex.ts reads the files and runs the CLI.
import type { Unit } from '../core/config.js';
import type { AgentUsage } from '../core/state.js';
import { formatNumber } from '../core/text.js';
import { priceTokens } from './pricing.js';

/** Token counters as Codex keeps them: cumulative over the whole thread, across resumes. */
export interface TokenTotals {
  /** All input tokens, the cached ones included (the Responses API counts them in `input_tokens`). */
  inputTokens: number;
  cachedInputTokens: number;
  /** All output tokens, reasoning included. */
  outputTokens: number;
}

// ---------------------------------------------------------------------------------------------
// stdout: `codex exec --json`
//
// One JSON object a line, `type` one of thread.started {thread_id}, turn.started,
// turn.completed {usage: {input_tokens, cached_input_tokens, output_tokens, ...}},
// turn.failed {error: {message}}, item.started/updated/completed {item}, error {message}.
// Documented in openai/codex docs/exec.md ("JSON output mode", https://github.com/openai/codex/blob/main/docs/exec.md)
// and defined in codex-rs/exec/src/exec_events.rs (ThreadEvent, Usage). Seen with 0.171.0: the
// usage of turn.completed is the thread's running total, not the turn's (a resumed thread
// reports the earlier episodes' tokens too), and it adds cache_write_input_tokens and
// reasoning_output_tokens, which are parts of input_tokens and output_tokens.
// ---------------------------------------------------------------------------------------------

export interface ExecEvents {
  threadId: string | null;
  /** The usage of the last turn.completed: the thread's running total. */
  usage: TokenTotals | null;
  turnsCompleted: number;
  /** The message of the last turn.failed or top-level error event. */
  error: string | null;
}

export function parseExecEvents(stdout: string): ExecEvents {
  const out: ExecEvents = { threadId: null, usage: null, turnsCompleted: 0, error: null };
  for (const e of jsonLines(stdout)) {
    if (e.type === 'thread.started' && typeof e.thread_id === 'string') out.threadId = e.thread_id;
    else if (e.type === 'turn.completed') {
      out.turnsCompleted += 1;
      const usage = readUsage(e.usage);
      if (usage) out.usage = usage;
    } else if (e.type === 'turn.failed') {
      const message = record(e.error)?.message;
      if (typeof message === 'string') out.error = message;
    } else if (e.type === 'error' && typeof e.message === 'string') {
      // Codex also reports retries here ("Reconnecting... 1/5"): only a failure is worth keeping.
      if (!/^Reconnecting\b/.test(e.message)) out.error = e.message;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The rollout: $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl
//
// One JSON object a line: {timestamp, type, payload}. Codex writes it as the session goes (so it
// holds the figures of a session that was stopped before its turn.completed). What forkflush
// reads: `session_meta` (first line; payload.id is the thread id, payload.cwd where it was
// recorded), `turn_context` (payload.model), `response_item` (payload.type `function_call` or an
// assistant `message`: what the model last asked for), and `event_msg` whose payload.type is
// `token_count` (payload.info.total_token_usage: the thread's running total, with input_tokens,
// cached_input_tokens, output_tokens), `task_started`, `task_complete` or `turn_aborted`. Defined in
// codex-rs/protocol/src/protocol.rs (RolloutItem, SessionMeta, TurnContextItem, EventMsg::TokenCount,
// TokenUsageInfo) of openai/codex; layout and resume in docs/exec.md ("Resuming non-interactive
// sessions"); checked on rollouts recorded with 0.171.0 (test/fixtures/agents/codex/).
// ---------------------------------------------------------------------------------------------

export interface RolloutSummary {
  /** From session_meta: the thread id, and the folder the session was started in. */
  threadId: string | null;
  cwd: string | null;
  /** The model of the last turn_context. */
  model: string | null;
  /** The thread's running total, as last recorded (token_usage_record or token_count). */
  totals: TokenTotals | null;
  /**
   * The last token_count total: where Codex's counters start again when it resumes the thread
   * (seen with 0.171.0: an answer whose token_count a stop cut off is not in them). A resumed
   * episode's share of the running totals is counted from here.
   */
  resumeTotals: TokenTotals | null;
  /** Model responses: each one moves the running total on. */
  modelCalls: number;
  /** True when the last task (turn) started has completed (or was aborted). */
  idle: boolean;
  /** The model's last output item was a tool call: Codex will run it and ask the model again. */
  toolCallPending: boolean;
  /** Lines that were not JSON (a torn last line while Codex writes is expected). */
  badLines: number;
}

export function emptyRollout(): RolloutSummary {
  return {
    threadId: null,
    cwd: null,
    model: null,
    totals: null,
    resumeTotals: null,
    modelCalls: 0,
    idle: true,
    toolCallPending: false,
    badLines: 0,
  };
}

/** Folds one line of a rollout into the summary (the summary is updated in place and returned). */
export function addRolloutLine(s: RolloutSummary, line: string): RolloutSummary {
  if (line.trim() === '') return s;
  let item: Record<string, unknown> | undefined;
  try {
    item = record(JSON.parse(line));
  } catch {
    s.badLines += 1;
    return s;
  }
  const payload = record(item?.payload);
  if (!item || !payload) return s;
  if (item.type === 'session_meta') {
    if (typeof payload.id === 'string' && s.threadId === null) s.threadId = payload.id;
    if (typeof payload.cwd === 'string' && s.cwd === null) s.cwd = payload.cwd;
  } else if (item.type === 'turn_context') {
    if (typeof payload.model === 'string') s.model = payload.model;
  } else if (item.type === 'response_item') {
    if (TOOL_CALLS.has(payload.type as string)) s.toolCallPending = true;
    else if (payload.type === 'message' && payload.role === 'assistant') s.toolCallPending = false;
  } else if (item.type === 'event_msg') {
    if (payload.type === 'task_started') s.idle = false;
    else if (payload.type === 'task_complete' || payload.type === 'turn_aborted') s.idle = true;
    else if (payload.type === 'token_count') {
      const totals = readUsage(record(payload.info)?.total_token_usage);
      addTotals(s, totals);
      if (totals) s.resumeTotals = totals;
    }
  } else if (item.type === 'token_usage_record') {
    // Seen in 0.171.0 rollouts: written as soon as a response ends, while the token_count of a
    // response that called a tool comes only after the tool has run. Same running total.
    addTotals(s, readUsage(payload.thread_token_usage));
  }
  return s;
}

/** Output items by which the model asks Codex to run something (ResponseItem in protocol/src/models.rs). */
const TOOL_CALLS = new Set(['function_call', 'custom_tool_call', 'local_shell_call']);

/**
 * A running total that went up is one more model response; the same total seen again is not,
 * nor one that went down (a resumed Codex states the totals it starts from again).
 */
function addTotals(s: RolloutSummary, totals: TokenTotals | null): void {
  if (!totals || sameTotals(totals, s.totals)) return;
  const prev = s.totals;
  const up =
    prev === null ||
    (totals.inputTokens >= prev.inputTokens &&
      totals.outputTokens >= prev.outputTokens &&
      totals.cachedInputTokens >= prev.cachedInputTokens);
  if (up) s.modelCalls += 1;
  s.totals = totals;
}

export function parseRollout(text: string): RolloutSummary {
  const s = emptyRollout();
  for (const line of text.split('\n')) addRolloutLine(s, line);
  return s;
}

/** Whether a rollout file is one Codex can resume as `threadId`: why not, or null when it is. */
export function rolloutProblem(firstLine: string | undefined, threadId: string): string | null {
  if (firstLine === undefined) return 'its session file does not start with a line Codex wrote';
  if (firstLine.trim() === '') return 'its session file is empty';
  let item: Record<string, unknown> | undefined;
  try {
    item = record(JSON.parse(firstLine));
  } catch {
    return 'its session file does not start with a JSON line';
  }
  if (item?.type !== 'session_meta') return 'its session file does not start with the session metadata';
  const id = record(item.payload)?.id;
  if (id !== threadId) return `its session file belongs to thread ${String(id)}, not ${threadId}`;
  return null;
}

/** The thread id in a rollout file name: rollout-<time>-<uuid>.jsonl. */
export function rolloutThreadId(fileName: string): string | null {
  const m = /^rollout-.+-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$/i.exec(fileName);
  return m ? (m[1] as string) : null;
}

// ---------------------------------------------------------------------------------------------
// forkflush's record of the conversation in the context folder: <contextDir>/session.json
// ---------------------------------------------------------------------------------------------

export interface SessionRecord {
  agent: 'codex';
  threadId: string;
  /**
   * The thread's running totals when the episode that wrote this ended (for people reading the
   * context: the next episode counts from the rollout itself, see RolloutSummary.resumeTotals).
   */
  totals: TokenTotals | null;
  modelCalls: number;
  model: string | null;
}

export function sessionRecordJson(r: SessionRecord): string {
  return `${JSON.stringify(r, null, 2)}\n`;
}

/** The record, or why it cannot be used. */
export function parseSessionRecord(text: string): SessionRecord | { problem: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { problem: `session.json is not JSON (${text.trim().slice(0, 40) || 'empty'})` };
  }
  const r = record(raw);
  if (!r) return { problem: 'session.json is not an object' };
  if (r.agent !== 'codex')
    return { problem: `session.json was written for agent ${JSON.stringify(r.agent)}, not codex` };
  if (typeof r.threadId !== 'string' || !/^[0-9a-f-]{36}$/i.test(r.threadId))
    return { problem: `session.json has no valid thread id (${JSON.stringify(r.threadId)})` };
  const totals = r.totals === null ? null : readTotals(r.totals);
  if (totals === undefined) return { problem: 'session.json has unreadable token totals' };
  const modelCalls = typeof r.modelCalls === 'number' && r.modelCalls >= 0 ? r.modelCalls : 0;
  return {
    agent: 'codex',
    threadId: r.threadId,
    totals,
    modelCalls,
    model: typeof r.model === 'string' ? r.model : null,
  };
}

// ---------------------------------------------------------------------------------------------
// This episode's share of the running totals, and the budget checks
// ---------------------------------------------------------------------------------------------

/** What one episode used: the running totals now less the totals when it started. */
export function episodeTokens(before: TokenTotals | null, after: TokenTotals): TokenTotals | null {
  const b = before ?? { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };
  const d = {
    inputTokens: after.inputTokens - b.inputTokens,
    cachedInputTokens: after.cachedInputTokens - b.cachedInputTokens,
    outputTokens: after.outputTokens - b.outputTokens,
  };
  // Running totals never go down; if they did, the two figures are not of the same thread.
  return d.inputTokens < 0 || d.outputTokens < 0 || d.cachedInputTokens < 0 ? null : d;
}

/** AgentUsage and the spend in the budget's unit, from the episode's tokens. */
export function usageAndSpend(
  tokens: TokenTotals,
  turns: number | null,
  model: string | null,
  unit: Unit,
): { usage: AgentUsage; reportedSpend: number | null } {
  // Codex reports no money: price the tokens, the cached input at its own price.
  const priced = priceTokens(model ?? undefined, {
    input: tokens.inputTokens,
    cachedInput: tokens.cachedInputTokens,
    output: tokens.outputTokens,
  });
  const usage: AgentUsage = {
    inputTokens: tokens.inputTokens,
    outputTokens: tokens.outputTokens,
    costUsd: priced.costUsd,
    turns,
    pricedFrom: priced.pricedFrom,
  };
  const reportedSpend =
    unit === 'tokens' ? tokens.inputTokens + tokens.outputTokens : unit === 'usd' ? priced.costUsd : null;
  return { usage, reportedSpend };
}

export interface Bounds {
  unit: Unit;
  allowance: number;
  maxTurns: number | undefined;
  /** The model to price with (agent.model); else the one the rollout names. */
  model: string | null;
}

/**
 * Why a running session must be stopped now, or null. Codex has no money or turn limit of its
 * own, so forkflush watches the running totals in the rollout: the spend past the allowance
 * (tokens, usd), or `maxTurns` model responses in a turn that is still going on (so the session
 * would ask the model again).
 */
export function overBounds(b: Bounds, before: RolloutSummary, now: RolloutSummary): string | null {
  if (now.totals) {
    const t = episodeTokens(before.resumeTotals, now.totals);
    if (t && (b.unit === 'tokens' || b.unit === 'usd')) {
      const model = b.model ?? now.model ?? undefined;
      const spent =
        b.unit === 'tokens'
          ? t.inputTokens + t.outputTokens
          : priceTokens(model, { input: t.inputTokens, cachedInput: t.cachedInputTokens, output: t.outputTokens })
              .costUsd;
      if (spent > b.allowance) return `spent ${round(spent)} ${b.unit} of its ${formatNumber(b.allowance, 6)}`;
    }
  }
  // At the limit and the model has asked for a tool: the next thing Codex does is ask it again.
  // (A limit reached by the answer that ends the turn is no reason to stop.)
  const calls = now.modelCalls - before.modelCalls;
  if (b.maxTurns !== undefined && calls >= b.maxTurns && now.toolCallPending && !now.idle)
    return `used its ${b.maxTurns} model turns (agent.max_turns)`;
  return null;
}

/** One line that says why Codex failed: its error event, else the `Error:` line on stderr. */
export function failureLine(events: ExecEvents, stderr: string): string | null {
  if (events.error) return events.error.trim().split('\n')[0]?.slice(0, 300) ?? null;
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  const error = lines.find((l) => l.startsWith('Error:'));
  if (error) return error.slice(0, 300);
  const last = lines.filter((l) => !/^\d+: |^at |^Stack backtrace:|^WARNING:/.test(l)).at(-1);
  return last ? last.slice(0, 300) : null;
}

// ---------------------------------------------------------------------------------------------

function* jsonLines(text: string): Generator<Record<string, unknown>> {
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const r = record(JSON.parse(line));
      if (r) yield r;
    } catch {}
  }
}

function record(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** Codex's usage object (snake_case) as TokenTotals. */
function readUsage(v: unknown): TokenTotals | null {
  const u = record(v);
  if (!u) return null;
  const n = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) && x >= 0 ? x : null);
  const input = n(u.input_tokens);
  const output = n(u.output_tokens);
  if (input === null || output === null) return null;
  return { inputTokens: input, cachedInputTokens: n(u.cached_input_tokens) ?? 0, outputTokens: output };
}

/** forkflush's own TokenTotals (camelCase) as stored in session.json; undefined when unreadable. */
function readTotals(v: unknown): TokenTotals | undefined {
  const t = record(v);
  const ok = (x: unknown) => typeof x === 'number' && Number.isFinite(x) && x >= 0;
  if (!t || !ok(t.inputTokens) || !ok(t.outputTokens)) return undefined;
  return {
    inputTokens: t.inputTokens as number,
    cachedInputTokens: ok(t.cachedInputTokens) ? (t.cachedInputTokens as number) : 0,
    outputTokens: t.outputTokens as number,
  };
}

function sameTotals(a: TokenTotals, b: TokenTotals | null): boolean {
  return (
    b !== null &&
    a.inputTokens === b.inputTokens &&
    a.outputTokens === b.outputTokens &&
    a.cachedInputTokens === b.cachedInputTokens
  );
}

function round(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
