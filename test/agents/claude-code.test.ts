// Claude Code's own quirks, past the agent contract (contract/suite.ts): its transcript lives under
// a project folder named after the working directory, so a fork moves it; its totals are the
// whole conversation's; and a transcript it cannot resume comes in several forms.
// RECORD_CLAUDE_FIXTURES=1 copies the runs' logs and transcripts into test/fixtures/agents/claude-code/
// (the unit tests of claude-code-output.ts read them).

import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, realpath, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectDirName, readStream } from '../../src/agents/claude-code.js';
import { claudeHarness as h } from './contract/claude-code.js';
import { episode, type Tools, toolsFor } from './contract/harness.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'agents', 'claude-code');
const RECORD = process.env.RECORD_CLAUDE_FIXTURES === '1';
const GHOST = '0f0f0f0f-1111-4222-8333-444455556666';

let t: Tools;
beforeAll(async () => {
  await h.start();
  t = toolsFor(h.root(), h);
});
afterAll(() => h.stop());

async function record(name: string, from: string): Promise<void> {
  if (!RECORD) return;
  await mkdir(FIXTURES, { recursive: true });
  await cp(from, join(FIXTURES, name));
}

async function transcriptOf(contextDir: string, workdir: string): Promise<string> {
  const rec = JSON.parse(await readFile(join(contextDir, 'session.json'), 'utf8')) as {
    sessionId: string;
    cwd: string;
  };
  return join(contextDir, 'home', 'projects', projectDirName(await realpath(workdir)), `${rec.sessionId}.jsonl`);
}

describe('claude-code: the transcript and its totals', () => {
  it('a carried episode costs the difference of the totals; a fork moves the transcript to its worktree', async () => {
    const wsA = await t.repo();
    const ctx = await t.folder('ctx');
    h.model.work('a.txt', '1');
    const fresh = await t.session(wsA, ctx, { prompt: 'PROMPT-A' });
    const first = await episode(h, fresh);
    expect(first.out.exit, first.out.note).toBe('finished');
    await record('fresh.stream.jsonl', fresh.logFile);
    await record('fresh-transcript.jsonl', await transcriptOf(ctx, wsA));
    const rec = JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8')) as { sessionId: string; cwd: string };
    expect(rec.sessionId).toBe(readStream(await readFile(fresh.logFile, 'utf8')).result?.sessionId);
    expect(rec.cwd).toBe(wsA);

    const carried = await t.folder('ctx');
    await cp(ctx, carried, { recursive: true });
    h.model.work('b.txt', '2');
    const second = await t.session(wsA, carried, { prompt: 'PROMPT-B' });
    const next = await episode(h, second);
    expect(next.out.exit, next.out.note).toBe('finished');
    await record('resumed.stream.jsonl', second.logFile);
    await record('resumed-transcript.jsonl', await transcriptOf(carried, wsA));
    // Claude Code reports the whole conversation's cost; the episode's is the difference.
    const totals = Object.values(readStream(await readFile(second.logFile, 'utf8')).result?.totals ?? {});
    const cost = totals.reduce((n, m) => n + (m.costUsd ?? 0), 0);
    expect(next.out.usage?.costUsd).toBeCloseTo(cost - (first.out.usage?.costUsd ?? 0), 9);
    expect(totals[0]?.output).toBe(2 * h.workCalls * h.perCall.output);

    const wsB = await t.repo();
    const fork = await t.folder('fork');
    await cp(carried, fork, { recursive: true });
    h.model.work('c.txt', '3');
    const forked = await episode(h, await t.session(wsB, fork, { prompt: 'PROMPT-C' }));
    expect(forked.out.exit, forked.out.note).toBe('finished');
    // Told it now works in the new worktree, where its transcript now lives.
    expect(forked.calls[0]?.text).toContain(`Primary working directory: ${wsB}`);
    const projects = await readdir(join(fork, 'home', 'projects'));
    expect(projects).toContain(projectDirName(wsB));
    expect(projects).not.toContain(projectDirName(wsA));
  });

  it('the bounds Claude Code enforces itself (money, turns) and the stops it is given, as it reports them', async () => {
    h.model.work('x.txt', '1');
    const money = await t.session(await t.repo(), await t.folder('ctx'), { allowance: 0.000001, unit: 'usd' });
    const a = await episode(h, money);
    expect(a.out.exit).toBe('budget');
    expect(a.out.note).toMatch(/money limit/);
    await record('max-budget.stream.jsonl', money.logFile);
    const turns = await t.session(await t.repo(), await t.folder('ctx'));
    const b = await episode(h, turns, { max_turns: 1 });
    expect(b.out.exit).toBe('budget');
    expect(b.out.note).toMatch(/turn limit/);
    await record('max-turns.stream.jsonl', turns.logFile);
    h.model.workThenHang('y.txt', '1', 1);
    const ws = await t.repo();
    const killedCtx = await t.folder('ctx');
    const killed = await t.session(ws, killedCtx, { allowance: 500, unit: 'tokens' });
    expect((await episode(h, killed)).out.exit).toBe('budget');
    await record('killed.stream.jsonl', killed.logFile);
    await record('killed-transcript.jsonl', await transcriptOf(killedCtx, ws));
    h.model.refuse(400, 'the mock refuses this request');
    const refused = await t.session(await t.repo(), await t.folder('ctx'));
    expect((await episode(h, refused)).out.exit).toBe('crash');
    await record('api-error.stream.jsonl', refused.logFile);
  });
});

