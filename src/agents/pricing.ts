// Prices for agents that report tokens but no cost (Codex, Gemini CLI, Copilot CLI's per-model
// tokens): US dollars per million tokens, input and output. A result priced this way says so
// (AgentUsage.pricedFrom). Prices change: check them against the vendor's page and update the
// date; a model not in the table is priced at the most expensive listed, so a budget is never
// underestimated.
export const PRICES_AS_OF = '2026-11';

const PER_MILLION: Record<string, { input: number; output: number }> = {
  'claude-opus-4': { input: 15, output: 75 },
  'claude-sonnet-4': { input: 3, output: 15 },
  'claude-haiku-4': { input: 1, output: 5 },
  'gpt-5': { input: 1.25, output: 10 },
  'gpt-5-mini': { input: 0.25, output: 2 },
  'gpt-5-codex': { input: 1.25, output: 10 },
  'gemini-2.5-pro': { input: 1.25, output: 10 },
  'gemini-2.5-flash': { input: 0.3, output: 2.5 },
};

/** The table entry for a model: the longest listed name that starts the model's name. */
function entryFor(model: string | undefined): { name: string; input: number; output: number } {
  const key = Object.keys(PER_MILLION)
    .filter((name) => model?.startsWith(name))
    .sort((a, b) => b.length - a.length)[0];
  if (key) return { name: key, ...(PER_MILLION[key] as { input: number; output: number }) };
  const dearest = Object.entries(PER_MILLION).sort(([, a], [, b]) => b.output - a.output)[0] as [
    string,
    { input: number; output: number },
  ];
  return { name: `${dearest[0]} (${model ?? 'unknown model'} is not in the table)`, ...dearest[1] };
}

/** The cost of tokens, and a line saying which prices were used. */
export function priceTokens(
  model: string | undefined,
  inputTokens: number,
  outputTokens: number,
): { costUsd: number; pricedFrom: string } {
  const p = entryFor(model);
  const costUsd = (inputTokens * p.input + outputTokens * p.output) / 1_000_000;
  return {
    costUsd,
    pricedFrom: `forkflush prices of ${PRICES_AS_OF} for ${p.name}: $${p.input}/$${p.output} per million tokens in/out`,
  };
}
