// The aider adapter. aider (PyPI aider-chat) cannot be installed here, so the adapter runs
// test/fixtures/agents/aider/fake-aider.mjs, built from aider's documented behaviour (sources in
// its header): it accepts exactly the documented options (unknown ones fail like argparse), talks
// to the scripted OpenAI chat-completions mock, applies SEARCH/REPLACE edits, prints aider's usage
// lines and writes and restores the chat history the way aider does. The tests prove the
// adapter's carry logic: the history lives in the context folder, never in the workspace.
// The last block tests the pure output readers on documented output formats.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../../src/agents/agent.js';
import { aiderAdapter, HISTORY_FILE } from '../../src/agents/aider.js';
import { aiderUsage, parseAiderOutput, parseTokenCount } from '../../src/agents/aider-output.js';
import type { Config } from '../../src/core/config.js';
import { confinedSpawn } from './confined.js';
import {
  type ChatRequestBody,
  type ChatScript,
  chatRequests,
  messageText,
  openAIChatServer,
} from './mock/openai-chat.js';
import type { MockModelServer } from './mock/server.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'agents', 'aider');
const FAKE = join(FIXTURES, 'fake-aider.mjs');

let server: MockModelServer;
let baseUrl: string;
let script: ChatScript = () => ({ text: 'nothing scripted' });
let root: string;

beforeAll(async () => {
  server = openAIChatServer((body, i, srv) => script(body, i, srv));
  baseUrl = await server.start();
  root = await mkdtemp(join(tmpdir(), 'ff-aider-'));
});

afterAll(async () => {
  await server?.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

/** A reply in aider's "diff" edit format that writes value.txt, and asks to run the grader. */
function edit(value: string, from = ''): string {
  return [
    `I will set value.txt to ${value}.`,
    '',
    'value.txt',
    '```',
    '<<<<<<< SEARCH',
    ...(from ? [from] : []),
    '=======',
    value,
    '>>>>>>> REPLACE',
    '```',
    '',
    'Then check the score:',
    '',
    '```bash',
    '"$FORKFLUSH_GRADE"',
    '```',
  ].join('\n');
}

let dirs = 0;
async function folder(name: string): Promise<string> {
  const dir = join(root, `${name}${++dirs}`);
  await mkdir(dir, { recursive: true });
  return dir;
}

async function repo(): Promise<string> {
  const dir = await folder('ws');
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, stdio: 'ignore' });
  git('init', '-q');
  await writeFile(join(dir, 'README.md'), 'test repo\n');
  git('add', '-A');
  git('commit', '-qm', 'init');
  return dir;
}

const status = (dir: string) =>
  // The workspace is the sandbox's user's (nobody's, when the tests run as root).
  execFileSync('git', ['-c', 'safe.directory=*', 'status', '--porcelain', '--untracked-files=all'], {
    cwd: dir,
    encoding: 'utf8',
  }).trim();

async function session(over: Partial<AgentSession> & { workdir: string; contextDir: string }): Promise<AgentSession> {
  const scratch = await folder('scratch');
  const grade = join(scratch, 'grade');
  // Records that it ran: with --yes-always aider never runs the model's shell commands.
  await writeFile(grade, `#!/bin/sh\necho ran >> ${join(scratch, 'graded')}\ncat value.txt\n`, { mode: 0o755 });
  const prompt = over.prompt ?? 'Make value.txt hold 7.';
  await writeFile(join(scratch, 'prompt.md'), prompt);
  return {
    prompt,
    promptFile: join(scratch, 'prompt.md'),
    usageFile: join(scratch, 'usage.json'),
    logFile: join(scratch, 'agent.log'),
    gradeCommand: grade,
    allowance: 1_000_000,
    unit: 'tokens',
    seed: 1,
    episodeId: 'r0.b0',
    deadlineMs: 30_000,
    deadlineIsBudget: false,
    env: {
      PATH: process.env.PATH,
      // A home of the session's own, as the worker gives it (the real one is hidden in the sandbox).
      HOME: await folder('home'),
      OPENAI_API_BASE: `${baseUrl}/v1`,
      OPENAI_API_KEY: 'dummy-key',
      GITHUB_TOKEN: 'repo-token-must-not-leak',
    },
    signal: new AbortController().signal,
    ...confinedSpawn(root),
    ...over,
  };
}

function agent(over: Partial<Config['agent']> = {}): Config['agent'] {
  return {
    kind: 'command',
    command: FAKE,
    model: 'openai/mock-model',
    args: [],
    env: [],
    timeout: 60,
    ...over,
  } as Config['agent'];
}

