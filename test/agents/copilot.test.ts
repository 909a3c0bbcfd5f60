// The copilot adapter against the real GitHub Copilot CLI (scripts/install-agent-clis.mjs pins it)
// in bring-your-own-key mode, pointed at a scripted OpenAI chat-completions mock on 127.0.0.1.
// The "model" creates value.txt with the `create` tool, runs "$FORKFLUSH_GRADE" with the `bash`
// tool, then answers in text; each test checks what the mock received, the files and the usage.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../../src/agents/agent.js';
import { copilotAdapter } from '../../src/agents/copilot.js';
import type { Config } from '../../src/core/config.js';
import { confinedSpawn } from './confined.js';
import {
  type ChatReply,
  type ChatRequestBody,
  type ChatScript,
  chatRequests,
  messageText,
  openAIChatServer,
  toolRoundsSinceUser,
} from './mock/openai-chat.js';
import type { MockModelServer } from './mock/server.js';

const BIN = join(import.meta.dirname, '..', '..', '.cache', 'agent-clis', 'node_modules', '.bin', 'copilot');
const MODEL = 'gpt-5-mini';
const USAGE = { prompt_tokens: 1000, completion_tokens: 100 };

let server: MockModelServer;
let baseUrl: string;
let script: ChatScript = () => ({ text: 'nothing scripted' });
let root: string;

beforeAll(async () => {
  if (!existsSync(BIN)) throw new Error(`no Copilot CLI at ${BIN}: run node scripts/install-agent-clis.mjs`);
  server = openAIChatServer((body, i, srv) => script(body, i, srv));
  baseUrl = await server.start();
  root = await mkdtemp(join(tmpdir(), 'ff-copilot-'));
});

afterAll(async () => {
  await server?.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

/**
 * The scripted work: write value.txt (`create` it, or `edit` it from the value it had), run the
 * grader, then say done.
 */
function work(value: string, usage = USAGE, from?: string): ChatScript {
  return (body) => {
    const round = toolRoundsSinceUser(body);
    if (round === 0)
      return {
        toolCalls: [
          from === undefined
            ? { name: 'create', arguments: { path: 'value.txt', file_text: value } }
            : { name: 'edit', arguments: { path: 'value.txt', old_str: from, new_str: value } },
        ],
        usage,
      };
    if (round === 1)
      return {
        toolCalls: [{ name: 'bash', arguments: { command: '"$FORKFLUSH_GRADE"', description: 'Run the grader' } }],
        usage,
      };
    return { text: `Done: value.txt holds ${value}.`, usage };
  };
}

let dirs = 0;
async function repo(): Promise<string> {
  const dir = join(root, `ws${++dirs}`);
  await mkdir(dir);
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, stdio: 'ignore' });
  git('init', '-q');
  await writeFile(join(dir, 'README.md'), 'test repo\n');
  git('add', '-A');
  git('commit', '-qm', 'init');
  return dir;
}

async function folder(name: string): Promise<string> {
  const dir = join(root, `${name}${++dirs}`);
  await mkdir(dir, { recursive: true });
  return dir;
}

async function session(over: Partial<AgentSession> & { workdir: string; contextDir: string }): Promise<AgentSession> {
  const scratch = await folder('scratch');
  const grade = join(scratch, 'grade');
  // The grader prints where it ran, whether a forge token leaked, and the score.
  await writeFile(
    grade,
    '#!/bin/sh\necho "cwd=$(pwd) token=[$GITHUB_TOKEN$GH_TOKEN]"\ncat value.txt 2>/dev/null || echo 0\n',
    { mode: 0o755 },
  );
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
    deadlineMs: 60_000,
    deadlineIsBudget: false,
    env: {
      PATH: process.env.PATH,
      // A home of the session's own, as the worker gives it (the real one is hidden in the sandbox).
      HOME: await folder('home'),
      COPILOT_PROVIDER_BASE_URL: `${baseUrl}/v1`,
      COPILOT_PROVIDER_API_KEY: 'dummy-key',
      COPILOT_MODEL: MODEL,
      // No GitHub login, telemetry or update checks: this machine has no network.
      COPILOT_OFFLINE: 'true',
      // The adapter must remove these (the worker already does; this checks the adapter too).
      GITHUB_TOKEN: 'repo-token-must-not-leak',
      GH_TOKEN: 'gh-token-must-not-leak',
    },
    signal: new AbortController().signal,
    ...confinedSpawn(root),
    ...over,
  };
}

