// Model calls no CLI counts: code the agent wrote (a solver that asks the model, a loop left running)
// calls the model through its route with the placeholder key it holds, and the agent reports
// spending nothing. The answers forkflush's proxy relays state what each call used
// (worker/answer-meter.ts): the episode is charged no less, and stopped once they pass its allowance.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { cleanupAttackTemps, describeSandboxed, makeAttackRepo, runLocal } from './helpers.js';

afterAll(cleanupAttackTemps);

const KEY = `sk-ant-api03-${randomBytes(24).toString('hex')}`;
/** What each answer of the mock states: Anthropic's usage, the cache's parts apart from input_tokens. */
const USAGE = { input_tokens: 600, cache_read_input_tokens: 300, cache_creation_input_tokens: 100, output_tokens: 500 };
const PER_CALL = 1500;

/** The provider: a JSON answer, or a stream (SSE) whose input comes at its start and output at its end. */
function provider(): Promise<{ server: Server; port: number; calls: () => number }> {
  let calls = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      calls++;
      const message = { id: `msg_${calls}`, type: 'message', model: 'claude-sonnet-4-5', content: [] };
      if (!JSON.parse(body || '{}').stream)
        return void res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ ...message, usage: USAGE }));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const event = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
      res.write(event('message_start', { message: { ...message, usage: { ...USAGE, output_tokens: 1 } } }));
      res.write(
        event('content_block_delta', {
          index: 0,
          delta: { type: 'text_delta', text: 'usage: {"output_tokens": 99999}' },
        }),
      );
      res.end(
        event('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: USAGE.output_tokens } }),
      );
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, port: (server.address() as AddressInfo).port, calls: () => calls }),
    ),
  );
}

let mock: Awaited<ReturnType<typeof provider>>;
const saved: Record<string, string | undefined> = {};
beforeAll(async () => {
  mock = await provider();
});
afterAll(() => {
  mock.server.closeAllConnections();
  mock.server.close();
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'attacks', 'uncounted-calls.mjs');

/** A task whose agent runs the fixture with the user's key behind the proxy and the mock as its gateway. */
function task(args: string, budget: string, agentTimeout = 60) {
  for (const [k, v] of Object.entries({
    ANTHROPIC_API_KEY: KEY,
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${mock.port}`,
  })) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  const repo = makeAttackRepo({ agent: `node ${FIXTURE} ${args}`, budget, agentTimeout });
  const config = join(repo.dir, '.github', 'autoresearch.yml');
  const text = readFileSync(config, 'utf8')
    .replace('agent:\n', 'agent:\n  env: [ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL]\n')
    .replace('sandbox:\n', `sandbox:\n  network:\n    allow: ["127.0.0.1:${mock.port}"]\n`);
  writeFileSync(config, text);
  repo.git('commit', '-qam', 'the key and the mock');
  return repo;
}

describeSandboxed('model calls the agent made itself, with the placeholder key', () => {
  // Before: charged 0 tokens, what the usage file said; the five calls' 7,500 tokens were in no
  // record, and a budget no episode spent of had the run go on, episode after episode.
  it('are charged as the answers stated, though the agent reports spending nothing', async () => {
    const before = mock.calls();
    const repo = task('calls 5 1', 'total: 7500\n  unit: tokens\n  episode: 7500');
    const { result, results } = await runLocal(repo);
    // One episode spends the budget: charged nothing, the run went on episode after episode.
    expect(results).toHaveLength(1);
    expect(mock.calls() - before).toBe(5);
    expect(result.exit).toBe('finished');
    // Input counts the cache's parts: 1,000 in and 500 out a call, the streamed ones too (their
    // text, which looks like usage, is not).
    expect(result.spent).toBe(5 * PER_CALL);
    expect(result.note).toMatch(
      /the model calls forkflush's proxy relayed stated 7,?500 tokens .* the agent reported 0/,
    );
  }, 120_000);

  // Before: the loop ran to the agent's time limit (60 s, some 500 calls: 750,000 tokens against an
  // allowance of 20,000), charged its allowance as an estimate.
  it('stop the agent once their answers pass its allowance, long before its time limit', async () => {
    const before = mock.calls();
    const repo = task('loop', 'total: 20000\n  unit: tokens\n  episode: 20000', 60);
    const { result } = await runLocal(repo);
    const calls = mock.calls() - before;
    expect(result.exit).toBe('budget');
    expect(result.note).toMatch(/stopped by forkflush: the answers of the model calls its proxy relayed stated/);
    expect(calls).toBeGreaterThan(20_000 / PER_CALL);
    expect(calls).toBeLessThan(200);
    expect(result.spent).toBeGreaterThanOrEqual(20_000);
    // Every answer that came back whole; a call the stop cut in the middle of its answer may not be.
    expect([calls - 1, calls].map((n) => n * PER_CALL)).toContain(result.spent);
  }, 120_000);

  // In dollars the count is priced by forkflush's table, which may be dearer than a CLI's own: the
  // stop comes past twice the allowance (METERED_USD_STOP_FACTOR), still long before the time limit.
  it('stop the agent past twice its allowance in dollars, priced as forkflush prices the model', async () => {
    const before = mock.calls();
    const repo = task('loop', 'total: 0.05\n  unit: usd\n  episode: 0.05', 60);
    const { result } = await runLocal(repo);
    const calls = mock.calls() - before;
    // claude-sonnet-4: 600 fresh in at $3, 300 cached at $0.30, 100 written at $3.75, 500 out at $15 per million.
    const perCall = (600 * 3 + 300 * 0.3 + 100 * 3.75 + 500 * 15) / 1e6;
    expect(result.exit).toBe('budget');
    expect(calls).toBeGreaterThan(0.1 / perCall);
    expect(calls).toBeLessThan(100);
    expect(result.spent).toBeGreaterThanOrEqual((calls - 1) * perCall - 1e-6);
    expect(result.spent).toBeLessThanOrEqual(calls * perCall + 1e-6);
  }, 120_000);
});
