// Copilot CLI's own quirks, past the agent contract (contract/suite.ts): a long prompt goes
// through stdin, the CLI's logs stay out of the context, the
// session record lists its episodes, and a session whose events are damaged is not resumed.
import { existsSync } from 'node:fs';
import { cp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copilotHarness as h } from './contract/copilot.js';
import { episode, type Tools, toolsFor } from './contract/harness.js';

let t: Tools;
beforeAll(async () => {
  await h.start();
  t = toolsFor(h.root(), h);
});
afterAll(() => h.stop());

describe('copilot: its files and its session', () => {
  it('its logs stay out of the context; the session record lists the episodes', async () => {
    const ws = await t.repo();
    const ctx = await t.folder('ctx');
    h.model.work('value.txt', '7');
    const { out } = await episode(h, await t.session(ws, ctx, { episodeId: 'r1.b0' }));
    expect(out.exit, out.note).toBe('finished');
    const saved = JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8'));
    expect(existsSync(join(ctx, 'home', 'session-state', saved.sessionId, 'events.jsonl'))).toBe(true);
    expect(existsSync(join(ctx, 'home', 'logs'))).toBe(false);
    expect(saved.episodes).toEqual(['r1.b0']);

    const next = await t.folder('ctx');
    await cp(ctx, next, { recursive: true });
    h.model.work('more.txt', '8');
    expect((await episode(h, await t.session(ws, next, { episodeId: 'r2.b0' }))).out.exit).toBe('finished');
    expect(JSON.parse(await readFile(join(next, 'session.json'), 'utf8')).episodes).toEqual(['r1.b0', 'r2.b0']);
  });

  it('a prompt too long for one argument goes through stdin', async () => {
    h.model.answer('Read it all.');
    const prompt = `${'x'.repeat(150_000)}\nPROMPT-END-OF-LONG`;
    const { out, calls } = await episode(h, await t.session(await t.repo(), await t.folder('ctx'), { prompt }));
    expect(out.exit, out.note).toBe('finished');
    expect(calls[0]?.prompts.at(-1)).toContain(prompt);
  });

  it('a session whose events.jsonl is damaged: named in the note, and a fresh conversation', async () => {
    const ws = await t.repo();
    const ctx = await t.folder('ctx');
    h.model.answer('First.');
    expect((await episode(h, await t.session(ws, ctx, { prompt: 'PROMPT-FIRST' }))).out.exit).toBe('finished');
    const saved = JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8'));
    await writeFile(join(ctx, 'home', 'session-state', saved.sessionId, 'events.jsonl'), '{garbage\n');
    h.model.answer('Fresh start.');
    const { out, calls } = await episode(h, await t.session(ws, ctx, { prompt: 'PROMPT-AFTER' }));
    expect(out.exit).toBe('finished');
    expect(out.note).toContain('is corrupt: line 1 of its events.jsonl is not JSON');
    expect(calls[0]?.answered).toBe(false);
    expect(calls.map((c) => c.text).join('\n')).not.toContain('PROMPT-FIRST');
  });

  it('a session the home does not hold: named in the note, and a new one recorded', async () => {
    const ctx = await t.folder('ctx');
    const ghost = '11111111-2222-4333-8444-555555555555';
    await writeFile(join(ctx, 'session.json'), JSON.stringify({ agent: 'copilot', sessionId: ghost, totals: null }));
    h.model.answer('Fresh start.');
    const { out } = await episode(h, await t.session(await t.repo(), ctx));
    expect(out.note).toContain(`could not resume the carried Copilot CLI conversation (session ${ghost} is unknown`);
    expect(JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8')).sessionId).not.toBe(ghost);
  });
});