const mark = () => chatRequests(server).length;
const bodies = (from: number): ChatRequestBody[] =>
  chatRequests(server)
    .slice(from)
    .map((r) => r.body);
const allText = (b: ChatRequestBody | undefined) => (b?.messages ?? []).map(messageText).join('\n');

async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const p = join(e.parentPath, e.name);
    out[p.slice(dir.length)] = createHash('sha256')
      .update(await readFile(p))
      .digest('hex');
  }
  return out;
}

describe('aider adapter (fake aider built from aider docs and source)', () => {
  it('fresh episode: no history, the edit is applied, the history stays in the context folder', async () => {
    const workdir = await repo();
    const contextDir = await folder('ctx');
    script = () => ({ text: edit('7'), usage: { prompt_tokens: 1500, completion_tokens: 120 } });
    const from = mark();
    const s = await session({ workdir, contextDir, prompt: 'TASK-FRESH' });
    const out = await aiderAdapter(agent()).run(s);

    expect(out.exit).toBe('finished');
    const b = bodies(from);
    expect(b.length).toBe(1);
    expect(b[0]?.model).toBe('mock-model');
    expect(b[0]?.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(messageText(b[0]?.messages[1] ?? { role: 'user' })).toBe('TASK-FRESH');
    expect(await readFile(join(workdir, 'value.txt'), 'utf8')).toBe('7\n');
    // Only the agent's edit in the workspace: no history, no input history, no repo-map cache
    // (kept out by the repository's exclude file), no .gitignore change.
    expect(status(workdir)).toBe('?? value.txt');
    expect(existsSync(join(workdir, '.aider.tags.cache.v4'))).toBe(true);
    const history = await readFile(join(contextDir, HISTORY_FILE), 'utf8');
    expect(history).toMatch(/^\n# aider chat started at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n/);
    expect(history).toContain('#### TASK-FRESH  \n');
    expect(history).toContain('I will set value.txt to 7.');
    expect(history).toContain('> Tokens: 1.5k sent, 120 received.  \n');
    // --yes-always never runs the model's shell commands: the grader did not run.
    expect(history).toContain("> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: n  \n");
    expect(existsSync(join(s.usageFile, '..', 'graded'))).toBe(false);
    // mock-model has no price in aider: forkflush prices the tokens (dearest known model).
    expect(out.usage).toMatchObject({ inputTokens: 1500, outputTokens: 120, turns: 1 });
    expect(out.usage?.pricedFrom).toContain('mock-model is not in the table');
    expect(out.reportedSpend).toBe(1620);
    expect(JSON.parse(await readFile(join(contextDir, 'session.json'), 'utf8')).episodes).toEqual(['r0.b0']);
  });

  it("two carried episodes: the second restores the first's conversation; aider's own cost is used", async () => {
    const workdir = await repo();
    const ctx1 = await folder('ctx');
    script = () => ({ text: edit('3'), usage: { prompt_tokens: 800, completion_tokens: 40 } });
    const a = await aiderAdapter(agent({ model: 'openai/gpt-4o' })).run(
      await session({ workdir, contextDir: ctx1, prompt: 'TASK-ONE', unit: 'usd', episodeId: 'r1.b0' }),
    );
    expect(a.exit).toBe('finished');
    // aider priced gpt-4o itself: 800 × $2.5/M + 40 × $10/M = $0.0024, printed "Cost: $0.0024 ...".
    expect(a.usage).toEqual({ inputTokens: 800, outputTokens: 40, costUsd: 0.0024, turns: 1 });
    expect(a.reportedSpend).toBe(0.0024);

    const ctx2 = await folder('ctx');
    await cp(ctx1, ctx2, { recursive: true });
    script = () => ({ text: edit('5', '3'), usage: { prompt_tokens: 900, completion_tokens: 60 } });
    const from = mark();
    const b = await aiderAdapter(agent({ model: 'openai/gpt-4o' })).run(
      await session({ workdir, contextDir: ctx2, prompt: 'CONTINUE-TWO', unit: 'usd', episodeId: 'r2.b0' }),
    );
    expect(b.exit).toBe('finished');
    expect(b.note).toBeUndefined();
    const req = bodies(from)[0];
    expect(req?.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(messageText(req?.messages[1] ?? { role: 'user' }).trim()).toBe('TASK-ONE');
    expect(messageText(req?.messages[2] ?? { role: 'user' })).toContain('I will set value.txt to 3.');
    expect(messageText(req?.messages[3] ?? { role: 'user' })).toBe('CONTINUE-TWO');
    // aider's usage lines are tool output: not restored into the conversation.
    expect(allText(req)).not.toContain('Tokens:');
    expect(await readFile(join(workdir, 'value.txt'), 'utf8')).toBe('5\n');
    expect(b.usage).toEqual({ inputTokens: 900, outputTokens: 60, costUsd: 0.0029, turns: 1 });
    expect(JSON.parse(await readFile(join(ctx2, 'session.json'), 'utf8')).episodes).toEqual(['r1.b0', 'r2.b0']);
  });

  it('a forked branch continues a copy in another worktree; the original context is unchanged', async () => {
    const trunk = await repo();
    const ctx = await folder('ctx');
    script = () => ({ text: edit('1') });
    expect(
      (await aiderAdapter(agent()).run(await session({ workdir: trunk, contextDir: ctx, prompt: 'TASK-TRUNK' }))).exit,
    ).toBe('finished');
    const before = await snapshot(ctx);

    const branch = await repo();
    const fork = await folder('fork');
    await cp(ctx, fork, { recursive: true });
    script = () => ({ text: edit('9') });
    const from = mark();
    const out = await aiderAdapter(agent()).run(
      await session({ workdir: branch, contextDir: fork, prompt: 'BRANCH-DIRECTIVE' }),
    );
    expect(out.exit).toBe('finished');
    const text = allText(bodies(from)[0]);
    expect(text).toContain('TASK-TRUNK');
    expect(text).toContain('BRANCH-DIRECTIVE');
    expect(await readFile(join(branch, 'value.txt'), 'utf8')).toBe('9\n');
    expect(await readFile(join(trunk, 'value.txt'), 'utf8')).toBe('1\n');
    expect(status(branch)).toBe('?? value.txt');
    expect(await snapshot(ctx)).toEqual(before);
  });

  it('stops past the token allowance and past agent.max_turns: exit budget', async () => {
    const workdir = await repo();
    // A SEARCH block that matches nothing makes aider reflect (call again); the next call hangs.
    const miss = { text: edit('2', 'not in the file'), usage: { prompt_tokens: 1500, completion_tokens: 100 } };
    let start = mark();
    script = (_b, i) => (i - start >= 1 ? { hang: true } : miss);
    const out = await aiderAdapter(agent()).run(
      await session({ workdir, contextDir: await folder('ctx'), allowance: 1000, unit: 'tokens' }),
    );
    server.hang = false;
    expect(out.exit).toBe('budget');
    expect(out.note).toContain('tokens passed the allowance of 1000');
    expect(out.reportedSpend).toBe(1600);

    start = mark();
    script = (_b, i) => (i - start >= 2 ? { hang: true } : miss);
    const turns = await aiderAdapter(agent({ max_turns: 1 })).run(
      await session({ workdir, contextDir: await folder('ctx') }),
    );
    server.hang = false;
    expect(turns.exit).toBe('budget');
    expect(turns.note).toContain('passed agent.max_turns (1)');
    expect(turns.usage?.turns).toBe(2);
  });

  it('a hung model is killed at the deadline: exit timeout (budget when time is the budget), nothing left', async () => {
    const workdir = await repo();
    const contextDir = await folder('ctx');
    script = () => ({ hang: true });
    const started = Date.now();
    const out = await aiderAdapter(agent()).run(await session({ workdir, contextDir, deadlineMs: 2000 }));
    server.hang = false;
    const elapsed = (Date.now() - started) / 1000;
    expect(out.exit).toBe('timeout');
    expect(elapsed).toBeGreaterThanOrEqual(2);
    expect(elapsed).toBeLessThan(6);
    expect(out.reportedSpend).toBe(0);
    const left = execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes(contextDir));
    expect(left).toEqual([]);

    script = () => ({ hang: true });
    const timed = await aiderAdapter(agent()).run(
      await session({
        workdir,
        contextDir: await folder('ctx'),
        deadlineMs: 1500,
        deadlineIsBudget: true,
        unit: 'minutes',
      }),
    );
    server.hang = false;
    expect(timed.exit).toBe('budget');
    expect(timed.reportedSpend).toBeNull();
  });

  it('an unknown or unreadable carried context: a clear note and a fresh conversation', async () => {
    const workdir = await repo();
    script = () => ({ text: 'Nothing to change.' });

    const unknown = await folder('ctx');
    await writeFile(join(unknown, 'session.json'), '{"agent":"copilot","sessionId":"x"}');
    let from = mark();
    const a = await aiderAdapter(agent()).run(await session({ workdir, contextDir: unknown, prompt: 'AFTER-UNKNOWN' }));
    expect(a.exit).toBe('finished');
    expect(a.note).toBe(
      `could not resume the carried aider conversation (${HISTORY_FILE} is missing); started a fresh conversation`,
    );
    expect(bodies(from)[0]?.messages.map((m) => m.role)).toEqual(['system', 'user']);

    const corrupt = await folder('ctx');
    await writeFile(join(corrupt, HISTORY_FILE), Buffer.from([0x23, 0x23, 0x23, 0x23, 0x20, 0xff, 0xfe, 0x0a]));
    from = mark();
    const b = await aiderAdapter(agent()).run(await session({ workdir, contextDir: corrupt, prompt: 'AFTER-CORRUPT' }));
    expect(b.note).toContain(`${HISTORY_FILE} is not UTF-8 text`);
    expect(bodies(from)[0]?.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(await readFile(join(corrupt, HISTORY_FILE), 'utf8')).toContain('#### AFTER-CORRUPT');
  });

  it('a failed model call is a crash with its error, although aider exits 0', async () => {
    const workdir = await repo();
    script = () => ({ status: 401 });
    const out = await aiderAdapter(agent()).run(await session({ workdir, contextDir: await folder('ctx') }));
    expect(out.exit).toBe('crash');
    expect(out.note).toMatch(
      /^aider made no successful model call \(it exits 0 all the same\): litellm\.AuthenticationError: AuthenticationError: OpenAIException - /,
    );
    expect(out.reportedSpend).toBe(0);
  });
});

describe('aider output readers (documented formats)', () => {
  const documented = () => readFile(join(FIXTURES, 'documented-output.txt'), 'utf8');

  it('reads token counts as format_tokens prints them', () => {
    expect(parseTokenCount('997')).toBe(997);
    expect(parseTokenCount('1.6k')).toBe(1600);
    expect(parseTokenCount('12k')).toBe(12000);
    expect(parseTokenCount('2,841')).toBe(2841);
  });

  it('reads every usage line, the model, costs and errors', async () => {
    const out = parseAiderOutput(await documented());
    expect(out.model).toBe('anthropic/claude-3-7-sonnet-20250219');
    expect(out.calls).toEqual([
      { sent: 2400, received: 193, cacheWrite: 0, cacheHit: 0, messageCost: 0.01, sessionCost: 0.01 },
      { sent: 2600, received: 211, cacheWrite: 0, cacheHit: 0, messageCost: 0.01, sessionCost: 0.02 },
      { sent: 14000, received: 550, cacheWrite: 2100, cacheHit: 9800, messageCost: 0.0086, sessionCost: 0.0286 },
      { sent: 2841, received: 381, cacheWrite: 0, cacheHit: 0, messageCost: 0, sessionCost: 0.0286 },
    ]);
    expect(out.errors).toEqual([
      {
        message:
          'litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current quota, please check your plan and billing details.',
        afterCalls: 4,
      },
    ]);
    expect(aiderUsage(out)).toEqual({ inputTokens: 21841, outputTokens: 1335, costUsd: 0.0286, turns: 4 });
  });

  it('prices tokens itself when aider printed no cost, and reads colour codes away', () => {
    const out = parseAiderOutput(
      '\x1b[0mModel: openai/gpt-5-mini with diff edit format\nTokens: 4.2k sent, 310 received.\n',
    );
    const usage = aiderUsage(out);
    expect(usage).toMatchObject({ inputTokens: 4200, outputTokens: 310, turns: 1 });
    expect(usage.costUsd).toBeCloseTo((4200 * 0.25 + 310 * 2) / 1e6, 12);
    expect(usage.pricedFrom).toContain('gpt-5-mini');
    expect(aiderUsage(parseAiderOutput('nothing'))).toEqual({ inputTokens: 0, outputTokens: 0, costUsd: 0, turns: 0 });
  });

  it("reads the fake's own recorded run like aider's", async () => {
    const out = parseAiderOutput(await readFile(join(FIXTURES, 'fake-run.log'), 'utf8'));
    expect(out.model).toBe('openai/gpt-4o');
    expect(out.calls.length).toBe(2);
    expect(aiderUsage(out)).toMatchObject({ inputTokens: 3000, outputTokens: 200, turns: 2 });
  });
});
