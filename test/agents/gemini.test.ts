// Gemini CLI's own quirks, past the agent contract (contract/suite.ts): one session id for a whole
// lineage, its turn limit (exit 53) with usage read from the session file, a hung call whose
// prompt was already saved, and a session id its home does not hold.
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { geminiHarness as h } from './contract/gemini.js';
import { episode, type Tools, toolsFor } from './contract/harness.js';

let t: Tools;
beforeAll(async () => {
  await h.start();
  t = toolsFor(h.root(), h);
});
afterAll(() => h.stop());

const sessionId = async (ctx: string) => JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8')).sessionId;

describe('gemini: its session', () => {
  it('a lineage keeps one session id: fresh, carried twice, each charged its own calls', async () => {
    const ws = await t.repo();
    const contexts = [await t.folder('ctx')];
    for (const [i, prompt] of ['PROMPT-ONE', 'PROMPT-TWO', 'PROMPT-THREE'].entries()) {
      if (i > 0) {
        contexts.push(await t.folder('ctx'));
        await cp(contexts[i - 1] as string, contexts[i] as string, { recursive: true });
      }
      h.model.work(`episode-${i}.txt`, String(i));
      const s = await t.session(ws, contexts[i] as string, { prompt });
      const { out, calls } = await episode(h, s);
      expect(out.exit, out.note).toBe('finished');
      expect(calls[0]?.prompts).toEqual(['PROMPT-ONE', 'PROMPT-TWO', 'PROMPT-THREE'].slice(0, i + 1));
      expect(out.usage).toMatchObject({ inputTokens: h.workCalls * h.perCall.input, turns: h.workCalls });
      expect(await readFile(s.logFile, 'utf8')).toContain(await sessionId(contexts[i] as string));
    }
    const ids = await Promise.all(contexts.map(sessionId));
    expect(new Set(ids).size).toBe(1);
  });

  it('its turn limit (exit 53) is a budget stop, with the usage from the session file', async () => {
    h.model.work('turns.txt', '1');
    const ws = await t.repo();
    const { out, calls } = await episode(h, await t.session(ws, await t.folder('ctx')), { max_turns: 1 });
    expect(out.exit, out.note).toBe('budget');
    expect(out.note).toContain('agent.max_turns (1)');
    expect(calls).toHaveLength(1);
    expect(out.usage).toMatchObject({ inputTokens: h.perCall.input, outputTokens: h.perCall.output, turns: 1 });
    expect(await readFile(join(ws, 'turns.txt'), 'utf8')).toBe('1');
  });

  it('a hung call: the prompt was saved before it, nothing was answered, nothing is charged', async () => {
    h.model.hang();
    const { out } = await episode(h, await t.session(await t.repo(), await t.folder('ctx'), { deadlineMs: 8000 }));
    expect(out.exit).toBe('timeout');
    expect(out.usage).toMatchObject({ inputTokens: 0, outputTokens: 0, turns: 0 });
    expect(out.reportedSpend).toBe(0);
  });

  it('a session id its home does not hold: named in the note, and a new session', async () => {
    const ctx = await t.folder('ctx');
    const ghost = '0b0e2a8c-5d1c-4c43-9a55-3f1e7d1b9c11';
    await mkdir(join(ctx, 'home', '.gemini'), { recursive: true });
    await writeFile(join(ctx, 'session.json'), JSON.stringify({ sessionId: ghost }));
    h.model.answer('Fresh.');
    const { out, calls } = await episode(h, await t.session(await t.repo(), ctx, { prompt: 'PROMPT-GO' }));
    expect(out.exit).toBe('finished');
    expect(out.note).toContain(
      `could not resume the carried Gemini CLI conversation (session ${ghost} is not in the context folder`,
    );
    expect(calls[0]?.prompts).toEqual(['PROMPT-GO']);
    expect(await sessionId(ctx)).not.toBe(ghost);
  });
});
