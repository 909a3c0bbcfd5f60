// aider's own quirks, past the agent contract (contract/suite.ts), with the fake aider of
// test/fixtures/agents/aider/fake-aider.mjs (aider cannot be installed here; its header lists the
// aider sources it imitates): the chat history lives in the context folder, never in the
// workspace; the model's shell commands are never run; aider's own cost is used where it prints one.
import { existsSync } from 'node:fs';
import { cp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HISTORY_FILE } from '../../src/agents/aider.js';
import { aiderEdit, aiderHarness as h } from './contract/aider.js';
import { episode, type Tools, toolsFor } from './contract/harness.js';

let t: Tools;
beforeAll(async () => {
  await h.start();
  t = toolsFor(h.root(), h);
});
afterAll(() => h.stop());

describe('aider: its history and its costs', () => {
  it('the history is kept in the context folder, in aider’s format; the shell command is declined', async () => {
    const ws = await t.repo();
    const ctx = await t.folder('ctx');
    h.model.answer(`${aiderEdit('value.txt', '7')}\n\nThen check the score:\n\n\`\`\`bash\n"$FORKFLUSH_GRADE"\n\`\`\``);
    const { out } = await episode(h, await t.session(ws, ctx, { prompt: 'PROMPT-FRESH', episodeId: 'r0.b0' }));
    expect(out.exit, out.note).toBe('finished');
    expect(await readFile(join(ws, 'value.txt'), 'utf8')).toBe('7\n');
    // The repo-map cache is there, kept out of the commit by the repository's exclude file.
    expect(existsSync(join(ws, '.aider.tags.cache.v4'))).toBe(true);
    const history = await readFile(join(ctx, HISTORY_FILE), 'utf8');
    expect(history).toMatch(/^\n# aider chat started at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n/);
    expect(history).toContain('#### PROMPT-FRESH  \n');
    expect(history).toContain('I will set value.txt to 7.');
    expect(history).toContain('> Tokens: 1.0k sent, 100 received.  \n');
    // --yes-always never runs the model's shell commands.
    expect(history).toContain("> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: n  \n");
    expect(JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8')).episodes).toEqual(['r0.b0']);
  });

  it("aider's own cost where it prices the model; its usage lines are not restored into the conversation", async () => {
    const gpt4o = { model: 'openai/gpt-4o' };
    const ws = await t.repo();
    const ctx = await t.folder('ctx');
    h.model.work('value.txt', '3');
    const a = await episode(h, await t.session(ws, ctx, { prompt: 'PROMPT-ONE', unit: 'usd' }), gpt4o);
    // The fake prices gpt-4o as litellm does: 1000 × $2.5/M + 100 × $10/M, printed "Cost: $0.0035 …".
    expect(a.out.usage).toEqual({ inputTokens: 1000, outputTokens: 100, costUsd: 0.0035, turns: 1 });
    expect(a.out.reportedSpend).toBe(0.0035);

    const next = await t.folder('ctx');
    await cp(ctx, next, { recursive: true });
    h.model.work('other.txt', '5');
    const b = await episode(h, await t.session(ws, next, { prompt: 'PROMPT-TWO', unit: 'usd' }), gpt4o);
    expect(b.out.exit, b.out.note).toBe('finished');
    expect(b.calls[0]?.text).not.toContain('Tokens:');
    expect(b.out.usage).toEqual({ inputTokens: 1000, outputTokens: 100, costUsd: 0.0035, turns: 1 });
  });
});
