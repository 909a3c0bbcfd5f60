// What an agent's error text says went wrong (the common shapes every spec can share), the paths
// it says were not found, and the wait before a retry: pure, no clock.
import { describe, expect, it } from 'vitest';
import {
  FAILURE_KINDS,
  isPermanent,
  isTransient,
  notFoundPaths,
  quoteLine,
  recognizeFailure,
  resumableFailure,
  retryAfterMs,
  retryWait,
} from '../../src/core/failure.js';
import { AGENT_TRIES, RETRY_FIRST_WAIT_SECONDS, RETRY_MAX_WAIT_SECONDS } from '../../src/core/method.js';

describe('recognizeFailure', () => {
  it.each([
    // What providers and CLIs print, as observed (Anthropic, OpenAI, Gemini, their CLIs).
    ['Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}', 'auth'],
    ['API Error: 401 Invalid API key · Please run /login', 'auth'],
    ['Error: 403 {"error":{"type":"permission_error","message":"Your API key does not have permission"}}', 'auth'],
    ['HTTP status 403 Forbidden', 'auth'],
    ['[API Error: API key not valid. Please pass a valid API key.]', 'auth'],
    ['Incorrect API key provided: sk-abc***. You can find your API key at https://platform.openai.com', 'auth'],
    ['Error: 429 You exceeded your current quota, please check your plan and billing details', 'quota'],
    ['Your credit balance is too low to access the Anthropic API', 'quota'],
    ['Claude AI usage limit reached|1767225600', 'quota'],
    ['Error: 404 {"type":"error","error":{"type":"not_found_error","message":"model: claude-opus-9"}}', 'model'],
    ['The model `gpt-9` does not exist or you do not have access to it.', 'model'],
    ['error: unknown model "sonet"', 'model'],
    [
      'Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}',
      'rate-limit',
    ],
    ['stream error: 429 Too Many Requests; retry-after: 30', 'rate-limit'],
    ['[API Error: {"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}]', 'rate-limit'],
    ['Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', 'overload'],
    ['unexpected status 503 Service Unavailable', 'overload'],
    ['Error: read ECONNRESET', 'network'],
    ['Error: getaddrinfo ENOTFOUND api.anthropic.com', 'network'],
    ['connect ETIMEDOUT 160.79.104.10:443', 'network'],
    ['TypeError: fetch failed', 'network'],
  ])('%s -> %s', (text, kind) => {
    const f = recognizeFailure(`some progress\n${text}\n`);
    expect(f?.kind).toBe(kind);
    expect(f?.quote).toBe(text.trim());
    expect(f?.fix).toBeTruthy();
  });

  it('names nothing in ordinary output, or a crash of its own', () => {
    expect(recognizeFailure('')).toBeNull();
    expect(
      recognizeFailure('TypeError: cannot read properties of undefined (reading "x")\n    at main (agent.mjs:3:9)'),
    ).toBeNull();
    expect(recognizeFailure('wrote 401 lines to out.txt\nscore 429')).toBeNull();
  });

  it('puts a permanent failure before a passing one the same output names', () => {
    // OpenAI's quota error comes as a 429; a CLI retries rate limits, then gives up on the key.
    expect(recognizeFailure('429 rate limit, retrying\nError: 401 invalid x-api-key')?.kind).toBe('auth');
    expect(recognizeFailure('Error: 429 You exceeded your current quota')?.kind).toBe('quota');
  });

  it("reads the provider's wait: retry-after in seconds or milliseconds, 'try again in', Gemini's retryDelay", () => {
    expect(recognizeFailure('429 Too Many Requests\nretry-after: 30')?.retryAfterMs).toBe(30_000);
    expect(recognizeFailure('rate limit reached; Please try again in 1.5s.')?.retryAfterMs).toBe(1500);
    expect(recognizeFailure('rate_limit_error; retry-after-ms: 2500')?.retryAfterMs).toBe(2500);
    expect(retryAfterMs(['"retryDelay": "42s"'])).toBe(42_000);
    expect(retryAfterMs(['try again in 2 minutes'])).toBe(120_000);
    // A permanent failure waits for nothing.
    expect(recognizeFailure('401 invalid x-api-key; retry-after: 30')?.retryAfterMs).toBeUndefined();
  });

  it('quotes one line, without control characters, cut', () => {
    expect(quoteLine('\u001b[31mError\u001b[0m: x')).toBe('[31mError [0m: x');
    expect(quoteLine('x'.repeat(1000))).toHaveLength(300);
  });
});

