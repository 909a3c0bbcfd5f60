// The gemini adapter against the real Gemini CLI (installed by scripts/install-agent-clis.mjs)
// and a scripted Gemini API on 127.0.0.1 (mock/gemini.ts). The model writes a file, runs the
// grader through the shell tool, then answers; each case checks what the server received, the
// files changed and the usage recorded. The first three cases are one lineage: a fresh episode,
// two carried ones, then a fork of the last context into another workspace.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AgentOutcome, AgentSession } from '../../src/agents/agent.js';
import { geminiAgent } from '../../src/agents/gemini.js';
import type { Config, Unit } from '../../src/core/config.js';
import { confinedSpawn } from './confined.js';
import {
  callRoundsSincePrompt,
  type GeminiContent,
  type GeminiReply,
  type GeminiScript,
  geminiServer,
  streamRequests,
} from './mock/gemini.js';
import type { MockModelServer } from './mock/server.js';

const GEMINI = join(import.meta.dirname, '..', '..', '.cache', 'agent-clis', 'node_modules', '.bin', 'gemini');
const MODEL = 'gemini-2.5-flash';
const USAGE = { promptTokenCount: 1200, candidatesTokenCount: 80, thoughtsTokenCount: 20 };

let root: string;
let server: MockModelServer | undefined;

beforeAll(async () => {
  if (!existsSync(GEMINI)) throw new Error(`${GEMINI} is missing: run node scripts/install-agent-clis.mjs`);
  root = await mkdtemp(join(tmpdir(), 'ff-gemini-'));
});

afterEach(async () => {
  await server?.stop();
  server = undefined;
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A git repository with one commit, the agent's workspace. */
async function workspace(name: string): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'ignore' });
  git('init', '-q');
  await writeFile(join(dir, 'TASK.md'), 'Make the score go up.\n');
  git('add', '-A');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'base');
  return dir;
}

/** A scratch folder with a grader script that logs each call and prints a score. */
async function scratch(name: string): Promise<{ dir: string; grade: string; graded: () => Promise<number> }> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  const grade = join(dir, 'grade.sh');
  await writeFile(grade, `#!/bin/sh\necho graded >> "${join(dir, 'grades.log')}"\necho 0.75\n`);
  await chmod(grade, 0o755);
  const graded = async () =>
    (await readFile(join(dir, 'grades.log'), 'utf8').catch(() => '')).split('\n').filter(Boolean).length;
  return { dir, grade, graded };
}

/** The number of prompts (user texts other than the CLI's session context) in a request. */
function prompts(contents: GeminiContent[]): string[] {
  return contents
    .filter((c) => c.role === 'user')
    .flatMap((c) => c.parts.map((p) => p.text))
    .filter((t): t is string => t !== undefined && !t.startsWith('<session_context>'));
}

/** Writes episode-<n>.txt, runs the grader, then answers; n counts the prompts so far. */
const worker: GeminiScript = (body) => {
  const n = prompts(body.contents).length;
  const rounds = callRoundsSincePrompt(body);
  const reply: GeminiReply =
    rounds === 0
      ? { functionCalls: [{ name: 'write_file', args: { file_path: `episode-${n}.txt`, content: `episode ${n}\n` } }] }
      : rounds === 1
        ? {
            functionCalls: [
              { name: 'run_shell_command', args: { command: '"$FORKFLUSH_GRADE"', description: 'grade' } },
            ],
          }
        : { text: `Done with episode ${n}.` };
  return { ...reply, usage: USAGE };
};

async function start(script: GeminiScript): Promise<{ server: MockModelServer; url: string }> {
  server = geminiServer(script);
  return { server, url: await server.start() };
}

function agentConfig(overrides: Partial<Config['agent']> = {}): Config['agent'] {
  return {
    kind: 'gemini',
    command: GEMINI,
    model: MODEL,
    args: [],
    env: [],
    timeout: 1800,
    ...overrides,
  };
}

