// Pure readers of what Claude Code (`claude`, @anthropic-ai/claude-code 2.1.332) writes: its
// stream-json output in print mode, and the session transcript in its config folder. No I/O here:
// the adapter (claude-code.ts) reads the files and hands their text in.
//
// Formats, as documented and as recorded in test/fixtures/agents/claude-code/:
// - stdout with `-p --output-format stream-json --verbose`: one JSON object per line; the first is
//   `{"type":"system","subtype":"init","session_id","cwd","model","claude_code_version",...}`, the
//   last `{"type":"result","subtype":"success"|"error_max_turns"|"error_max_budget_usd"|
//   "error_during_execution",...,"is_error","num_turns","total_cost_usd","modelUsage","errors"}`
//   (https://code.claude.com/docs/en/headless, "Output formats";
//   https://code.claude.com/docs/en/agent-sdk/typescript, SDKResultMessage). A failed API call
//   still ends in subtype "success" with `is_error: true`, `api_error_status` and the message in
//   `result`. Lines that are not JSON (e.g. `[claude-code:unrecognized_model] ...`) can appear.
// - `total_cost_usd` and `modelUsage` (per model: inputTokens, outputTokens, cacheReadInputTokens,
//   cacheCreationInputTokens, costUSD, costBasis "list" | "managed" | "unknown") are client-side
//   estimates (https://code.claude.com/docs/en/agent-sdk/cost-tracking) and, for a resumed
//   conversation, CUMULATIVE over the whole conversation: the CLI restores them from the last
//   `{"type":"cost-state","totalCostUSD","modelUsage","hasUnknownModelCost"}` row of the
//   transcript, which it appends whenever a run ends, a SIGTERM'd one included (observed with
//   2.1.332, fixtures resumed-*.jsonl and killed-transcript.jsonl). So one episode's figures are
//   the totals after it minus the totals in the transcript before it.
// - The transcript, `$CLAUDE_CONFIG_DIR/projects/<project>/<session-id>.jsonl`
//   (https://code.claude.com/docs/en/claude-directory, "Application data"): JSON lines; conversation
//   rows are `{"type":"user"|"assistant","message":{...},"sessionId",...}`; one API response is
//   written as one assistant row per content block, each repeating `message.id` and
//   `message.usage`, so usage is counted once per id (cost-tracking page, "deduplicate by ID").
// - `<project>` is the working directory's real path with every character other than ASCII letters
//   and digits replaced by '-'; a name longer than 200 characters keeps its first 200 and gains '-'
//   and the base-36 absolute value of the path's 32-bit djb2 hash (observed with 2.1.332 for both;
//   the rule is the one third-party tools describe, e.g. the cc-session-io notes on session storage).
import type { AgentUsage, ExitReason } from '../core/state.js';
import { priceTokens } from './pricing.js';

/** One model's token and cost totals, as Claude Code keeps them in `modelUsage`. */
export interface ModelTotals {
  inputTokens: number;
  outputTokens: number;
  cacheReadInputTokens: number;
  cacheCreationInputTokens: number;
  costUsd: number;
  /** False when Claude Code did not know the model's price (its cost is then a guess). */
  costKnown: boolean;
}

/** A conversation's cumulative totals: the cost and the tokens per model. */
export interface Totals {
  costUsd: number;
  models: Record<string, ModelTotals>;
}

/** The facts of the final `result` line. */
export interface ClaudeResult {
  subtype: string;
  isError: boolean;
  sessionId: string | null;
  /** Cumulative over the conversation (resumes included); null when the line has no figures. */
  totals: Totals | null;
  turns: number | null;
  /** The error text: `errors` joined, or `result` when `is_error`. */
  message: string | null;
  apiErrorStatus: number | null;
}

export interface StreamFacts {
  sessionId: string | null;
  cwd: string | null;
  model: string | null;
  version: string | null;
  result: ClaudeResult | null;
}

/** The project folder name Claude Code uses for a working directory (give it the real path). */
export function projectDirName(realCwd: string): string {
  const sanitized = realCwd.replace(/[^a-zA-Z0-9]/g, '-');
  if (sanitized.length <= 200) return sanitized;
  let hash = 0;
  for (let i = 0; i < realCwd.length; i++) hash = (Math.imul(hash, 31) + realCwd.charCodeAt(i)) | 0;
  return `${sanitized.slice(0, 200)}-${Math.abs(hash).toString(36)}`;
}

/** The init and result facts of a stream-json (or json) stdout; other lines are skipped. */
export function readStream(stdout: string): StreamFacts {
  const facts: StreamFacts = { sessionId: null, cwd: null, model: null, version: null, result: null };
  for (const row of jsonLines(stdout)) {
    if (row.type === 'system' && row.subtype === 'init') {
      facts.sessionId = str(row.session_id) ?? facts.sessionId;
      facts.cwd = str(row.cwd);
      facts.model = str(row.model);
      facts.version = str(row.claude_code_version);
    } else if (row.type === 'result') {
      facts.result = readResult(row);
      facts.sessionId = facts.result.sessionId ?? facts.sessionId;
    }
  }
  return facts;
}