describe('the kinds', () => {
  it('are permanent, transient, or a crash; a fix in the config needs a new run', () => {
    expect(FAILURE_KINDS.filter(isPermanent)).toEqual(['auth', 'quota', 'model', 'cli', 'hidden-path', 'egress']);
    expect(FAILURE_KINDS.filter(isTransient)).toEqual(['rate-limit', 'overload', 'network']);
    expect(FAILURE_KINDS.filter((k) => !resumableFailure(k))).toEqual(['model', 'cli', 'hidden-path', 'egress']);
  });
});

describe('notFoundPaths', () => {
  it('finds what shells, node, python and bwrap say they could not find', () => {
    expect(
      notFoundPaths(
        "node:internal/modules/cjs/loader:1228\n  throw err;\nError: Cannot find module '/tmp/x/agent.mjs'",
      ),
    ).toEqual(['/tmp/x/agent.mjs']);
    expect(notFoundPaths('sh: 1: claude: not found')).toEqual(['claude']);
    expect(notFoundPaths('agent.sh: 1: claude: not found')).toEqual(['claude']);
    expect(notFoundPaths('bash: line 1: codex: command not found')).toEqual(['codex']);
    expect(notFoundPaths("python3: can't open file '/home/u/agent.py': [Errno 2] No such file or directory")).toEqual([
      '/home/u/agent.py',
    ]);
    expect(notFoundPaths('setpriv: failed to execute gemini: No such file or directory')).toEqual(['gemini']);
    expect(notFoundPaths('sh: 0: cannot open /tmp/a.sh: No such file')).toEqual(['/tmp/a.sh']);
    expect(notFoundPaths('all fine')).toEqual([]);
  });
});

describe('retryWait', () => {
  const f = { kind: 'rate-limit' as const, quote: '429' };
  it('backs off from the first wait, three times longer each try, a little jitter, at most the bound', () => {
    const first = retryWait(1, f, 7);
    const second = retryWait(2, f, 7);
    if (!('waitMs' in first) || !('waitMs' in second)) throw new Error('expected waits');
    expect(first.waitMs).toBeGreaterThanOrEqual(RETRY_FIRST_WAIT_SECONDS * 1000);
    expect(first.waitMs).toBeLessThanOrEqual(RETRY_FIRST_WAIT_SECONDS * 1000 * 1.2);
    expect(second.waitMs).toBeGreaterThanOrEqual(RETRY_FIRST_WAIT_SECONDS * 3000);
    // The same seed, the same wait: K branches refused at once do not retry at once.
    expect(retryWait(1, f, 7)).toEqual(first);
    expect(new Set([1, 2, 3, 4].map((seed) => JSON.stringify(retryWait(1, f, seed)))).size).toBeGreaterThan(1);
  });

  it('gives up after AGENT_TRIES tries, or when the provider asks for longer than the bound', () => {
    expect(retryWait(AGENT_TRIES, f, 1)).toEqual({ giveUp: `${AGENT_TRIES} tries failed (at most ${AGENT_TRIES})` });
    expect(retryWait(1, { ...f, retryAfterMs: 3_600_000 }, 1)).toEqual({
      giveUp: `the provider asked to wait 3600 s, more than ${RETRY_MAX_WAIT_SECONDS} s`,
    });
  });

  it("waits at least the provider's retry-after", () => {
    expect(retryWait(1, { ...f, retryAfterMs: 200_000 }, 1)).toEqual({ waitMs: 200_000 });
  });
});
