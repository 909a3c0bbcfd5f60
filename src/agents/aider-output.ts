// Pure readers of aider's console output (aider-chat, run as `aider --message-file F --yes-always`).
// No I/O here: src/agents/aider.ts reads the log and calls these.
//
// Formats (repository Aider-AI/aider):
// - After each model call aider prints its usage report (aider/coders/base_coder.py,
//   calculate_and_show_tokens_and_cost, shown with io.tool_output):
//     "Tokens: {sent} sent[, {n} cache write][, {n} cache hit], {received} received."
//   followed, only when the model has prices, by " Cost: ${message} message, ${session} session."
//   (on the next line when both cache figures are present). "session" is cumulative over the
//   aider process, i.e. over this episode only: aider does not carry costs across runs.
//   Token counts come from aider/utils.py format_tokens: "<n>" under 1000, "<n.n>k" under 10000,
//   "<n>k" above (so counts above 1000 are rounded); older releases printed "1,234" and
//   "$0.01 request". All are read here.
// - The model: get_announcements prints "Model: <name> with <format> edit format" (older:
//   "Main model: ...").
// - Model call failures: send_message prints the litellm exception, "litellm.<Name>: ...", and
//   gives up; aider then still exits 0 (issue Aider-AI/aider#5552), so the exit code cannot tell.
import type { AgentUsage } from '../core/state.js';
import { priceTokens } from './pricing.js';

export interface AiderCall {
  sent: number;
  received: number;
  cacheWrite: number;
  cacheHit: number;
  /** Dollars, when aider knows the model's prices. */
  messageCost?: number;
  sessionCost?: number;
}

export interface AiderOutput {
  calls: AiderCall[];
  /** The model named in aider's announcement, if printed. */
  model?: string;
  /** litellm error lines, each with the number of calls that had completed before it. */
  errors: { message: string; afterCalls: number }[];
}

// Colour codes, in case aider ran with --pretty after all.
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;?]*[ -/]*[@-~]`, 'g');
const COUNT = String.raw`(\d[\d,]*(?:\.\d+)?k?)`;
const TOKENS = new RegExp(
  String.raw`Tokens: ${COUNT} sent(?:, ${COUNT} cache write)?(?:, ${COUNT} cache hit)?, ${COUNT} received\.`,
);
const COST = /Cost: \$(\d+(?:\.\d+)?) (?:message|request), \$(\d+(?:\.\d+)?) session\./;
const MODEL = /^(?:Main model|Model): (\S+)/;
const ERROR = /^(litellm\.[A-Za-z]+(?:Error|Exception)\b.*)$/;

/** "1.6k" → 1600, "12k" → 12000, "1,234" → 1234, "997" → 997. */
export function parseTokenCount(text: string): number {
  const t = text.replace(/,/g, '');
  return t.endsWith('k') ? Math.round(Number(t.slice(0, -1)) * 1000) : Number(t);
}

export function parseAiderOutput(text: string): AiderOutput {
  const out: AiderOutput = { calls: [], errors: [] };
  for (const raw of text.replace(ANSI, '').split(/\r?\n/)) {
    // The same lines appear blockquoted ("> ") in the chat history file.
    const line = raw.replace(/^> /, '').trim();
    const tokens = TOKENS.exec(line);
    if (tokens) {
      out.calls.push({
        sent: parseTokenCount(tokens[1] as string),
        cacheWrite: tokens[2] ? parseTokenCount(tokens[2]) : 0,
        cacheHit: tokens[3] ? parseTokenCount(tokens[3]) : 0,
        received: parseTokenCount(tokens[4] as string),
      });
    }
    const cost = COST.exec(line);
    const last = out.calls.at(-1);
    if (cost && last && last.messageCost === undefined) {
      last.messageCost = Number(cost[1]);
      last.sessionCost = Number(cost[2]);
    }
    const model = MODEL.exec(line);
    if (model && out.model === undefined) out.model = model[1];
    const error = ERROR.exec(line);
    if (error) out.errors.push({ message: error[1] as string, afterCalls: out.calls.length });
  }
  return out;
}

/**
 * Tokens, cost and turns of one aider run. The cost is aider's own session figure when it priced
 * every call; otherwise forkflush prices the tokens (`pricedFrom` says with what).
 */
export function aiderUsage(output: AiderOutput, configuredModel?: string): AgentUsage {
  let inputTokens = 0;
  let outputTokens = 0;
  let cachedInput = 0;
  let cacheWrite = 0;
  for (const c of output.calls) {
    inputTokens += c.sent;
    outputTokens += c.received;
    cachedInput += c.cacheHit;
    cacheWrite += c.cacheWrite;
  }
  const turns = output.calls.length;
  const priced = output.calls.length > 0 && output.calls.every((c) => c.sessionCost !== undefined);
  if (priced || turns === 0) {
    return { inputTokens, outputTokens, costUsd: output.calls.at(-1)?.sessionCost ?? 0, turns };
  }
  // aider's "sent" is the prompt's tokens, its cache hits and writes among them (litellm's prompt_tokens).
  const p = priceTokens(wireModel(output.model ?? configuredModel), {
    input: inputTokens,
    cachedInput,
    cacheWrite,
    output: outputTokens,
  });
  return { inputTokens, outputTokens, costUsd: p.costUsd, turns, pricedFrom: p.pricedFrom };
}

/** litellm model names carry a provider prefix ("openai/gpt-4o", "anthropic/claude-sonnet-4"). */
export function wireModel(model: string | undefined): string | undefined {
  return model?.replace(/^[a-z0-9_-]+\//i, '');
}
