// Pure readers of what GitHub Copilot CLI (@github/copilot 1.0.102) leaves behind: the
// `--usage-output-file` JSON, the session's events.jsonl and the `--output-format json` stdout.
// No I/O here: src/agents/copilot.ts reads the files and calls these.
//
// Formats, as documented by `copilot --help` / `copilot help environment` / `copilot help limits`
// and as recorded from the real CLI (test/fixtures/agents/copilot/):
// - `--usage-output-file <file>`: "Write final usage statistics as JSON to the specified file".
//   {totalNanoAiu, aiCreditsStatus, totalUserRequests, modelMetrics: {<model>: {requests: {count,
//   cost}, usage: {inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}, totalNanoAiu}}}.
//   The figures are cumulative over the whole session, across `--resume` (fixture
//   resumed.usage.json holds both episodes).
// - `$COPILOT_HOME/session-state/<id>/events.jsonl`: one JSON event a line ({type, data, id,
//   timestamp, parentId}); `session.start` first; `session.usage_record` per model call with
//   data.usage {model, inputTokens, outputTokens, ...}; `assistant.turn_start` per model turn.
// - stdout with `--output-format json` ("JSONL, one JSON object per line"): the last line is
//   {type: "result", sessionId, exitCode, usage}; failures come as {type: "session.error",
//   data: {errorType, message}}.
// - AI credits: 1 AI credit = $0.01 (GitHub Docs, "Usage-based billing for organizations and
//   enterprises", https://docs.github.com/en/copilot/concepts/billing/usage-based-billing-for-organizations-and-enterprises);
//   the CLI counts them in nano-AIU (1 credit = 1e9 nano-AIU). In bring-your-own-key mode they are
//   "unavailable" and only tokens are known.
import type { AgentUsage } from '../core/state.js';
import { priceTokens } from './pricing.js';
import { ownShare } from './session.js';

export interface ModelTokens {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Model calls. */
  requests: number;
}

/** Usage of a session (or of the part of it one episode added). */
export interface CopilotTotals {
  models: Record<string, ModelTokens>;
  /** AI credits in nano-AIU; 0 when unavailable (bring-your-own-key). */
  nanoAiu: number;
  /** The CLI counted AI credits (GitHub-hosted models), so `nanoAiu` is the price. */
  creditsAvailable: boolean;
}

export const NANO_AIU_PER_CREDIT = 1e9;
export const USD_PER_CREDIT = 0.01;

export function emptyTotals(): CopilotTotals {
  return { models: {}, nanoAiu: 0, creditsAvailable: false };
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads a `--usage-output-file` JSON; throws an Error saying why it cannot. */
export function parseUsageFile(text: string): CopilotTotals {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`the usage file is not JSON: ${text.trim().slice(0, 60)}`);
  }
  if (!isObject(json) || !isObject(json.modelMetrics)) throw new Error('the usage file has no modelMetrics');
  const models: Record<string, ModelTokens> = {};
  for (const [model, m] of Object.entries(json.modelMetrics)) {
    if (!isObject(m)) continue;
    const usage = isObject(m.usage) ? m.usage : {};
    const requests = isObject(m.requests) ? m.requests : {};
    models[model] = {
      inputTokens: num(usage.inputTokens),
      outputTokens: num(usage.outputTokens),
      cacheReadTokens: num(usage.cacheReadTokens),
      cacheWriteTokens: num(usage.cacheWriteTokens),
      requests: num(requests.count),
    };
  }
  const nanoAiu = num(json.totalNanoAiu);
  return { models, nanoAiu, creditsAvailable: json.aiCreditsStatus !== 'unavailable' && nanoAiu > 0 };
}

/** Reads totals saved by an earlier episode (session.json), tolerating anything malformed as none. */
export function readSavedTotals(v: unknown): CopilotTotals | null {
  if (!isObject(v) || !isObject(v.models)) return null;
  const models: Record<string, ModelTokens> = {};
  for (const [model, m] of Object.entries(v.models)) {
    if (!isObject(m)) continue;
    models[model] = {
      inputTokens: num(m.inputTokens),
      outputTokens: num(m.outputTokens),
      cacheReadTokens: num(m.cacheReadTokens),
      cacheWriteTokens: num(m.cacheWriteTokens),
      requests: num(m.requests),
    };
  }
  return { models, nanoAiu: num(v.nanoAiu), creditsAvailable: v.creditsAvailable === true };
}

/**
 * What `now` (cumulative) adds to `before` (cumulative at the previous episode's end), by the
 * session core's rule: a figure that went down is charged whole, with a note (never under-reported).
 */
export function subtractTotals(
  now: CopilotTotals,
  before: CopilotTotals | null,
): { delta: CopilotTotals; note?: string } {
  if (!before) return { delta: now };
  const models: Record<string, ModelTokens> = {};
  const notes = new Set<string>();
  for (const [model, m] of Object.entries(now.models)) {
    const { share, note } = ownShare(before.models[model] ?? null, { ...m });
    if (note) notes.add(note);
    if (share.inputTokens + share.outputTokens + share.requests > 0) models[model] = share;
  }
  const credits = ownShare({ nanoAiu: before.nanoAiu }, { nanoAiu: now.nanoAiu });
  if (credits.note) notes.add(credits.note);
  const delta = { models, nanoAiu: credits.share.nanoAiu, creditsAvailable: now.creditsAvailable };
  return notes.size > 0 ? { delta, note: [...notes][0] as string } : { delta };
}