function readResult(row: Record<string, unknown>): ClaudeResult {
  const errors = Array.isArray(row.errors) ? row.errors.map(String).filter((e) => e.trim() !== '') : [];
  const isError = row.is_error === true;
  const cost = num(row.total_cost_usd);
  const models = readModels(row.modelUsage, false);
  return {
    subtype: str(row.subtype) ?? 'unknown',
    isError,
    sessionId: str(row.session_id),
    totals: cost === null && models === null ? null : { costUsd: cost ?? sumCost(models ?? {}), models: models ?? {} },
    turns: num(row.num_turns),
    message: errors.length > 0 ? errors.join('; ') : isError ? str(row.result) : null,
    apiErrorStatus: num(row.api_error_status),
  };
}

/** The totals of the last `cost-state` row in transcript text, or null when there is none. */
export function readCostState(transcript: string): Totals | null {
  let last: Totals | null = null;
  for (const row of jsonLines(transcript)) {
    if (row.type !== 'cost-state') continue;
    const models = readModels(row.modelUsage, row.hasUnknownModelCost === true) ?? {};
    last = { costUsd: num(row.totalCostUSD) ?? sumCost(models), models };
  }
  return last;
}

/**
 * Tokens of the assistant rows in transcript text, counted once per API response (message id).
 * For a run stopped before Claude Code recorded its cost: the costs are unknown (costKnown false).
 */
export function assistantTotals(transcript: string): { totals: Totals; responses: number } {
  const seen = new Set<string>();
  const models: Record<string, ModelTotals> = {};
  for (const row of jsonLines(transcript)) {
    if (row.type !== 'assistant' || !isRecord(row.message)) continue;
    const message = row.message;
    const id = str(message.id);
    if (id === null || seen.has(id) || !isRecord(message.usage)) continue;
    seen.add(id);
    const model = str(message.model) ?? 'unknown';
    const u = message.usage;
    const m = models[model] ?? emptyModel(false);
    m.inputTokens += num(u.input_tokens) ?? 0;
    m.outputTokens += num(u.output_tokens) ?? 0;
    m.cacheReadInputTokens += num(u.cache_read_input_tokens) ?? 0;
    m.cacheCreationInputTokens += num(u.cache_creation_input_tokens) ?? 0;
    models[model] = m;
  }
  return { totals: { costUsd: 0, models }, responses: seen.size };
}

/** Totals `a` plus totals `b` (costs of `b` unknown stay unknown). */
export function addTotals(a: Totals | null, b: Totals): Totals {
  const models: Record<string, ModelTotals> = {};
  for (const [name, m] of Object.entries(a?.models ?? {})) models[name] = { ...m };
  for (const [name, m] of Object.entries(b.models)) {
    const prev = models[name] ?? emptyModel(true);
    models[name] = {
      inputTokens: prev.inputTokens + m.inputTokens,
      outputTokens: prev.outputTokens + m.outputTokens,
      cacheReadInputTokens: prev.cacheReadInputTokens + m.cacheReadInputTokens,
      cacheCreationInputTokens: prev.cacheCreationInputTokens + m.cacheCreationInputTokens,
      costUsd: prev.costUsd + m.costUsd,
      costKnown: prev.costKnown && m.costKnown,
    };
  }
  return { costUsd: (a?.costUsd ?? 0) + b.costUsd, models };
}

/**
 * One episode's usage: the cumulative totals after it minus those before it (null for a fresh
 * conversation). Input tokens count everything the model read: uncached, cache writes and cache
 * reads. A model whose cost Claude Code did not know is priced from forkflush's table
 * (`pricedFrom`). Should a figure ever shrink (the CLI did not carry the totals over), the figure
 * after the episode is taken as the episode's own, so spend is never under-reported.
 */
export function episodeUsage(before: Totals | null, after: Totals, turns: number | null): AgentUsage {
  let inputTokens = 0;
  let outputTokens = 0;
  let knownCost = 0;
  let pricedCost = 0;
  const priced: string[] = [];
  for (const [name, a] of Object.entries(after.models)) {
    const b = before?.models[name] ?? emptyModel(true);
    const d = (x: number, y: number) => (x >= y ? x - y : x);
    const input =
      d(a.inputTokens, b.inputTokens) +
      d(a.cacheReadInputTokens, b.cacheReadInputTokens) +
      d(a.cacheCreationInputTokens, b.cacheCreationInputTokens);
    const output = d(a.outputTokens, b.outputTokens);
    inputTokens += input;
    outputTokens += output;
    if (a.costKnown) knownCost += d(a.costUsd, b.costUsd);
    else if (input + output > 0) {
      const p = priceTokens(name, {
        input,
        cachedInput: d(a.cacheReadInputTokens, b.cacheReadInputTokens),
        cacheWrite: d(a.cacheCreationInputTokens, b.cacheCreationInputTokens),
        output,
      });
      pricedCost += p.costUsd;
      priced.push(p.pricedFrom);
    }
  }
  const anyModels = Object.keys(after.models).length > 0;
  const totalDelta = after.costUsd >= (before?.costUsd ?? 0) ? after.costUsd - (before?.costUsd ?? 0) : after.costUsd;
  const costUsd = priced.length > 0 ? knownCost + pricedCost : anyModels ? knownCost : totalDelta;
  return {
    inputTokens,
    outputTokens,
    costUsd: round(costUsd),
    turns,
    ...(priced.length > 0 ? { pricedFrom: `Claude Code did not know the price; ${priced.join('; ')}` } : {}),
  };
}

