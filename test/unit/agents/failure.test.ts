// How a crashed session's failure is recognised from what its CLI said (core/failure.ts kinds):
// the provider's status, however the CLI quotes it, a dropped connection, a CLI that could not
// start, and a command agent's sysexits codes. The lines are the CLIs' own, as the mock model
// server made them say (test/fixtures/agents/<kind>/, test/agents/contract/suite.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claudeEnding } from '../../../src/agents/claude-code.js';
import { execEvents } from '../../../src/agents/codex.js';
import { sessionErrors } from '../../../src/agents/copilot.js';
import { specOf } from '../../../src/agents/specs.js';
import type { AgentKind } from '../../../src/core/config.js';
import { failureOf } from '../../../src/core/failure.js';

const fixture = (kind: string, name: string) =>
  readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'agents', kind, name), 'utf8');
const crashed = { exitCode: 1, ms: 5000, stderr: '' };
const of = (kind: AgentKind, quote: string, status?: number | null, run = crashed) =>
  failureOf(specOf(kind), { ...run, quote, status });

describe('failureOf', () => {
  it("a word that holds an error code is no dropped connection: Python's ModuleNotFoundError is no outage", () => {
    expect(of('command', "ModuleNotFoundError: No module named 'litellm'")?.kind).not.toBe('network');
    expect(of('command', 'fetch failed: getaddrinfo ENOTFOUND api.example.com')?.kind).toBe('network');
  });

  it("each CLI's refused key, as it says it: auth, with the key to set", () => {
    const claude = claudeEnding(
      { ...crashed, stdout: fixture('claude-code', 'api-error.stream.jsonl'), stopped: null },
      null,
    );
    expect(of('claude-code', claude.why ?? '', 401)).toMatchObject({
      kind: 'auth',
      fix: expect.stringContaining('set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`)'),
    });
    const codex = execEvents(fixture('codex', 'unauthorized.stdout.jsonl')).error ?? '';
    expect(of('codex', codex)).toMatchObject({ kind: 'auth', quote: expect.stringMatching(/^unexpected status 401/) });
    const copilot = sessionErrors(fixture('copilot', 'auth-error.stdout.jsonl')).at(-1) ?? '';
    expect(of('copilot', copilot)?.kind).toBe('auth');
    expect(of('qwen-code', '[API Error: 401 invalid api key]')?.kind).toBe('auth');
  });

  it('a status the CLI states apart wins; the classes by status', () => {
    expect(of('opencode', 'APIError: mock error', 403)?.kind).toBe('auth');
    expect(of('claude-code', 'API Error: 404 model: claude-x not found')?.kind).toBe('model');
    expect(of('codex', 'unexpected status 429 Too Many Requests, retry-after: 7')).toMatchObject({
      kind: 'rate-limit',
      retryAfterMs: 7000,
    });
    expect(of('codex', 'unexpected status 429: You exceeded your current quota')?.kind).toBe('quota');
    expect(of('gemini', 'API Error: 529 overloaded')?.kind).toBe('overload');
    expect(of('qwen-code', '[API Error: 503 service unavailable]')?.kind).toBe('overload');
    expect(of('opencode', 'Connection error. (cause: read ECONNRESET)')?.kind).toBe('network');
  });

  it('a transient fault each CLI gave up on, as the real CLIs said it against the mock (contract/suite.ts)', () => {
    expect(of('codex', 'exceeded retry limit, last status: 429 Too Many Requests')?.kind).toBe('rate-limit');
    // forkflush's proxy answers a dropped upstream with a 502 that quotes the reset: the network, not an overload.
    const reset =
      'unexpected status 502 Bad Gateway: forkflush: the upstream failed: read ECONNRESET, url: http://127.0.0.1:1/responses';
    expect(of('codex', reset)?.kind).toBe('network');
    expect(of('codex', 'unexpected status 529 <unknown status code>: Overloaded')?.kind).toBe('overload');
    const copilot = (status: number, text: string) =>
      `Failed to get response from the AI model; retried 5 times (total retry wait time: 5.32 seconds) Last error: ${status} ${text}`;
    expect(of('copilot', copilot(429, 'Rate limit reached'), 429)?.kind).toBe('rate-limit');
    expect(of('copilot', copilot(529, 'Overloaded'), 529)?.kind).toBe('overload');
    // Qwen Code's own retries take about as long as the contract's deadline; said when it gave up, in CI.
    expect(of('qwen-code', 'Qwen Code exited with code 1: [API Error: 529 Overloaded]')?.kind).toBe('overload');
  });

  it('a CLI that could not start; a crash nobody recognises is none of them', () => {
    expect(
      of('gemini', 'spawn gemini ENOENT', null, {
        exitCode: null,
        ms: 3,
        stderr: '',
        spawnError: 'spawn gemini ENOENT',
      } as never),
    ).toMatchObject({ kind: 'cli', fix: expect.stringContaining('npm i -g @google/gemini-cli') });
    expect(of('codex', 'thread panicked at src/main.rs:1')).toBeNull();
  });

  it("a command agent's exit codes: 75 (EX_TEMPFAIL) passes, 77 (EX_NOPERM) is its login", () => {
    expect(of('command', 'try later', null, { ...crashed, exitCode: 75 })?.kind).toBe('overload');
    expect(of('command', 'no permission', null, { ...crashed, exitCode: 77 })?.kind).toBe('auth');
    expect(of('command', 'boom', null, { ...crashed, exitCode: 3 })).toBeNull();
  });
});