export function addTotals(a: CopilotTotals | null, b: CopilotTotals): CopilotTotals {
  if (!a) return b;
  const models: Record<string, ModelTokens> = { ...a.models };
  for (const [model, m] of Object.entries(b.models)) {
    const x = models[model];
    models[model] = x
      ? {
          inputTokens: x.inputTokens + m.inputTokens,
          outputTokens: x.outputTokens + m.outputTokens,
          cacheReadTokens: x.cacheReadTokens + m.cacheReadTokens,
          cacheWriteTokens: x.cacheWriteTokens + m.cacheWriteTokens,
          requests: x.requests + m.requests,
        }
      : m;
  }
  return { models, nanoAiu: a.nanoAiu + b.nanoAiu, creditsAvailable: a.creditsAvailable || b.creditsAvailable };
}

/** Splits JSONL text into parsed objects; an unfinished last line is returned as `rest`. */
export function parseJsonLines(text: string): { events: Record<string, unknown>[]; rest: string; bad: number } {
  const lines = text.split('\n');
  const rest = lines.pop() ?? '';
  const events: Record<string, unknown>[] = [];
  let bad = 0;
  for (const line of lines) {
    if (line.trim() === '') continue;
    try {
      const v = JSON.parse(line) as unknown;
      if (isObject(v)) events.push(v);
      else bad++;
    } catch {
      bad++;
    }
  }
  return { events, rest, bad };
}

/** Model turns and token usage in a run of session events (the watcher's view of an episode). */
export function summarizeEvents(events: Record<string, unknown>[]): { turns: number; totals: CopilotTotals } {
  let turns = 0;
  const totals = emptyTotals();
  for (const e of events) {
    if (e.type === 'assistant.turn_start') turns++;
    if (e.type !== 'session.usage_record') continue;
    const usage = isObject(e.data) && isObject(e.data.usage) ? e.data.usage : null;
    if (!usage) continue;
    const model = typeof usage.model === 'string' ? usage.model : 'unknown';
    const m = totals.models[model] ?? {
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      requests: 0,
    };
    m.inputTokens += num(usage.inputTokens);
    m.outputTokens += num(usage.outputTokens);
    m.cacheReadTokens += num(usage.cacheReadTokens);
    m.cacheWriteTokens += num(usage.cacheWriteTokens);
    m.requests += 1;
    totals.models[model] = m;
  }
  return { turns, totals };
}

/**
 * Why a saved session cannot be resumed, or null if it looks resumable: the CLI itself refuses a
 * corrupted events.jsonl ("Session file is corrupted (line 1: ...)"), so this checks the same.
 */
export function eventsFileProblem(text: string, sessionId: string): string | null {
  if (text.trim() === '') return 'its events.jsonl is empty';
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  for (const [i, line] of lines.entries()) {
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      // The CLI may have been killed in the middle of writing its last line.
      if (i === lines.length - 1 && !text.endsWith('\n')) continue;
      return `line ${i + 1} of its events.jsonl is not JSON`;
    }
    if (!isObject(v) || typeof v.type !== 'string') return `line ${i + 1} of its events.jsonl is not an event`;
    if (i === 0) {
      const id = isObject(v.data) ? v.data.sessionId : undefined;
      if (v.type !== 'session.start') return 'its events.jsonl does not begin with session.start';
      if (id !== sessionId) return `its events.jsonl belongs to session ${String(id)}`;
    }
  }
  return null;
}

export interface JsonOutputFacts {
  /** From the final {type: "result"} line. */
  exitCode?: number;
  sessionId?: string;
  /** Messages of session.error events. */
  errors: string[];
}

/** Reads the `--output-format json` stdout (possibly cut at the front). */
export function parseJsonOutput(stdout: string): JsonOutputFacts {
  const facts: JsonOutputFacts = { errors: [] };
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isObject(v)) continue;
    if (v.type === 'result') {
      if (typeof v.exitCode === 'number') facts.exitCode = v.exitCode;
      if (typeof v.sessionId === 'string') facts.sessionId = v.sessionId;
    } else if (v.type === 'session.error' && isObject(v.data) && typeof v.data.message === 'string') {
      facts.errors.push(v.data.message);
    }
  }
  return facts;
}

/** Tokens, cost and turns of one episode's usage. */
export function episodeUsage(delta: CopilotTotals): AgentUsage {
  let inputTokens = 0;
  let outputTokens = 0;
  let turns = 0;
  let priced = 0;
  const pricedFrom = new Set<string>();
  for (const [model, m] of Object.entries(delta.models)) {
    inputTokens += m.inputTokens;
    outputTokens += m.outputTokens;
    turns += m.requests;
    // inputTokens counts the cache reads and writes too (as the usage file reports them).
    const p = priceTokens(model, {
      input: m.inputTokens,
      cachedInput: m.cacheReadTokens,
      cacheWrite: m.cacheWriteTokens,
      output: m.outputTokens,
    });
    priced += p.costUsd;
    pricedFrom.add(p.pricedFrom);
  }
  if (delta.creditsAvailable) {
    const costUsd = (delta.nanoAiu / NANO_AIU_PER_CREDIT) * USD_PER_CREDIT;
    return { inputTokens, outputTokens, costUsd, turns };
  }
  return {
    inputTokens,
    outputTokens,
    costUsd: priced,
    turns,
    ...(pricedFrom.size > 0 ? { pricedFrom: [...pricedFrom].join('; ') } : {}),
  };
}

/** The smallest `--max-ai-credits` the CLI takes (`copilot help limits`: "Minimum: 30 AI credits"). */
export const MIN_AI_CREDITS = 30;

/** The `--max-ai-credits` value for a dollar allowance (never below the CLI's minimum). */
export function creditsForUsd(usd: number): number {
  return Math.max(MIN_AI_CREDITS, Math.ceil(usd / USD_PER_CREDIT));
}
