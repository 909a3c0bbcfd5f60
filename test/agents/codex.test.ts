// Codex's own quirks, past the agent contract (contract/suite.ts): the rollout it keeps per thread
// (the context is cut back to it), cached input at the cached price, a turn stopped with a tool
// call pending, and the forms of a thread it cannot resume.
// FORKFLUSH_RECORD_CODEX_FIXTURES=1 also saves the CLI's outputs to test/fixtures/agents/codex/
// for the parser's unit tests.
import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../../src/agents/agent.js';
import { codexHarness as h } from './contract/codex.js';
import { episode, type Tools, toolsFor } from './contract/harness.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'agents', 'codex');
const RECORD = process.env.FORKFLUSH_RECORD_CODEX_FIXTURES === '1';

let t: Tools;
beforeAll(async () => {
  await h.start();
  t = toolsFor(h.root(), h);
  if (RECORD) await mkdir(FIXTURES, { recursive: true });
});
afterAll(() => h.stop());

async function rolloutOf(contextDir: string): Promise<string> {
  const files = (await readdir(join(contextDir, 'home', 'sessions'), { recursive: true })).filter((f) =>
    /rollout-.*\.jsonl$/.test(f),
  );
  expect(files).toHaveLength(1);
  return join(contextDir, 'home', 'sessions', files[0] as string);
}

/** The run's JSON lines (stderr, in the same log, holds Codex's plain-text warnings). */
async function stdoutOf(s: AgentSession): Promise<string> {
  const lines = (await readFile(s.logFile, 'utf8')).split('\n').filter((l) => l.startsWith('{"type":'));
  return `${lines.join('\n')}\n`;
}

async function record(name: string, s: AgentSession, contextDir: string): Promise<void> {
  if (!RECORD) return;
  await writeFile(join(FIXTURES, `${name}.stdout.jsonl`), await stdoutOf(s));
  await writeFile(join(FIXTURES, `${name}.rollout.jsonl`), await readFile(await rolloutOf(contextDir), 'utf8'));
}

describe('codex: the thread and its rollout', () => {
  it('keeps only config.toml and the rollout; prices cached input at the cached rate; counts calls across episodes', async () => {
    const ws = await t.repo();
    const first = await t.folder('ctx');
    h.model.work('a.txt', '1');
    const s = await t.session(ws, first);
    const { out } = await episode(h, s);
    expect(out.exit, out.note).toBe('finished');
    const calls = h.workCalls;
    // 1000 input of which 600 cached, 40 output, per call (contract/codex.ts), at gpt-5-codex's rates.
    expect(out.usage?.pricedFrom).toContain('gpt-5-codex');
    expect(out.usage?.costUsd).toBeCloseTo((calls * (400 * 1.25 + 600 * 0.125 + 40 * 10)) / 1e6, 9);
    const rec = JSON.parse(await readFile(join(first, 'session.json'), 'utf8'));
    expect(rec).toMatchObject({ agent: 'codex', modelCalls: calls });
    expect((await readdir(join(first, 'home'))).sort()).toEqual(['config.toml', 'sessions']);
    expect(await rolloutOf(first)).toContain(rec.threadId);
    await record('fresh', s, first);

    const carried = await t.folder('ctx');
    await cp(first, carried, { recursive: true });
    h.model.work('b.txt', '2');
    const s2 = await t.session(ws, carried);
    expect((await episode(h, s2)).out.exit).toBe('finished');
    const rec2 = JSON.parse(await readFile(join(carried, 'session.json'), 'utf8'));
    expect(rec2.threadId).toBe(rec.threadId);
    expect(rec2.modelCalls).toBe(2 * calls);
    await record('carried', s2, carried);
  });

  it('a turn stopped with a tool call pending: the next episode carries on, the call closed in its history', async () => {
    const ws = await t.repo();
    const ctx = await t.folder('ctx');
    h.model.busy();
    const stopped = await t.session(ws, ctx, { prompt: 'PROMPT-BUSY', allowance: 1500 });
    const a = await episode(h, stopped);
    expect(a.out.exit).toBe('budget');
    expect(a.out.note).toMatch(/stopped by forkflush: the session spent \d+ tokens of its 1500/);
    await record('budget', stopped, ctx);

    const next = await t.folder('ctx');
    await cp(ctx, next, { recursive: true });
    h.model.work('after.txt', '9');
    const { out, calls } = await episode(h, await t.session(ws, next, { prompt: 'PROMPT-AFTER' }));
    expect(out.exit, out.note).toBe('finished');
    expect(calls[0]?.prompts).toEqual(['PROMPT-BUSY', 'PROMPT-AFTER']);
    // The API refuses a call without an output: Codex closes the one the stop left open.
    const body = h.model.server.requests.filter((r) => r.path.endsWith('/responses')).at(-calls.length)?.body;
    const ids = (type: string) =>
      body.input
        .filter((i: { type: string }) => i.type === type)
        .map((i: { call_id: string }) => i.call_id)
        .sort();
    expect(ids('function_call').length).toBeGreaterThanOrEqual(1);
    expect(ids('function_call_output')).toEqual(ids('function_call'));
    expect(out.usage).toMatchObject({ inputTokens: calls.length * h.perCall.input });
    if (RECORD)
      await writeFile(
        join(FIXTURES, 'resumed-after-stop.rollout.jsonl'),
        await readFile(await rolloutOf(next), 'utf8'),
      );
  });
});

describe('codex: threads it cannot resume', () => {
  it('a session.json naming a thread that is not there: the note names the thread', async () => {
    const ctx = await t.folder('ctx');
    const ghost = '01a22b3f-0000-7000-8000-000000000000';
    await writeFile(
      join(ctx, 'session.json'),
      JSON.stringify({ agent: 'codex', threadId: ghost, totals: null, modelCalls: 0, model: null }),
    );
    await mkdir(join(ctx, 'home', 'sessions'), { recursive: true });
    h.model.answer('Hello.');
    const { out } = await episode(h, await t.session(await t.repo(), ctx));
    expect(out.note).toContain(
      `could not resume the carried Codex conversation (the session file of thread ${ghost} is missing); started a fresh conversation`,
    );
    expect(JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8')).threadId).not.toBe(ghost);
  });

  it('a corrupt session.json: none of the old files are kept', async () => {
    const ctx = await t.folder('ctx');
    await writeFile(join(ctx, 'session.json'), '{"agent": "codex", "threadId": ');
    const old = join(ctx, 'home', 'sessions', '2026', '01', '01');
    await mkdir(old, { recursive: true });
    await writeFile(join(old, 'rollout-x.jsonl'), 'garbage\n');
    h.model.answer('Hello.');
    const { out } = await episode(h, await t.session(await t.repo(), ctx));
    expect(out.note).toMatch(/\(session.json is not JSON .*\); started a fresh conversation/);
    expect(existsSync(join(old, 'rollout-x.jsonl'))).toBe(false);
  });
});