function agent(over: Partial<Config['agent']> = {}): Config['agent'] {
  return { kind: 'command', command: BIN, args: [], env: [], timeout: 120, ...over } as Config['agent'];
}

/** The chat requests received since `from`, and all their message texts joined. */
function received(from: number): { bodies: ChatRequestBody[]; text: (i: number) => string } {
  const bodies = chatRequests(server)
    .slice(from)
    .map((r) => r.body);
  return { bodies, text: (i) => (bodies[i]?.messages ?? []).map(messageText).join('\n') };
}

const mark = () => chatRequests(server).length;

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

describe('copilot adapter with the real Copilot CLI', () => {
  it('fresh episode: no history, the file is written, the grader runs, usage is parsed', async () => {
    const workdir = await repo();
    const contextDir = await folder('ctx');
    script = work('7');
    const from = mark();
    const out = await copilotAdapter(agent()).run(await session({ workdir, contextDir, prompt: 'TASK-FRESH' }));

    expect(out.note).toBeUndefined();
    expect(out.exit).toBe('finished');
    expect(await readFile(join(workdir, 'value.txt'), 'utf8')).toBe('7');
    // Nothing of the CLI's own in the workspace, which forkflush commits whole.
    expect(
      // The workspace is the sandbox's user's (nobody's, when the tests run as root).
      execFileSync('git', ['-c', 'safe.directory=*', 'status', '--porcelain', '--untracked-files=all'], {
        cwd: workdir,
        encoding: 'utf8',
      }).trim(),
    ).toBe('?? value.txt');
    const { bodies, text } = received(from);
    expect(bodies.length).toBe(3);
    // Only the system prompt and this prompt: nothing from any earlier conversation.
    expect(bodies[0]?.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(text(0)).toContain('TASK-FRESH');
    // The grader ran in the workspace, and the forge tokens never reached the agent's shell.
    expect(text(2)).toContain(`cwd=${workdir} token=[]`);
    expect(text(2)).toMatch(/\n7\n/);
    expect(out.usage).toMatchObject({ inputTokens: 3000, outputTokens: 300, turns: 3 });
    expect(out.usage?.pricedFrom).toContain('gpt-5-mini');
    expect(out.usage?.costUsd).toBeCloseTo((3000 * 0.25 + 300 * 2) / 1e6, 9);
    expect(out.reportedSpend).toBe(3300);
    const saved = JSON.parse(await readFile(join(contextDir, 'session.json'), 'utf8'));
    expect(existsSync(join(contextDir, 'home', 'session-state', saved.sessionId, 'events.jsonl'))).toBe(true);
    expect(saved.episodes).toEqual(['r0.b0']);
    // The CLI's logs stay with the episode, out of the context that is carried onward.
    expect(existsSync(join(contextDir, 'home', 'logs'))).toBe(false);
  });

  it('a prompt too long for one argument goes through stdin', async () => {
    const workdir = await repo();
    script = () => ({ text: 'Read it all.', usage: USAGE });
    const from = mark();
    const prompt = `${'x'.repeat(150_000)}\nEND-OF-LONG-PROMPT`;
    const out = await copilotAdapter(agent()).run(await session({ workdir, contextDir: await folder('ctx'), prompt }));
    expect(out.exit).toBe('finished');
    const last = received(from).bodies[0]?.messages.at(-1);
    expect(last?.role).toBe('user');
    expect(messageText(last ?? { role: 'user' })).toContain(prompt);
  });

  it('two carried episodes: the second continues the first conversation and is charged only its own calls', async () => {
    const workdir = await repo();
    const ctx1 = await folder('ctx');
    script = work('3');
    const first = await copilotAdapter(agent()).run(
      await session({ workdir, contextDir: ctx1, prompt: 'TASK-ONE', episodeId: 'r1.b0' }),
    );
    expect(first.exit).toBe('finished');

    // forkflush carries a COPY of the context into the next episode's folder.
    const ctx2 = await folder('ctx');
    await cp(ctx1, ctx2, { recursive: true });
    script = work('5', { prompt_tokens: 2000, completion_tokens: 50 }, '3');
    const from = mark();
    const second = await copilotAdapter(agent()).run(
      await session({ workdir, contextDir: ctx2, prompt: 'CONTINUE-TWO', episodeId: 'r2.b0' }),
    );
    expect(second.exit).toBe('finished');
    expect(second.note).toBeUndefined();
    const { bodies, text } = received(from);
    const firstRequest = text(0);
    // The first episode's prompt, its tool calls and results, then the continuation prompt.
    expect(firstRequest).toContain('TASK-ONE');
    expect(firstRequest).toMatch(/cwd=.* token=\[\]\n3\n/);
    expect(firstRequest).toContain('Done: value.txt holds 3.');
    expect(messageText(bodies[0]?.messages.at(-1) ?? { role: 'user' })).toContain('CONTINUE-TWO');
    expect(bodies[0]?.messages.filter((m) => m.role === 'user').length).toBe(2);
    expect(await readFile(join(workdir, 'value.txt'), 'utf8')).toBe('5');
    // Cumulative figures (9000 in / 450 out over both) less the first episode's.
    expect(second.usage).toMatchObject({ inputTokens: 6000, outputTokens: 150, turns: 3 });
    expect(second.reportedSpend).toBe(6150);
    const saved = JSON.parse(await readFile(join(ctx2, 'session.json'), 'utf8'));
    expect(saved.episodes).toEqual(['r1.b0', 'r2.b0']);
  });

  it('a forked branch resumes a copy in another worktree and leaves the original context unchanged', async () => {
    const trunk = await repo();
    const ctx = await folder('ctx');
    script = work('1');
    expect(
      (await copilotAdapter(agent()).run(await session({ workdir: trunk, contextDir: ctx, prompt: 'TASK-TRUNK' })))
        .exit,
    ).toBe('finished');
    const before = await snapshot(ctx);

    const branch = await repo();
    const fork = await folder('fork');
    await cp(ctx, fork, { recursive: true });
    script = work('9');
    const from = mark();
    const out = await copilotAdapter(agent()).run(
      await session({ workdir: branch, contextDir: fork, prompt: 'BRANCH-DIRECTIVE', episodeId: 'r1.b2' }),
    );
    expect(out.exit).toBe('finished');
    const { text } = received(from);
    expect(text(0)).toContain('TASK-TRUNK');
    expect(text(0)).toContain('BRANCH-DIRECTIVE');
    // The session was recorded in the trunk's folder but now works in the branch's.
    expect(text(2)).toContain(`cwd=${branch} token=[]`);
    expect(await readFile(join(branch, 'value.txt'), 'utf8')).toBe('9');
    expect(await readFile(join(trunk, 'value.txt'), 'utf8')).toBe('1');
    expect(await snapshot(ctx)).toEqual(before);
  });

  it('stops at the token allowance and at agent.max_turns: exit budget', async () => {
    const workdir = await repo();
    // Tokens: 1100 after the first call, 2200 after the second (> 1500); a third call would hang.
    let start = mark();
    script = (body, i) => (i - start >= 2 ? { hang: true } : work('2')(body, i, server));
    const out = await copilotAdapter(agent()).run(
      await session({ workdir, contextDir: await folder('ctx'), allowance: 1500, unit: 'tokens' }),
    );
    server.hang = false;
    expect(out.exit).toBe('budget');
    expect(out.note).toContain('tokens passed the allowance of 1500');
    expect(out.reportedSpend).toBe(2200);
    expect(out.usage).toMatchObject({ inputTokens: 2000, outputTokens: 200, turns: 2 });

    // One turn allowed: stopped as the second turn starts (its request is held).
    start = mark();
    script = (body, i) => (i - start >= 1 ? { hang: true } : work('2')(body, i, server));
    const turns = await copilotAdapter(agent({ max_turns: 1 })).run(
      await session({ workdir, contextDir: await folder('ctx') }),
    );
    server.hang = false;
    expect(turns.exit).toBe('budget');
    expect(turns.note).toContain('agent.max_turns (1)');
    expect(turns.usage).toMatchObject({ inputTokens: 1000, turns: 1 });
  });

  it('a hung model is killed at the deadline: exit timeout, nothing left running', async () => {
    const workdir = await repo();
    script = () => ({ hang: true });
    const started = Date.now();
    const out = await copilotAdapter(agent()).run(
      await session({ workdir, contextDir: await folder('ctx'), deadlineMs: 4000 }),
    );
    server.hang = false;
    const elapsed = (Date.now() - started) / 1000;
    expect(out.exit).toBe('timeout');
    expect(elapsed).toBeGreaterThanOrEqual(4);
    expect(elapsed).toBeLessThan(9);
    expect(out.reportedSpend).toBe(0);
    const left = execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes(workdir));
    expect(left).toEqual([]);
    // The same stop with a time budget is a budget stop.
    script = () => ({ hang: true });
    const timed = await copilotAdapter(agent()).run(
      await session({
        workdir,
        contextDir: await folder('ctx'),
        deadlineMs: 2000,
        deadlineIsBudget: true,
        unit: 'minutes',
      }),
    );
    server.hang = false;
    expect(timed.exit).toBe('budget');
    expect(timed.reportedSpend).toBeNull();
  });

  it('an unknown or corrupt carried session: a clear note and a fresh conversation', async () => {
    const workdir = await repo();
    const reply: ChatReply = { text: 'Fresh start.', usage: USAGE };
    script = () => reply;

    // Unknown: session.json names a session the home does not hold.
    const unknown = await folder('ctx');
    const ghost = '11111111-2222-4333-8444-555555555555';
    await writeFile(
      join(unknown, 'session.json'),
      JSON.stringify({ agent: 'copilot', sessionId: ghost, totals: null }),
    );
    let from = mark();
    const a = await copilotAdapter(agent()).run(
      await session({ workdir, contextDir: unknown, prompt: 'AFTER-UNKNOWN' }),
    );
    expect(a.exit).toBe('finished');
    expect(a.note).toContain(`could not resume the carried Copilot conversation (session ${ghost} is unknown`);
    expect(a.note).toContain('started a fresh conversation');
    expect(received(from).bodies[0]?.messages.map((m) => m.role)).toEqual(['system', 'user']);
    const savedA = JSON.parse(await readFile(join(unknown, 'session.json'), 'utf8'));
    expect(savedA.sessionId).not.toBe(ghost);

    // Corrupt: a real session whose events.jsonl was damaged.
    const corrupt = await folder('ctx');
    await cp(unknown, corrupt, { recursive: true });
    await writeFile(join(corrupt, 'home', 'session-state', savedA.sessionId, 'events.jsonl'), '{garbage\n');
    from = mark();
    const b = await copilotAdapter(agent()).run(
      await session({ workdir, contextDir: corrupt, prompt: 'AFTER-CORRUPT' }),
    );
    expect(b.exit).toBe('finished');
    expect(b.note).toContain('is corrupt: line 1 of its events.jsonl is not JSON');
    const bodies = received(from).bodies;
    expect(bodies[0]?.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(bodies.map((x) => x.messages.map(messageText).join('\n')).join('\n')).not.toContain('AFTER-UNKNOWN');
    expect(b.usage).toMatchObject({ inputTokens: 1000, outputTokens: 100, turns: 1 });
  });
});
