// The session runner's rules, without any CLI: one policy for an unusable context, running totals
// that never under-report, the final bounds check, the login check before a CLI starts, and
// growing files read safely.
import { appendFile, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentOutcome, AgentSession } from '../../../src/agents/agent.js';

import { adapterOf, loginMissing, openContext } from '../../../src/agents/runner.js';
import { defineSpec } from '../../../src/agents/spec.js';
import type { Config } from '../../../src/core/config.js';
import {
  addUse,
  believableFigures,
  type ModelUse,
  ownShare,
  settleBounds,
  shareOf,
  spentSince,
  type Tally,
  unsureFigures,
  usageOf,
} from '../../../src/core/usage.js';
import { followLog, GrowingFile } from '../../../src/io/agent-reads.js';

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

describe('believableFigures', () => {
  it('keeps a report a record can hold, and drops a spend or usage that cannot be, with a note', () => {
    expect(believableFigures(finished())).toEqual(finished());
    expect(believableFigures(finished({ reportedSpend: 1e15 }))).toEqual(finished({ reportedSpend: 1e15 }));
    for (const bad of [1e303, Number.POSITIVE_INFINITY, Number.NaN, -1]) {
      const r = believableFigures(finished({ reportedSpend: bad, note: 'earlier' }));
      expect(r.reportedSpend, String(bad)).toBeNull();
      expect(r.usage).toEqual(finished().usage);
      expect(r.note).toBe(`earlier; the agent reported a spend of ${bad}, which cannot be: not taken`);
    }
    const usage = { inputTokens: Number.POSITIVE_INFINITY, outputTokens: 1, costUsd: -0.5, turns: 1.5 };
    const r = believableFigures(finished({ usage }));
    expect(r.usage).toBeUndefined();
    expect(r.reportedSpend).toBe(500);
    expect(r.note).toBe(
      'the agent reported usage that cannot be (Infinity tokens in, 1 out, $-0.5, 1.5 turns): not taken',
    );
  });
});

describe('unsureFigures', () => {
  const use = (u: Partial<ModelUse>): Tally =>
    addUse({}, 'm', { input: 1200, output: 80, calls: 1, costUsd: null, ...u });
  it('takes counts that can be, and says why not for one below zero, not a number, or a model that answered with no input', () => {
    expect(unsureFigures(use({}), true)).toBeNull();
    expect(unsureFigures({}, false)).toBeNull();
    expect(unsureFigures(use({ output: -4000 }), true)).toBe(
      'the usage reported for m cannot be counted (output: -4000)',
    );
    expect(unsureFigures(use({ input: Number.NaN }), true)).toBe(
      'the usage reported for m cannot be counted (input: NaN)',
    );
    expect(unsureFigures(use({ costUsd: -0.06 }), true)).toBe(
      'the usage reported for m cannot be counted (costUsd: -0.06)',
    );
    expect(unsureFigures(use({ input: 0, output: 0 }), true)).toBe(
      'the model answered, but no input tokens were reported for it',
    );
    // A CLI that ended without an answer (its key refused) spent nothing that can be counted.
    expect(unsureFigures(use({ input: 0, output: 0 }), false)).toBeNull();
  });
});

describe('adapterOf', () => {
  const agent = () => {
    let ran = 0;
    const spec = defineSpec({
      kind: 'x',
      name: 'X',
      passEnv: [],
      egress: { hosts: [], routes: [], notProxied: 'nothing: it holds no key' },
      login: { keys: ['X_API_KEY'], how: 'set X_API_KEY' },
      // Every spec says where its final message is (spec.ts); this one's runs print none.
      finalMessage: () => null,
      start: async () => {
        ran++;
        return { executable: '/bin/true', args: [] };
      },
    });
    const a = adapterOf(spec, { kind: 'command', args: [], env: [], timeout: 60 } as unknown as Config['agent']);
    return { a, ran: () => ran };
  };

  it('a CLI that surely cannot log in is not started: a crash that says how to log in', async () => {
    const { a, ran } = agent();
    expect(await a.run(session())).toEqual({
      exit: 'crash',
      reportedSpend: 0,
      note: 'X has no API key and no login: set X_API_KEY',
      seconds: 0,
      failure: { kind: 'auth', quote: 'X has no API key and no login: set X_API_KEY' },
    });
    expect(ran()).toBe(0);
  });
});

