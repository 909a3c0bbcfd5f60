// What a model API's answer says it used, read by forkflush's egress proxy from the answers it relays
// on a model route (worker/answer-meter.ts): the charge's floor where the agent reports less (core/charge.ts).
// A CLI counts its own calls; code the agent wrote that calls the model through the route with its
// placeholder key (a solver that asks the model, a loop left running) is counted only here.
// The answers' shapes, each a JSON body or the JSON events of a stream (SSE):
//   - Anthropic Messages: `usage` (input_tokens without the cache's, cache_read_input_tokens,
//     cache_creation_input_tokens, output_tokens), in a stream at `message.usage` of message_start
//     and `usage` of message_delta, running totals;
//   - OpenAI Chat Completions: `usage` (prompt_tokens, with prompt_tokens_details.cached_tokens,
//     completion_tokens), in a stream on its last chunk;
//   - OpenAI Responses: `usage` (input_tokens, input_tokens_details.cached_tokens, output_tokens),
//     in a stream at `response.usage` of response.completed;
//   - Gemini: `usageMetadata` (promptTokenCount, toolUsePromptTokenCount, cachedContentTokenCount,
//     candidatesTokenCount, thoughtsTokenCount), on every chunk of a stream, running totals.
// Running totals make one answer's use the largest figure of each kind among its events. A stream
// that states none (OpenAI's Chat Completions without stream_options.include_usage) is counted by
// its sizes (sizeEstimate), and what would spend with no answer at all is refused (uncountedSpend).
import { count, isRecord } from './json.js';
import type { ModelUse } from './usage.js';

export type AnswerUse = { model: string; use: Omit<ModelUse, 'costUsd'> };

/** An answer read so far: the model it names, the largest figures its documents state (null: none yet). */
export interface AnswerRead {
  model: string | null;
  use: Counts | null;
}

export const NOTHING_READ: AnswerRead = { model: null, use: null };

/** The use one answer's JSON documents (its body, or its stream's events) state, or null when none does. */
export function answerUse(docs: readonly unknown[]): AnswerUse | null {
  return usedIn(docs.reduce<AnswerRead>(withDoc, NOTHING_READ));
}

/** What an answer read whole states it used, as one call; null when it states nothing. */
export function usedIn(read: AnswerRead): AnswerUse | null {
  return read.use ? { model: read.model ?? 'unknown', use: { ...read.use, calls: 1 } } : null;
}

/** An answer read so far, with one more of its documents. */
export function withDoc(so: AnswerRead, doc: unknown): AnswerRead {
  if (Array.isArray(doc)) return doc.reduce<AnswerRead>(withDoc, so);
  if (!isRecord(doc)) return so;
  const inner = [doc, doc.message, doc.response].filter(isRecord);
  const named = inner.map((r) => r.model ?? r.modelVersion).find((m): m is string => typeof m === 'string');
  let use = so.use;
  for (const r of inner) {
    const one = isRecord(r.usageMetadata) ? geminiUse(r.usageMetadata) : isRecord(r.usage) ? apiUse(r.usage) : null;
    if (!one) continue;
    use = use ? { ...use } : { input: 0, cached: 0, written: 0, output: 0 };
    for (const k of ['input', 'cached', 'written', 'output'] as const) use[k] = Math.max(use[k], one[k]);
  }
  return { model: so.model ?? named ?? null, use };
}

/** Bytes a token, about, in what a model reads and writes: how a stream that states no use is counted. */
const BYTES_PER_TOKEN = 4;

/**
 * A stream that stated no use, counted by its sizes: its request as input, the whole stream as
 * output (more than the text it carries: an estimate that errs on the budget's side).
 */
export function sizeEstimate(model: string | null, requestBytes: number, streamBytes: number): AnswerUse {
  const [input, output] = [requestBytes, streamBytes].map((b) => Math.ceil(b / BYTES_PER_TOKEN)) as [number, number];
  return { model: model ?? 'unknown', use: { input, cached: 0, written: 0, output, calls: 1 } };
}

/**
 * Requests that spend where no answer states it, refused on a route with keys: a batch (its
 * answers come later, elsewhere, or never asked for), a fine-tuning job. Reading what they made
 * (a GET) spends nothing and goes through.
 */
const UNCOUNTED: readonly [RegExp, string][] = [
  [/\/batches(\/|:|$)|:batchGenerateContent$|:asyncBatchEmbedContent$/i, 'a batch'],
  [/\/fine[_-]tun(ing|es)(\/|$)|\/tunedModels(\/|:|$)/i, 'a fine-tuning job'],
];

/** Why a model route does not forward a request (its spend would be counted nowhere), or null. */
export function uncountedSpend(method: string, path: string): string | null {
  if (/^(GET|HEAD|OPTIONS)$/i.test(method)) return null;
  const p = path.split('?')[0] ?? '';
  const found = UNCOUNTED.find(([pattern]) => pattern.test(p))?.[1];
  return found
    ? `${method} ${p} is not forwarded: ${found} spends the model's key where no answer states what it used, so forkflush could not count it against the budget`
    : null;
}

type Counts = Pick<ModelUse, 'input' | 'cached' | 'written' | 'output'>;

/** Anthropic's, OpenAI's Chat Completions' and Responses' `usage`: input counts the cache's parts too. */
function apiUse(u: Record<string, unknown>): Counts | null {
  const details = isRecord(u.prompt_tokens_details)
    ? u.prompt_tokens_details
    : isRecord(u.input_tokens_details)
      ? u.input_tokens_details
      : {};
  if (u.prompt_tokens !== undefined || u.completion_tokens !== undefined)
    return {
      input: count(u.prompt_tokens),
      cached: count(details.cached_tokens),
      written: 0,
      output: count(u.completion_tokens),
    };
  if (u.input_tokens === undefined && u.output_tokens === undefined) return null;
  const [read, wrote] = [count(u.cache_read_input_tokens), count(u.cache_creation_input_tokens)];
  return {
    input: count(u.input_tokens) + read + wrote,
    cached: read + count(details.cached_tokens),
    written: wrote,
    output: count(u.output_tokens),
  };
}

function geminiUse(u: Record<string, unknown>): Counts {
  return {
    input: count(u.promptTokenCount) + count(u.toolUsePromptTokenCount),
    cached: count(u.cachedContentTokenCount),
    written: 0,
    output: count(u.candidatesTokenCount) + count(u.thoughtsTokenCount),
  };
}