describe('claude-code: transcripts it cannot resume', () => {
  async function contextWith(ws: string, transcript: string | null): Promise<string> {
    const ctx = await t.folder('ctx');
    const project = join(ctx, 'home', 'projects', projectDirName(ws));
    await mkdir(project, { recursive: true });
    await writeFile(
      join(ctx, 'session.json'),
      JSON.stringify({ sessionId: GHOST, cwd: ws, totals: null, episode: 'r0' }),
    );
    if (transcript !== null) await writeFile(join(project, `${GHOST}.jsonl`), transcript);
    return ctx;
  }

  it('a corrupt transcript, a missing one: a note naming it, a fresh conversation, nothing carried on', async () => {
    const ws = await t.repo();
    h.model.answer('Fresh.');
    const corrupt = await contextWith(ws, 'not json {{{\n');
    const a = await episode(h, await t.session(ws, corrupt, { prompt: 'PROMPT-1' }));
    expect(a.out.note).toMatch(
      /the transcript of session 0f0f0f0f-.* has no readable line.*started a fresh conversation/,
    );
    expect(a.calls[0]?.answered).toBe(false);
    expect(existsSync(join(corrupt, 'home', 'projects', projectDirName(ws), `${GHOST}.jsonl`))).toBe(false);
    expect(JSON.parse(await readFile(join(corrupt, 'session.json'), 'utf8')).sessionId).not.toBe(GHOST);

    const missing = await contextWith(ws, null);
    const b = await episode(h, await t.session(ws, missing));
    expect(b.out.exit).toBe('finished');
    expect(b.out.note).toMatch(new RegExp(`the transcript of session ${GHOST} is missing`));
  });

  it('a transcript Claude Code finds no conversation in (a subagent row only): its own words, then afresh', async () => {
    const ws = await t.repo();
    const row = { type: 'user', isSidechain: true, sessionId: GHOST, message: { role: 'user', content: 'old' } };
    const ctx = await contextWith(ws, `${JSON.stringify(row)}\n`);
    h.model.answer('Third start.');
    const s = await t.session(ws, ctx, { prompt: 'PROMPT-THIRD' });
    const { out, calls } = await episode(h, s);
    expect(out.exit).toBe('finished');
    expect(out.note).toMatch(/Claude Code found no conversation 0f0f0f0f-.*started a fresh conversation/);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.prompts.at(-1)).toBe('PROMPT-THIRD');
  });
});