describe("a spec's login", () => {
  const spec = {
    name: 'X',
    login: { keys: ['X_API_KEY', 'X_CLOUD=true'], other: ['X_BASE_URL'], args: /^--provider/, how: 'set X_API_KEY' },
  };
  const agent = (args: string[] = []) => ({ args }) as unknown as Config['agent'];

  it('any key, other variable or argument that names a login is one; else the message says how', () => {
    expect(loginMissing(spec, { X_API_KEY: 'k' }, agent())).toBeNull();
    expect(loginMissing(spec, { X_BASE_URL: 'http://gateway' }, agent())).toBeNull();
    expect(loginMissing(spec, { X_CLOUD: 'true' }, agent())).toBeNull();
    expect(loginMissing(spec, {}, agent(['--provider=mine']))).toBeNull();
    expect(loginMissing(spec, { X_CLOUD: 'false' }, agent())).toBe('X has no API key and no login: set X_API_KEY');
    expect(loginMissing({ name: 'Y' }, {}, agent())).toBeNull();
  });
});

describe('shareOf and usageOf', () => {
  it("spentSince is the share of running totals, its note after the spec's own", () => {
    const use = (input: number) => ({ input, cached: 0, written: 0, output: 1, calls: 1, costUsd: null });
    expect(spentSince({ m: use(10) }, { m: use(25) }, { turns: 2 })).toEqual({
      turns: 2,
      tally: { m: { ...use(15), output: 0, calls: 0 } },
      notes: [],
    });
    const down = spentSince({ m: use(10) }, { m: use(5) }, { notes: ['stopped'] });
    expect(down.tally.m?.input).toBe(5);
    expect(down.notes?.[0]).toBe('stopped');
    expect(down.notes?.[1]).toContain('counted afresh');
  });

  const use = (input: number, output: number, costUsd: number | null) => ({
    input,
    cached: 0,
    written: 0,
    output,
    calls: 1,
    costUsd,
  });

  it("a model's share of running totals, its cost the CLI's where it knows it, else priced", () => {
    const before = { 'claude-sonnet-4': use(100, 10, 0.5), mystery: use(10, 1, null) };
    const after = { 'claude-sonnet-4': use(300, 30, 1.5), mystery: use(1010, 101, null) };
    const { share, note } = shareOf(before, after);
    expect(note).toBeUndefined();
    expect(share['claude-sonnet-4']).toEqual({ ...use(200, 20, 1), calls: 0 });
    const usage = usageOf({ tally: share });
    expect(usage.inputTokens).toBe(1200);
    expect(usage.costUsd).toBeGreaterThan(1);
    expect(usage.pricedFrom).toContain('mystery is not in the table');
  });

  it('a total that went down is charged whole, with a note', () => {
    const r = shareOf({ m: use(900, 10, null) }, { m: use(300, 25, null) });
    expect(r.share.m).toMatchObject({ input: 300, output: 15 });
    expect(r.note).toContain('the running totals went down (input)');
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

  it('followLog hands on what the log gets from now on, and its unfinished last line once final', async () => {
    const path = join(tmp, 'agent.log');
    await writeFile(path, 'an earlier episode\n');
    const seen: string[] = [];
    const read = await followLog(path, (line) => seen.push(line));
    await appendFile(path, 'Tokens: 1 sent\nCost: $0');
    await read();
    expect(seen).toEqual(['Tokens: 1 sent']);
    await read(true);
    expect(seen).toEqual(['Tokens: 1 sent', 'Cost: $0']);
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
