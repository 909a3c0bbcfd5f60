// The session core's rules, without any CLI: one policy for an unusable context, running totals
// that never under-report, the final bounds check, the login check before a CLI starts, and
// growing files read safely.
import { appendFile, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentOutcome, AgentSession } from '../../../src/agents/agent.js';
import { defineAgent, GrowingFile, openContext, ownShare, settleBounds } from '../../../src/agents/session.js';

let tmp = '';
beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'ff-session-'));
});
afterEach(() => rm(tmp, { recursive: true, force: true }));

const session = (over: Partial<AgentSession> = {}) =>
  ({ unit: 'tokens', allowance: 1000, env: {}, ...over }) as AgentSession;
const finished = (over: Partial<AgentOutcome> = {}): AgentOutcome => ({
  exit: 'finished',
  reportedSpend: 500,
  seconds: 1,
  usage: { inputTokens: 400, outputTokens: 100, costUsd: 0.01, turns: 3 },
  ...over,
});

describe('openContext', () => {
  it('an empty folder is a fresh conversation; a resumable one is carried', async () => {
    expect(await openContext(tmp, 'X', async () => ({ id: 1 }))).toEqual({ carried: null });
    await writeFile(join(tmp, 'session.json'), '{}');
    expect(await openContext(tmp, 'X', async () => ({ id: 1 }))).toEqual({ carried: { id: 1 } });
  });

  it('an unusable one is cleared, and the episode starts fresh with a note saying why', async () => {
    await mkdir(join(tmp, 'home', 'sessions'), { recursive: true });
    await writeFile(join(tmp, 'session.json'), '{');
    const opened = await openContext(tmp, 'Some CLI', async () => ({ unusable: 'session.json is not JSON' }));
    expect(opened).toEqual({
      carried: null,
      note: 'could not resume the carried Some CLI conversation (session.json is not JSON); started a fresh conversation',
    });
    expect(await readdir(tmp)).toEqual([]);
  });
});

describe('ownShare', () => {
  it('is the difference of running totals, figure by figure', () => {
    expect(ownShare({ input: 100, output: 10 }, { input: 250, output: 25 })).toEqual({
      share: { input: 150, output: 15 },
    });
    expect(ownShare(null, { input: 250, output: 25 })).toEqual({ share: { input: 250, output: 25 } });
  });

  it('a total that went down is charged whole, with a note: never less than can be proven', () => {
    const r = ownShare({ input: 900, output: 10 }, { input: 300, output: 25 });
    expect(r.share).toEqual({ input: 300, output: 15 });
    expect(r.note).toContain('the running totals went down (input)');
  });
});

describe('settleBounds', () => {
  it('leaves an episode within its bounds, and one that did not finish, as they are', () => {
    expect(settleBounds(session(), finished())).toEqual(finished());
    const timeout = finished({ exit: 'timeout', reportedSpend: 5000 });
    expect(settleBounds(session(), timeout)).toBe(timeout);
  });

  it('an overrun in tokens or dollars found when the session ended is an overrun', () => {
    const tokens = settleBounds(session(), finished({ reportedSpend: 1500, note: 'earlier' }));
    expect(tokens.exit).toBe('budget');
    expect(tokens.note).toBe('earlier; an overrun: it spent 1500 of its 1000 tokens (found when the session ended)');
    const usd = settleBounds(session({ unit: 'usd', allowance: 0.005 }), finished({ reportedSpend: 0.01 }));
    expect(usd.exit).toBe('budget');
    // An allowance with float noise (0.6 * 4) reads as the number it is.
    const noisy = settleBounds(session({ allowance: 0.6 * 4 }), finished({ reportedSpend: 3 }));
    expect(noisy.note).toBe('an overrun: it spent 3 of its 2.4 tokens (found when the session ended)');
  });

  it('as is a session that took more turns than agent.max_turns', () => {
    const r = settleBounds(session({ unit: 'evaluations' }), finished(), 2);
    expect(r.exit).toBe('budget');
    expect(r.note).toContain('it took 3 turns, past agent.max_turns (2)');
    expect(settleBounds(session(), finished(), 3).exit).toBe('finished');
  });
});

describe('defineAgent', () => {
  const agent = (missing: string | null) => {
    let ran = 0;
    const a = defineAgent({
      kind: 'x',
      passEnv: [],
      maxTurns: undefined,
      missingLogin: () => missing,
      run: async () => {
        ran++;
        return finished({ reportedSpend: 5000 });
      },
    });
    return { a, ran: () => ran };
  };

  it('a CLI that surely cannot log in is not started: a crash that says how to log in', async () => {
    const { a, ran } = agent('X has no API key and no login: set X_API_KEY');
    expect(await a.run(session())).toEqual({
      exit: 'crash',
      reportedSpend: 0,
      note: 'X has no API key and no login: set X_API_KEY',
      seconds: 0,
    });
    expect(ran()).toBe(0);
  });

  it('otherwise runs, and checks the bounds on what it reports', async () => {
    const { a, ran } = agent(null);
    expect((await a.run(session())).exit).toBe('budget');
    expect(ran()).toBe(1);
  });
});

describe('GrowingFile', () => {
  it('returns the whole lines added since the last read; a line still being written waits', async () => {
    const path = join(tmp, 'log.jsonl');
    await writeFile(path, 'old\n');
    const f = new GrowingFile(path, 4);
    expect(await f.lines()).toEqual([]);
    await appendFile(path, 'one\ntw');
    expect(await f.lines()).toEqual(['one']);
    await appendFile(path, 'o\nthree\n');
    expect(await f.lines()).toEqual(['two', 'three']);
  });

  it('reads nothing through a link or from a special file (the agent can write the folder)', async () => {
    const secret = join(tmp, 'secret');
    await writeFile(secret, 'private\n');
    await symlink(secret, join(tmp, 'link.jsonl'));
    expect(await new GrowingFile(join(tmp, 'link.jsonl')).lines()).toEqual([]);
    expect(await new GrowingFile(tmp).lines()).toEqual([]);
  });

  it('finds a file the CLI names itself once it exists', async () => {
    const path = join(tmp, 'later.jsonl');
    let asked = 0;
    const f = new GrowingFile(async () => {
      asked++;
      return asked > 1 ? path : null;
    });
    expect(await f.lines()).toEqual([]);
    await writeFile(path, 'found\n');
    expect(await f.lines()).toEqual(['found']);
    expect(f.path).toBe(path);
  });
});
