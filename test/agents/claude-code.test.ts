// The claude-code adapter against the real Claude Code CLI (pinned in
// scripts/install-agent-clis.mjs) and a scripted Anthropic Messages API on 127.0.0.1.
// Set RECORD_CLAUDE_FIXTURES=1 to copy the logs and transcripts of these runs into
// test/fixtures/agents/claude-code/ (the unit tests of claude-code-output.ts read them).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  chmod,
  cp,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  realpath,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../../src/agents/agent.js';
import { type ClaudeSessionRecord, claudeCodeAgent } from '../../src/agents/claude-code.js';
import { projectDirName, readStream } from '../../src/agents/claude-code-output.js';
import type { Config } from '../../src/core/config.js';
import { confinedSpawn } from './confined.js';
import { AnthropicMockServer, conversationText, toolResults, userTexts } from './mock/anthropic.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CLAUDE = join(ROOT, '.cache', 'agent-clis', 'node_modules', '.bin', 'claude');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'agents', 'claude-code');
const RECORD = process.env.RECORD_CLAUDE_FIXTURES === '1';

let server: AnthropicMockServer;
let baseUrl: string;
let tmp: string;
let grade: string;

beforeAll(async () => {
  if (!existsSync(CLAUDE)) throw new Error(`no Claude Code at ${CLAUDE}: run node scripts/install-agent-clis.mjs`);
  server = new AnthropicMockServer();
  baseUrl = await server.start();
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'ff-claude-')));
  await mkdir(join(tmp, 'claude-tmp'), { mode: 0o700 });
  grade = join(tmp, 'grade.sh');
  await writeFile(grade, '#!/bin/sh\necho "score 0.625"\n');
  await chmod(grade, 0o755);
});

