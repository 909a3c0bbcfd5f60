// What `opencode run --format json` prints (opencode-ai 1.18.33; recorded outputs in
// test/fixtures/agents/opencode/): one JSON event per line, each with the `sessionID`:
// step_start, tool_use, text, reasoning, then step_finish {part: {reason, tokens: {total, input,
// output, reasoning, cache: {read, write}}, cost}} once per model call, and error {error: {name,
// data: {message, statusCode?}}}. Tokens are per call and already split: `input` excludes the
// cached part (`cache.read`) and `output` the reasoning. There is no final summary: the episode's
// usage is the sum of its steps.
import { count, isRecord, jsonLines } from './session.js';

export interface OpencodeRun {
  sessionId: string | null;
  /** Model calls (step_finish events). */
  steps: number;
  /** All input, the cached and cache-written parts included. */
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  /** Output, reasoning included. */
  outputTokens: number;
  /** As opencode priced the calls (0 for a model it has no prices for). */
  costUsd: number;
  errors: string[];
}

export function emptyRun(): OpencodeRun {
  return {
    sessionId: null,
    steps: 0,
    inputTokens: 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 0,
    costUsd: 0,
    errors: [],
  };
}

/** Adds the events of some output lines to a run (other lines, stderr's, are skipped). */
export function addEvents(run: OpencodeRun, text: string): OpencodeRun {
  for (const e of jsonLines(text)) {
    if (typeof e.sessionID === 'string' && run.sessionId === null) run.sessionId = e.sessionID;
    if (e.type === 'step_finish' && isRecord(e.part)) {
      const t = isRecord(e.part.tokens) ? e.part.tokens : {};
      const cache = isRecord(t.cache) ? t.cache : {};
      run.steps++;
      run.inputTokens += count(t.input) + count(cache.read) + count(cache.write);
      run.cachedInputTokens += count(cache.read);
      run.cacheWriteTokens += count(cache.write);
      run.outputTokens += count(t.output) + count(t.reasoning);
      run.costUsd += count(e.part.cost);
    } else if (e.type === 'error' && isRecord(e.error)) {
      const data = isRecord(e.error.data) ? e.error.data : {};
      const name = typeof e.error.name === 'string' ? e.error.name : 'error';
      const message = typeof data.message === 'string' ? data.message : '';
      const body = typeof data.responseBody === 'string' ? apiMessage(data.responseBody) : null;
      run.errors.push(`${name}: ${body && !message.includes(body) ? `${message} (${body})` : message}`.slice(0, 400));
    }
  }
  return run;
}

/** The message of an API error body ({"error": {"message": …}}), if it has one. */
function apiMessage(body: string): string | null {
  for (const v of jsonLines(body)) {
    if (isRecord(v.error) && typeof v.error.message === 'string') return v.error.message;
    if (typeof v.message === 'string') return v.message;
  }
  return null;
}
