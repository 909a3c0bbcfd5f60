// Dollars per million tokens for agents that report no cost, cached input at its own rate (most of an
// agent's input). A model not in the table is priced at the dearest entry, never underestimated.
// Sources, as of PRICES_AS_OF: Anthropic https://www.anthropic.com/pricing#api (cache reads 0.1x,
// 5-minute cache writes 1.25x input); OpenAI https://openai.com/api/pricing/ (cached input 0.1x;
// no cache-write charge); Google https://ai.google.dev/gemini-api/docs/pricing (context caching
// 0.25x input, prompts up to 200k tokens; no write charge, storage is billed by the hour and
// not here); Alibaba Cloud Model Studio https://www.alibabacloud.com/help/en/model-studio/models
// (international; Qwen prices rise with the prompt's length: the 128k-256k tier, so that a long
// agent session is not underestimated; implicit cache hits 0.2x input).
export const PRICES_AS_OF = '2026-11';

interface Price {
  input: number;
  /** Input read from the prompt cache. */
  cachedInput: number;
  /** Input written to the prompt cache (Anthropic); the input price where there is no surcharge. */
  cacheWrite: number;
  output: number;
}

const PER_MILLION: Record<string, Price> = {
  'claude-opus-4': { input: 15, cachedInput: 1.5, cacheWrite: 18.75, output: 75 },
  'claude-sonnet-4': { input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15 },
  'claude-haiku-4': { input: 1, cachedInput: 0.1, cacheWrite: 1.25, output: 5 },
  'gpt-5': { input: 1.25, cachedInput: 0.125, cacheWrite: 1.25, output: 10 },
  'gpt-5-mini': { input: 0.25, cachedInput: 0.025, cacheWrite: 0.25, output: 2 },
  'gpt-5-codex': { input: 1.25, cachedInput: 0.125, cacheWrite: 1.25, output: 10 },
  'gemini-2.5-pro': { input: 1.25, cachedInput: 0.3125, cacheWrite: 1.25, output: 10 },
  'gemini-2.5-flash': { input: 0.3, cachedInput: 0.075, cacheWrite: 0.3, output: 2.5 },
  'qwen3-coder-plus': { input: 3, cachedInput: 0.6, cacheWrite: 3, output: 15 },
};

/** The models the table lists (for the test that every named model is in it). */
export const PRICED_MODELS = Object.keys(PER_MILLION);

/** Tokens of one model's calls. `input` counts all input, the cached and cache-written parts included. */
export interface TokenCounts {
  input: number;
  cachedInput?: number;
  cacheWrite?: number;
  output: number;
}

/** The table entry for a model: the longest listed name that starts the model's name. */
function entryFor(model: string | undefined): { name: string; known: boolean } & Price {
  const key = Object.keys(PER_MILLION)
    .filter((name) => model?.startsWith(name))
    .sort((a, b) => b.length - a.length)[0];
  if (key) return { name: key, known: true, ...(PER_MILLION[key] as Price) };
  const dearest = Object.entries(PER_MILLION).sort(([, a], [, b]) => b.output - a.output)[0] as [string, Price];
  return { name: `${dearest[0]} (${model ?? 'unknown model'} is not in the table)`, known: false, ...dearest[1] };
}

/** The cost of tokens, and a line saying which prices were used. */
export function priceTokens(model: string | undefined, t: TokenCounts): { costUsd: number; pricedFrom: string } {
  const p = entryFor(model);
  const cached = Math.min(t.cachedInput ?? 0, t.input);
  const written = Math.min(t.cacheWrite ?? 0, t.input - cached);
  const fresh = t.input - cached - written;
  const costUsd = (fresh * p.input + cached * p.cachedInput + written * p.cacheWrite + t.output * p.output) / 1_000_000;
  const rates = `$${p.input}/$${p.cachedInput}/$${p.output} per million tokens in/cached in/out`;
  return { costUsd, pricedFrom: `forkflush prices of ${PRICES_AS_OF} for ${p.name}: ${rates}` };
}