afterAll(async () => {
  await server?.stop();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** The agent section of a config (the lead adds "claude-code" to the kinds). */
function agentConfig(over: Partial<Config['agent']> = {}): Config['agent'] {
  return { kind: 'claude-code', command: CLAUDE, args: [], env: [], timeout: 60, ...over };
}

async function workspace(name: string): Promise<string> {
  const dir = join(tmp, name);
  await mkdir(dir, { recursive: true });
  execFileSync('git', ['init', '-q', dir]);
  return dir;
}

let episodes = 0;
async function session(workdir: string, contextDir: string, over: Partial<AgentSession> = {}): Promise<AgentSession> {
  const scratch = join(tmp, `scratch-${++episodes}`);
  await mkdir(scratch, { recursive: true });
  await mkdir(contextDir, { recursive: true });
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^(ANTHROPIC_|CLAUDE_|CLAUDECODE|GITHUB_TOKEN$|GH_TOKEN$)/.test(k)) env[k] = v;
  const prompt = over.prompt ?? `Do episode ${episodes}.`;
  await writeFile(join(scratch, 'prompt.md'), prompt);
  return {
    workdir,
    prompt,
    promptFile: join(scratch, 'prompt.md'),
    contextDir,
    usageFile: join(scratch, 'usage.json'),
    logFile: join(scratch, 'agent.log'),
    gradeCommand: grade,
    allowance: 5,
    unit: 'usd',
    seed: 7,
    episodeId: `r1.b${episodes}`,
    deadlineMs: 60_000,
    deadlineIsBudget: false,
    // CLAUDE_CODE_TMPDIR: Claude Code's per-user scratch folder, inside this test's temp folder.
    env: {
      ...env,
      ANTHROPIC_BASE_URL: baseUrl,
      ANTHROPIC_API_KEY: 'sk-ant-dummy-for-the-mock',
      CLAUDE_CODE_TMPDIR: join(tmp, 'claude-tmp'),
    },
    signal: new AbortController().signal,
    ...confinedSpawn(tmp),
    ...over,
  };
}

/** A model that writes a file in the workspace, runs the grader, then answers. */
function script(workdir: string, file: string, content: string): void {
  server.steps = [
    { tool: 'Write', file_path: join(workdir, file), content },
    { tool: 'Bash', command: '"$FORKFLUSH_GRADE"' },
  ];
  server.finalText = `Wrote ${file}.`;
  server.usage = { input_tokens: 1200, output_tokens: 80, cache_read_input_tokens: 300 };
  server.laterDelayMs = 0;
}

async function record(name: string, from: string): Promise<void> {
  if (!RECORD) return;
  await mkdir(FIXTURES, { recursive: true });
  await cp(from, join(FIXTURES, name));
}

async function transcriptOf(contextDir: string, workdir: string): Promise<string> {
  const rec = JSON.parse(await readFile(join(contextDir, 'session.json'), 'utf8')) as ClaudeSessionRecord;
  return join(contextDir, 'home', 'projects', projectDirName(await realpath(workdir)), `${rec.sessionId}.jsonl`);
}

/** Every file under a folder with a hash of its content. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true })) {
    const path = join(dir, entry);
    if ((await stat(path)).isFile())
      out[relative(dir, path)] = createHash('sha256')
        .update(await readFile(path))
        .digest('hex');
  }
  return out;
}

describe('claude-code adapter with the real CLI', () => {
  const contextA = () => join(tmp, 'ctx-a');
  let wsA: string;
  let firstPrompt: string;
  let firstCost: number;

  it('runs a fresh episode: no history, the file written, the grader run, usage parsed', async () => {
    wsA = await workspace('ws-a');
    script(wsA, 'notes.txt', 'first episode\n');
    const before = server.calls().length;
    const s = await session(wsA, contextA(), { prompt: 'Start the task: write notes.txt.' });
    firstPrompt = s.prompt;
    const out = await claudeCodeAgent(agentConfig()).run(s);
    await record('fresh.stream.jsonl', s.logFile);
    await record('fresh-transcript.jsonl', await transcriptOf(contextA(), wsA));

    expect(out.note).toBeUndefined();
    expect(out.exit).toBe('finished');
    const calls = server.calls().slice(before);
    expect(calls.length).toBe(3);
    // The first request is the prompt alone: no assistant turn, nothing from another conversation.
    const first = calls[0];
    expect(first?.body.messages.filter((m: { role: string }) => m.role === 'assistant')).toEqual([]);
    expect(
      userTexts(first as never)
        .at(-1)
        ?.trim(),
    ).toBe('Start the task: write notes.txt.');
    expect(first?.headers['x-api-key']).toBe('sk-ant-dummy-for-the-mock');
    expect(await readFile(join(wsA, 'notes.txt'), 'utf8')).toBe('first episode\n');
    // The shell tool ran "$FORKFLUSH_GRADE" and the grader's output went back to the model.
    expect(toolResults(calls[2] as never).join('\n')).toContain('score 0.625');

    const per = server.tokensPerCall();
    expect(out.usage).toMatchObject({ inputTokens: 3 * per.input, outputTokens: 3 * per.output, turns: 3 });
    const result = readStream(await readFile(s.logFile, 'utf8')).result;
    expect(result?.totals?.costUsd).toBeGreaterThan(0);
    expect(out.usage?.costUsd).toBeCloseTo(result?.totals?.costUsd ?? -1, 9);
    expect(out.reportedSpend).toBe(out.usage?.costUsd);
    firstCost = out.usage?.costUsd ?? 0;

    const rec = JSON.parse(await readFile(join(contextA(), 'session.json'), 'utf8')) as ClaudeSessionRecord;
    expect(rec.sessionId).toBe(result?.sessionId);
    expect(rec.cwd).toBe(wsA);
    expect(existsSync(await transcriptOf(contextA(), wsA))).toBe(true);
  });

  it('carries the context: the second episode resumes the first conversation and counts only its own usage', async () => {
    script(wsA, 'more.txt', 'second episode\n');
    const before = server.calls().length;
    const s = await session(wsA, contextA(), {
      prompt: 'Continue: now write more.txt.',
      unit: 'tokens',
      allowance: 1e6,
    });
    const out = await claudeCodeAgent(agentConfig()).run(s);
    await record('resumed.stream.jsonl', s.logFile);
    await record('resumed-transcript.jsonl', await transcriptOf(contextA(), wsA));

    expect(out.exit).toBe('finished');
    const calls = server.calls().slice(before);
    expect(calls.length).toBe(3);
    const first = calls[0] as never;
    const texts = userTexts(first);
    expect(texts).toContain(firstPrompt);
    expect(texts.at(-1)?.trim()).toBe('Continue: now write more.txt.');
    expect(conversationText(first)).toContain(join(wsA, 'notes.txt'));
    expect(toolResults(first).join('\n')).toContain('score 0.625');
    expect(await readFile(join(wsA, 'more.txt'), 'utf8')).toBe('second episode\n');

    // Claude Code reports the whole conversation's totals; the episode's are the difference.
    const per = server.tokensPerCall();
    expect(out.usage).toMatchObject({ inputTokens: 3 * per.input, outputTokens: 3 * per.output });
    expect(out.reportedSpend).toBe(3 * (per.input + per.output));
    const result = readStream(await readFile(s.logFile, 'utf8')).result;
    expect(result?.totals?.models).toBeDefined();
    expect(Object.values(result?.totals?.models ?? {})[0]?.outputTokens).toBe(6 * per.output);
    expect(out.usage?.costUsd).toBeCloseTo((result?.totals?.costUsd ?? 0) - firstCost, 9);
  });

  it('forks: a copy of the context resumes in another worktree and the original stays as it was', async () => {
    const wsB = await workspace('ws-b');
    const fork = join(tmp, 'ctx-fork');
    await cp(contextA(), fork, { recursive: true });
    const original = await snapshot(contextA());
    script(wsB, 'branch.txt', 'branch\n');
    const before = server.calls().length;
    const s = await session(wsB, fork, { prompt: 'Branch: try something else in branch.txt.' });
    const out = await claudeCodeAgent(agentConfig()).run(s);

    expect(out.exit).toBe('finished');
    const first = server.calls()[before] as never;
    const texts = userTexts(first);
    expect(texts).toContain(firstPrompt);
    expect(texts).toContain('Continue: now write more.txt.');
    expect(texts.at(-1)?.trim()).toBe('Branch: try something else in branch.txt.');
    // Claude Code was told it now works in the new worktree.
    expect(conversationText(first)).toContain(`Primary working directory: ${wsB}`);
    expect(await readFile(join(wsB, 'branch.txt'), 'utf8')).toBe('branch\n');
    expect(existsSync(join(wsA, 'branch.txt'))).toBe(false);
    // The copy's transcript now lives under the new worktree's project folder.
    const projects = await readdir(join(fork, 'home', 'projects'));
    expect(projects).toContain(projectDirName(wsB));
    expect(projects).not.toContain(projectDirName(wsA));
    expect(await snapshot(contextA())).toEqual(original);
  });

  it('stops at the money limit and at the turn limit with exit "budget"', async () => {
    const ws = await workspace('ws-budget');
    script(ws, 'x.txt', 'x\n');
    let before = server.calls().length;
    const s = await session(ws, join(tmp, 'ctx-budget-usd'), { allowance: 0.000001 });
    const out = await claudeCodeAgent(agentConfig()).run(s);
    await record('max-budget.stream.jsonl', s.logFile);
    expect(out.exit).toBe('budget');
    expect(out.note).toMatch(/money limit/);
    expect(server.calls().length - before).toBe(1);
    expect(out.reportedSpend).toBeGreaterThan(0);
    expect(out.usage?.inputTokens).toBe(server.tokensPerCall().input);

    before = server.calls().length;
    const t = await session(ws, join(tmp, 'ctx-budget-turns'));
    const outTurns = await claudeCodeAgent(agentConfig({ max_turns: 1 })).run(t);
    await record('max-turns.stream.jsonl', t.logFile);
    expect(outTurns.exit).toBe('budget');
    expect(outTurns.note).toMatch(/turn limit/);
    expect(server.calls().length - before).toBe(1);
  });

  it('stops a session that passes its token allowance', async () => {
    const ws = await workspace('ws-tokens');
    script(ws, 'y.txt', 'y\n');
    server.laterDelayMs = 5000; // time enough for the transcript watch to see the first call
    const before = server.calls().length;
    const ctx = join(tmp, 'ctx-tokens');
    const s = await session(ws, ctx, { unit: 'tokens', allowance: 500 });
    const out = await claudeCodeAgent(agentConfig()).run(s);
    server.laterDelayMs = 0;
    await record('killed.stream.jsonl', s.logFile);
    await record('killed-transcript.jsonl', await transcriptOf(ctx, ws));
    expect(out.exit).toBe('budget');
    expect(out.note).toMatch(/over its allowance of 500/);
    expect(server.calls().length - before).toBeLessThanOrEqual(2);
    // The spend comes from the cost record Claude Code wrote as it stopped: the first call.
    const per = server.tokensPerCall();
    expect(out.reportedSpend).toBe(per.input + per.output);
  });

  it('kills a hung session at its deadline: exit "timeout", no process left', async () => {
    const ws = await workspace('ws-hang');
    script(ws, 'z.txt', 'z\n');
    server.hang = true;
    try {
      const s = await session(ws, join(tmp, 'ctx-hang'), { deadlineMs: 4000 });
      const out = await claudeCodeAgent(agentConfig()).run(s);
      expect(out.exit).toBe('timeout');
      expect(out.seconds).toBeGreaterThanOrEqual(4);
      expect(out.seconds).toBeLessThan(9);
      expect(await processesIn(ws)).toEqual([]);
    } finally {
      server.hang = false;
    }
  });

  it('starts afresh, with a note, from a context whose session cannot be resumed', async () => {
    const ws = await workspace('ws-corrupt');
    script(ws, 'c.txt', 'c\n');
    server.steps = []; // one model call each: the history sent is what matters here
    const ctx = join(tmp, 'ctx-corrupt');
    const ghost = '0f0f0f0f-1111-4222-8333-444455556666';
    await mkdir(join(ctx, 'home', 'projects', projectDirName(ws)), { recursive: true });
    await writeFile(
      join(ctx, 'session.json'),
      JSON.stringify({ sessionId: ghost, cwd: ws, totals: null, episode: 'r0' }),
    );
    await writeFile(join(ctx, 'home', 'projects', projectDirName(ws), `${ghost}.jsonl`), 'not json {{{\n');
    const before = server.calls().length;
    const s = await session(ws, ctx, { prompt: 'Start over.' });
    const out = await claudeCodeAgent(agentConfig()).run(s);

    expect(out.exit).toBe('finished');
    expect(out.note).toMatch(
      /could not resume the carried Claude Code conversation \(the transcript of session 0f0f0f0f-.* has no readable line/,
    );
    expect(out.note).toMatch(/started a fresh conversation/);
    const first = server.calls()[before] as never;
    expect(userTexts(first).at(-1)?.trim()).toBe('Start over.');
    expect(
      (first as { body: { messages: { role: string }[] } }).body.messages.some((m) => m.role === 'assistant'),
    ).toBe(false);
    // Cleared: nothing of the unusable conversation is carried on.
    expect(existsSync(join(ctx, 'home', 'projects', projectDirName(ws), `${ghost}.jsonl`))).toBe(false);
    const rec = JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8')) as ClaudeSessionRecord;
    expect(rec.sessionId).not.toBe(ghost);

    // A session id whose transcript is gone: the same, with its own reason.
    const ctx2 = join(tmp, 'ctx-unknown');
    await mkdir(join(ctx2, 'home'), { recursive: true });
    await writeFile(
      join(ctx2, 'session.json'),
      JSON.stringify({ sessionId: ghost, cwd: ws, totals: null, episode: 'r0' }),
    );
    const out2 = await claudeCodeAgent(agentConfig()).run(await session(ws, ctx2));
    expect(out2.exit).toBe('finished');
    expect(out2.note).toMatch(/the transcript of session 0f0f0f0f-1111-4222-8333-444455556666 is missing/);

    // A transcript that looks fine here but in which Claude Code finds no conversation (only a
    // subagent's row): Claude Code says so before any model call, and the episode starts afresh.
    const ctx3 = join(tmp, 'ctx-sidechain');
    const project = join(ctx3, 'home', 'projects', projectDirName(ws));
    await mkdir(project, { recursive: true });
    await writeFile(
      join(ctx3, 'session.json'),
      JSON.stringify({ sessionId: ghost, cwd: ws, totals: null, episode: 'r0' }),
    );
    const row = { type: 'user', isSidechain: true, sessionId: ghost, message: { role: 'user', content: 'old' } };
    await writeFile(join(project, `${ghost}.jsonl`), `${JSON.stringify(row)}\n`);
    const calls = server.calls().length;
    const out3 = await claudeCodeAgent(agentConfig()).run(await session(ws, ctx3, { prompt: 'Third start.' }));
    expect(out3.exit).toBe('finished');
    expect(out3.note).toMatch(/Claude Code found no conversation 0f0f0f0f-.*started a fresh conversation/);
    expect(server.calls().length - calls).toBe(1);
    expect(
      userTexts(server.calls()[calls] as never)
        .at(-1)
        ?.trim(),
    ).toBe('Third start.');
  });

  it('ends as a crash, with the API error in the note, when the model API refuses', async () => {
    const ws = await workspace('ws-api-error');
    script(ws, 'e.txt', 'e\n');
    server.failWith = { status: 400, type: 'invalid_request_error', message: 'the mock refuses this request' };
    try {
      const s = await session(ws, join(tmp, 'ctx-api-error'));
      const out = await claudeCodeAgent(agentConfig()).run(s);
      await record('api-error.stream.jsonl', s.logFile);
      expect(out.exit).toBe('crash');
      expect(out.note).toMatch(/API status 400.*the mock refuses this request/);
      expect(out.reportedSpend).toBe(0);
    } finally {
      server.failWith = null;
    }
  });
});

/** Processes whose working directory is inside a folder. */
async function processesIn(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => null);
    if (cwd !== null && (cwd === dir || cwd.startsWith(`${dir}/`))) found.push(pid);
  }
  return found;
}