function session(o: {
  url: string;
  workdir: string;
  contextDir: string;
  scratch: { dir: string; grade: string };
  prompt: string;
  unit?: Unit;
  allowance?: number;
  deadlineMs?: number;
  deadlineIsBudget?: boolean;
}): AgentSession {
  const env: NodeJS.ProcessEnv = { ...process.env, GOOGLE_GEMINI_BASE_URL: o.url, GEMINI_API_KEY: 'dummy-key' };
  delete env.GITHUB_TOKEN;
  delete env.GH_TOKEN;
  return {
    workdir: o.workdir,
    prompt: o.prompt,
    promptFile: join(o.scratch.dir, 'prompt.md'),
    contextDir: o.contextDir,
    usageFile: join(o.scratch.dir, 'usage.json'),
    logFile: join(o.scratch.dir, 'agent.log'),
    gradeCommand: o.scratch.grade,
    allowance: o.allowance ?? 1_000_000,
    unit: o.unit ?? 'tokens',
    seed: 1,
    episodeId: 'r1.b0',
    deadlineMs: o.deadlineMs ?? 60_000,
    deadlineIsBudget: o.deadlineIsBudget ?? false,
    env,
    signal: new AbortController().signal,
    ...confinedSpawn(root),
  };
}

/** A digest of every file under a folder (paths and contents). */
async function digest(dir: string): Promise<string> {
  const h = createHash('sha256');
  const walk = async (d: string): Promise<void> => {
    for (const e of (await readdir(d, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = join(d, e.name);
      h.update(p);
      if (e.isDirectory()) await walk(p);
      else h.update(await readFile(p));
    }
  };
  await walk(dir);
  return h.digest('hex');
}

/** Processes whose environment mentions `text` (the CLI and anything it started). */
function processesWith(text: string): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/environ`).includes(text)) found.push(Number(pid));
    } catch {}
  }
  return found;
}

function expectWorkerUsage(outcome: AgentOutcome, calls: number): void {
  const input = calls * USAGE.promptTokenCount;
  const output = calls * (USAGE.candidatesTokenCount + USAGE.thoughtsTokenCount);
  expect(outcome.usage).toMatchObject({ inputTokens: input, outputTokens: output, turns: calls });
  expect(outcome.usage?.pricedFrom).toContain(MODEL);
  expect(outcome.usage?.costUsd).toBeCloseTo((input * 0.3 + output * 2.5) / 1e6, 9);
}

describe('gemini agent, one lineage: fresh, carried twice, forked', () => {
  let ws = '';
  const contexts: string[] = [];

  it('a fresh episode starts with no history, writes the file, runs the grader and reports usage', async () => {
    const { server, url } = await start(worker);
    ws = await workspace('ws-a');
    const sc = await scratch('scratch-1');
    const contextDir = join(root, 'ctx-1');
    await mkdir(contextDir);
    const outcome = await geminiAgent(agentConfig()).run(
      session({ url, workdir: ws, contextDir, scratch: sc, prompt: 'FIRST PROMPT: improve the score.' }),
    );
    expect(outcome.exit, outcome.note).toBe('finished');
    expect(outcome.note).toBeUndefined();
    const reqs = streamRequests(server);
    expect(reqs).toHaveLength(3);
    const first: GeminiContent[] = reqs[0]?.body.contents ?? [];
    expect(first.filter((c) => c.role === 'model')).toEqual([]);
    expect(prompts(first)).toEqual(['FIRST PROMPT: improve the score.']);
    expect(reqs[0]?.path).toBe(`/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`);
    expect(reqs[0]?.headers['x-goog-api-key']).toBe('dummy-key');
    // The grader ran through the shell tool, with FORKFLUSH_GRADE set, and its output went back.
    expect(await sc.graded()).toBe(1);
    expect(JSON.stringify(reqs[2]?.body.contents.at(-1))).toContain('0.75');
    expect(await readFile(join(ws, 'episode-1.txt'), 'utf8')).toBe('episode 1\n');
    expectWorkerUsage(outcome, 3);
    expect(outcome.reportedSpend).toBe(3 * (1200 + 100));
    const recorded = JSON.parse(await readFile(join(contextDir, 'session.json'), 'utf8'));
    expect(recorded.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await readFile(join(sc.dir, 'agent.log'), 'utf8')).toContain(recorded.sessionId);
    contexts.push(contextDir);
  });

  it('two carried episodes continue the same conversation, each reporting only its own calls', async () => {
    const { server, url } = await start(worker);
    for (const [i, prompt] of [
      [2, 'CONTINUE TWO: keep going.'],
      [3, 'CONTINUE THREE: and again.'],
    ] as const) {
      const contextDir = join(root, `ctx-${i}`);
      await cp(contexts.at(-1) as string, contextDir, { recursive: true });
      const sc = await scratch(`scratch-${i}`);
      const from = streamRequests(server).length;
      const outcome = await geminiAgent(agentConfig()).run(
        session({ url, workdir: ws, contextDir, scratch: sc, prompt }),
      );
      expect(outcome.exit, outcome.note).toBe('finished');
      const first: GeminiContent[] = streamRequests(server)[from]?.body.contents ?? [];
      const expected = ['FIRST PROMPT: improve the score.', 'CONTINUE TWO: keep going.', prompt].slice(0, i);
      expect(prompts(first)).toEqual(expected);
      // The earlier episodes' tool calls and results are in the history too.
      const history = JSON.stringify(first);
      for (let n = 1; n < i; n++) expect(history).toContain(`episode-${n}.txt`);
      expect(history).toContain('0.75');
      expect(await readFile(join(ws, `episode-${i}.txt`), 'utf8')).toBe(`episode ${i}\n`);
      expectWorkerUsage(outcome, 3);
      contexts.push(contextDir);
    }
    const ids = await Promise.all(
      contexts.map(async (c) => JSON.parse(await readFile(join(c, 'session.json'), 'utf8')).sessionId),
    );
    expect(new Set(ids).size).toBe(1);
  });

  it('a forked branch resumes a copy in another workspace and leaves the original context alone', async () => {
    const { server, url } = await start(worker);
    const original = contexts.at(-1) as string;
    const before = await digest(original);
    const fork = join(root, 'ctx-fork');
    await cp(original, fork, { recursive: true });
    const other = await workspace('ws-b');
    const sc = await scratch('scratch-fork');
    const outcome = await geminiAgent(agentConfig()).run(
      session({ url, workdir: other, contextDir: fork, scratch: sc, prompt: 'FORKED: try another way.', unit: 'usd' }),
    );
    expect(outcome.exit, outcome.note).toBe('finished');
    const first: GeminiContent[] = streamRequests(server)[0]?.body.contents ?? [];
    expect(prompts(first)).toEqual([
      'FIRST PROMPT: improve the score.',
      'CONTINUE TWO: keep going.',
      'CONTINUE THREE: and again.',
      'FORKED: try another way.',
    ]);
    // The CLI describes the new workspace, and wrote there, not in the old one.
    expect(JSON.stringify(first[0])).toContain(other);
    expect(await readFile(join(other, 'episode-4.txt'), 'utf8')).toBe('episode 4\n');
    expect(existsSync(join(ws, 'episode-4.txt'))).toBe(false);
    expect(await digest(original)).toBe(before);
    expectWorkerUsage(outcome, 3);
    expect(outcome.reportedSpend).toBeCloseTo(outcome.usage?.costUsd as number, 12);
  });
});

describe('gemini agent bounds and failures', () => {
  it('stops at agent.max_turns (exit 53) and reports budget, with usage from the session file', async () => {
    const { server, url } = await start(worker);
    const ws = await workspace('ws-turns');
    const sc = await scratch('scratch-turns');
    const contextDir = join(root, 'ctx-turns');
    await mkdir(contextDir);
    const outcome = await geminiAgent(agentConfig({ max_turns: 1 })).run(
      session({ url, workdir: ws, contextDir, scratch: sc, prompt: 'Do a lot.' }),
    );
    expect(outcome.exit, outcome.note).toBe('budget');
    expect(outcome.note).toContain('agent.max_turns (1)');
    expect(streamRequests(server)).toHaveLength(1);
    expect(outcome.usage).toMatchObject({ inputTokens: 1200, outputTokens: 100, turns: 1 });
    expect(outcome.reportedSpend).toBe(1300);
    expect(await readFile(join(ws, 'episode-1.txt'), 'utf8')).toBe('episode 1\n');
  });

  it('stops a token overrun itself (the CLI has no money bound)', async () => {
    // A model that never stops calling tools, a little slowly.
    const { server, url } = await start(() => ({
      functionCalls: [{ name: 'run_shell_command', args: { command: 'sleep 0.3', description: 'wait' } }],
      usage: USAGE,
    }));
    const ws = await workspace('ws-overrun');
    const sc = await scratch('scratch-overrun');
    const contextDir = join(root, 'ctx-overrun');
    await mkdir(contextDir);
    const outcome = await geminiAgent(agentConfig()).run(
      session({ url, workdir: ws, contextDir, scratch: sc, prompt: 'Loop.', allowance: 3000 }),
    );
    expect(outcome.exit, outcome.note).toBe('budget');
    // Caught by the watcher, or found when the session ended: an overrun either way.
    expect(outcome.note).toMatch(/(more than|of) its 3000 tokens/);
    const calls = streamRequests(server).length;
    expect(calls).toBeGreaterThanOrEqual(3);
    expect(outcome.reportedSpend).toBeGreaterThan(3000);
    expect(outcome.usage?.turns).toBeGreaterThanOrEqual(3);
  });

  it('kills a hung session at its deadline: timeout, on time, nothing left running', async () => {
    const { server, url } = await start(() => ({ hang: true }));
    const ws = await workspace('ws-hang');
    const sc = await scratch('scratch-hang');
    const contextDir = join(root, 'ctx-hang');
    await mkdir(contextDir);
    // Long enough for the CLI to start and send its first request on a busy machine.
    const deadlineMs = 15_000;
    const outcome = await geminiAgent(agentConfig()).run(
      session({ url, workdir: ws, contextDir, scratch: sc, prompt: 'Hang.', deadlineMs }),
    );
    expect(outcome.exit).toBe('timeout');
    expect(streamRequests(server)).toHaveLength(1);
    expect(outcome.seconds).toBeGreaterThanOrEqual(deadlineMs / 1000);
    expect(outcome.seconds).toBeLessThan(deadlineMs / 1000 + 4);
    expect(processesWith(join(contextDir, 'home'))).toEqual([]);
    // The conversation was saved before the call: the prompt is there, nothing was answered.
    expect(outcome.usage).toMatchObject({ inputTokens: 0, outputTokens: 0, turns: 0 });
    expect(outcome.reportedSpend).toBe(0);
  });

  it('a deadline that is the budget reports budget', async () => {
    // Only the adapter's mapping is under test here: a stand-in that never answers, to save a CLI start.
    const { url } = await start(worker);
    const ws = await workspace('ws-minutes');
    const sc = await scratch('scratch-minutes');
    const contextDir = join(root, 'ctx-minutes');
    await mkdir(contextDir);
    const stuck = join(sc.dir, 'stuck.sh');
    await writeFile(stuck, '#!/bin/sh\nsleep 30\n');
    await chmod(stuck, 0o755);
    const outcome = await geminiAgent(agentConfig({ command: stuck })).run(
      session({
        url,
        workdir: ws,
        contextDir,
        scratch: sc,
        prompt: 'Hang.',
        unit: 'minutes',
        deadlineMs: 1000,
        deadlineIsBudget: true,
      }),
    );
    expect(outcome.exit).toBe('budget');
    expect(outcome.reportedSpend).toBeNull();
    expect(outcome.seconds).toBeLessThan(4);
  });

  it('an unknown or unreadable session in the context folder: a clear note and a fresh conversation', async () => {
    const { server, url } = await start(worker);
    const ws = await workspace('ws-unknown');
    const sc = await scratch('scratch-unknown');
    const unknown = join(root, 'ctx-unknown');
    await mkdir(join(unknown, 'home', '.gemini'), { recursive: true });
    await writeFile(
      join(unknown, 'session.json'),
      JSON.stringify({ sessionId: '0b0e2a8c-5d1c-4c43-9a55-3f1e7d1b9c11' }),
    );
    const a = await geminiAgent(agentConfig()).run(
      session({ url, workdir: ws, contextDir: unknown, scratch: sc, prompt: 'Go on.' }),
    );
    expect(a.exit).toBe('finished');
    expect(a.note).toContain(
      'could not resume the carried Gemini CLI conversation (session 0b0e2a8c-5d1c-4c43-9a55-3f1e7d1b9c11 is not in the context folder',
    );
    // The model saw this prompt and nothing of an earlier conversation.
    const first: GeminiContent[] = streamRequests(server)[0]?.body.contents ?? [];
    expect(prompts(first)).toEqual(['Go on.']);
    // The episode left a sound conversation for the next one.
    const saved = JSON.parse(await readFile(join(unknown, 'session.json'), 'utf8'));
    expect(saved.sessionId).not.toBe('0b0e2a8c-5d1c-4c43-9a55-3f1e7d1b9c11');

    const corrupt = join(root, 'ctx-corrupt');
    await mkdir(corrupt);
    await writeFile(join(corrupt, 'session.json'), '{not json');
    const b = await geminiAgent(agentConfig()).run(
      session({ url, workdir: ws, contextDir: corrupt, scratch: sc, prompt: 'Go on.' }),
    );
    expect(b.exit).toBe('finished');
    expect(b.note).toContain(
      'could not resume the carried Gemini CLI conversation (the context folder has no readable session.json)',
    );
  });
});