/** Why a transcript cannot be resumed, or null when it holds a conversation. */
export function transcriptProblem(text: string): string | null {
  if (text.trim() === '') return 'is empty';
  let rows = 0;
  for (const row of jsonLines(text)) {
    rows++;
    if ((row.type === 'user' || row.type === 'assistant') && isRecord(row.message)) return null;
  }
  return rows === 0 ? 'has no readable line (not JSON lines)' : 'holds no conversation (no user or assistant message)';
}

/** Claude Code's answer to `--resume <id>` when it cannot find that conversation. */
export function saysNoConversation(output: string): boolean {
  return /No conversation found with session ID/i.test(output);
}

export interface ExitFacts {
  /** runProcess's `stopped`: 'timeout', an abort reason ('budget', 'interrupted'), or null. */
  stopped: string | null;
  deadlineIsBudget: boolean;
  spawnError?: string;
  exitCode: number | null;
  signal: string | null;
  result: ClaudeResult | null;
  /** The last line of stderr, for a crash note. */
  stderrTail: string;
}

/** How the session ended, and a note for the user when it did not simply finish. */
export function decideExit(f: ExitFacts): { exit: ExitReason; note?: string } {
  if (f.stopped === 'timeout') return f.deadlineIsBudget ? { exit: 'budget' } : { exit: 'timeout' };
  if (f.stopped === 'budget') return { exit: 'budget' };
  if (f.stopped !== null) return { exit: 'crash', note: `Claude Code was stopped (${f.stopped})` };
  if (f.spawnError) return { exit: 'crash', note: `Claude Code could not start: ${f.spawnError}` };
  const r = f.result;
  if (r?.subtype === 'error_max_turns')
    return { exit: 'budget', note: `Claude Code stopped at its turn limit${r.message ? ` (${r.message})` : ''}` };
  if (r?.subtype === 'error_max_budget_usd')
    return {
      exit: 'budget',
      note: `Claude Code stopped at its money limit${r.message ? ` (${r.message})` : ''}; it checks after each model call, so the spend can pass the allowance by one call`,
    };
  if (r && r.subtype === 'success' && !r.isError && f.exitCode === 0) return { exit: 'finished' };
  if (r) {
    const status = r.apiErrorStatus === null ? '' : ` (API status ${r.apiErrorStatus})`;
    return { exit: 'crash', note: `Claude Code ended with ${r.subtype}${status}: ${clip(r.message ?? 'no message')}` };
  }
  const how = f.signal ? `signal ${f.signal}` : `code ${f.exitCode}`;
  return {
    exit: 'crash',
    note: `Claude Code exited with ${how} and no result${f.stderrTail ? `: ${clip(f.stderrTail)}` : ''}`,
  };
}

function readModels(value: unknown, allUnknown: boolean): Record<string, ModelTotals> | null {
  if (!isRecord(value)) return null;
  const models: Record<string, ModelTotals> = {};
  for (const [name, m] of Object.entries(value)) {
    if (!isRecord(m)) continue;
    models[name] = {
      inputTokens: num(m.inputTokens) ?? 0,
      outputTokens: num(m.outputTokens) ?? 0,
      cacheReadInputTokens: num(m.cacheReadInputTokens) ?? 0,
      cacheCreationInputTokens: num(m.cacheCreationInputTokens) ?? 0,
      costUsd: num(m.costUSD) ?? 0,
      costKnown: !allUnknown && m.costBasis !== 'unknown',
    };
  }
  return models;
}

function* jsonLines(text: string): Generator<Record<string, unknown>> {
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      const row: unknown = JSON.parse(t);
      if (isRecord(row)) yield row;
    } catch {
      // A torn last line (the process was killed while writing) or a line that is not JSON.
    }
  }
}

function emptyModel(costKnown: boolean): ModelTotals {
  return {
    inputTokens: 0,
    outputTokens: 0,
    cacheReadInputTokens: 0,
    cacheCreationInputTokens: 0,
    costUsd: 0,
    costKnown,
  };
}

function sumCost(models: Record<string, ModelTotals>): number {
  return Object.values(models).reduce((s, m) => s + m.costUsd, 0);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function round(x: number): number {
  return Math.round(x * 1e9) / 1e9;
}

function clip(s: string): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > 300 ? `${one.slice(0, 300)}…` : one;
}
