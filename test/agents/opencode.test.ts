// opencode's own quirks, past the agent contract (contract/suite.ts): its conversations live in a
// SQLite database that a session is looked up in (and moved to the episode's workspace), and a
// workspace's own opencode.json, which the agent can edit, does not reconfigure it.
import { cp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { opencode } from '../../src/agents/opencode.js';
import { CLI_BIN, episode, type Tools, toolsFor } from './contract/harness.js';
import { opencodeHarness as h } from './contract/opencode.js';

let t: Tools;
beforeAll(async () => {
  await h.start();
  t = toolsFor(h.root(), h);
});
afterAll(() => h.stop());

describe('opencode: its database', () => {
  it('a session the database does not hold, a database that is not one: named in the note, and afresh', async () => {
    const ws = await t.repo();
    const first = await t.folder('ctx');
    h.model.answer('First.');
    expect((await episode(h, await t.session(ws, first, { prompt: 'PROMPT-FIRST' }))).out.exit).toBe('finished');
    const { sessionId } = JSON.parse(await readFile(join(first, 'session.json'), 'utf8'));
    expect(sessionId).toMatch(/^ses_/);

    const unknown = await t.folder('ctx');
    await cp(first, unknown, { recursive: true });
    await writeFile(join(unknown, 'session.json'), JSON.stringify({ agent: 'opencode', sessionId: 'ses_notthere' }));
    h.model.answer('Afresh.');
    const a = await episode(h, await t.session(ws, unknown, { prompt: 'PROMPT-AFTER' }));
    expect(a.out.exit, a.out.note).toBe('finished');
    expect(a.out.note).toContain(
      'could not resume the carried opencode conversation (session ses_notthere is not in its database)',
    );
    expect(a.calls[0]?.prompts.join('\n')).not.toContain('PROMPT-FIRST');

    const corrupt = await t.folder('ctx');
    await cp(first, corrupt, { recursive: true });
    for (const f of ['opencode.db', 'opencode.db-wal', 'opencode.db-shm'])
      await writeFile(join(corrupt, 'data', 'opencode', f), 'not a database');
    const b = await episode(h, await t.session(ws, corrupt));
    expect(b.out.exit, b.out.note).toBe('finished');
    expect(b.out.note).toMatch(/could not resume the carried opencode conversation \(its database cannot be read/);
  }, 300_000); // three episodes

  it("the workspace's opencode.json (the agent can write it) does not change the model or the provider", async () => {
    const ws = await t.repo();
    await writeFile(
      join(ws, 'opencode.json'),
      JSON.stringify({
        model: 'elsewhere/expensive',
        provider: { mock: { options: { baseURL: 'http://127.0.0.1:9/v1' } } },
      }),
    );
    h.model.work('value.txt', '3');
    const { out, calls } = await episode(h, await t.session(ws, await t.folder('ctx')));
    expect(out.exit, out.note).toBe('finished');
    expect(calls).toHaveLength(h.workCalls);
    expect(await readFile(join(ws, 'value.txt'), 'utf8')).toBe('3');
  });
});

describe('opencode: its network', () => {
  it('its sandbox allows the catalogue host the installed CLI fetches (a refused one fails every episode)', async () => {
    const pkg = join(CLI_BIN, '..', `opencode-${process.platform}-${process.arch}`, 'bin', 'opencode');
    const binary = (await readFile(pkg)).toString('latin1');
    const host = /OPENCODE_MODELS_URL\|\|"https:\/\/([a-z0-9.-]+)"/.exec(binary)?.[1];
    expect(host, `no default OPENCODE_MODELS_URL in ${pkg}`).toBeDefined();
    expect(opencode.egress.hosts).toContain(host);
  });
});
