// The codex adapter against the real Codex CLI (pinned in scripts/install-agent-clis.mjs) and a
// scripted OpenAI Responses API on 127.0.0.1. Each case checks what the "model" received (is
// the earlier conversation there or not), what changed in the workspace, and the usage recorded.
// FORKFLUSH_RECORD_CODEX_FIXTURES=1 also saves the CLI's outputs to test/fixtures/agents/codex/
// for the parser's unit tests.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../../src/agents/agent.js';
import { codexAgent } from '../../src/agents/codex.js';
import type { Config } from '../../src/core/config.js';
import { allowedEnv } from '../../src/worker/env.js';
import { confinedSpawn } from './confined.js';
import {
  busyModel,
  chattyModel,
  codingModel,
  openAIResponses,
  type ResponsesScript,
  type ResponsesUsage,
  responsesRequests,
  toolOutputs,
  userTexts,
} from './mock/openai-responses.js';
import { MockModelServer, type RecordedRequest } from './mock/server.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CODEX = join(ROOT, '.cache', 'agent-clis', 'node_modules', '.bin', 'codex');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'agents', 'codex');
const RECORD = process.env.FORKFLUSH_RECORD_CODEX_FIXTURES === '1';
const MODEL = 'gpt-5-codex';
const SCORE = '0.75';

let script: ResponsesScript = () => ({ text: 'idle', usage: { input: 1, output: 1 } });
const mock = openAIResponses((body, index) => script(body, index));
const server = new MockModelServer((req, res, s) => {
  // The grader script below asks for its score here: proof that the sandboxed shell reaches loopback.
  if (req.path === '/grade') return void res.writeHead(200).end(`${SCORE}\n`);
  return mock.handler(req, res, s);
});
let url = '';
let tmp = '';
let grade = '';
let runs = 0;

/** Distinct figures per answer, so that a sum says which answers it covers. */
const usage = (i: number): ResponsesUsage => ({ input: 1000 + 100 * i, output: 10 + i, cached: 50 * i });

beforeAll(async () => {
  if (!existsSync(CODEX)) throw new Error(`no Codex CLI at ${CODEX}: run node scripts/install-agent-clis.mjs`);
  url = await server.start();
  tmp = await mkdtemp(join(tmpdir(), 'forkflush-codex-'));
  const client = join(tmp, 'grade-client.cjs');
  await writeFile(
    client,
    `require('node:http').get({ host: '127.0.0.1', port: ${new URL(url).port}, path: '/grade', agent: false }, (r) => {
  r.setEncoding('utf8').on('data', (d) => process.stdout.write(d));
}).on('error', (e) => { console.error('grader unreachable: ' + e.message); process.exitCode = 3; });
`,
  );
  grade = join(tmp, 'grade');
  await writeFile(grade, `#!/bin/sh\nexec '${process.execPath}' '${client}'\n`, { mode: 0o755 });
  if (RECORD) await mkdir(FIXTURES, { recursive: true });
});

afterAll(async () => {
  await server.stop();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function workspace(): Promise<string> {
  const dir = await mkdtemp(join(tmp, 'ws-'));
  execFileSync('git', ['init', '-q', dir]);
  return dir;
}

async function folder(name: string): Promise<string> {
  return mkdtemp(join(tmp, `${name}-`));
}

function agent(over: Partial<Config['agent']> = {}) {
  return codexAgent({
    kind: 'codex',
    command: CODEX,
    model: MODEL,
    args: [],
    env: [],
    timeout: 60,
    ...over,
  });
}

function session(workdir: string, contextDir: string, prompt: string, over: Partial<AgentSession> = {}): AgentSession {
  runs += 1;
  return {
    workdir,
    prompt,
    promptFile: join(tmp, `prompt-${runs}.md`),
    contextDir,
    usageFile: join(tmp, `usage-${runs}.json`),
    logFile: join(tmp, `agent-${runs}.log`),
    gradeCommand: grade,
    allowance: 1_000_000,
    unit: 'tokens',
    seed: runs,
    episodeId: `r${runs}.b0`,
    deadlineMs: 60_000,
    deadlineIsBudget: false,
    env: { ...allowedEnv(process.env, []), OPENAI_BASE_URL: `${url}/v1`, OPENAI_API_KEY: 'dummy-key' },
    signal: new AbortController().signal,
    ...confinedSpawn(tmp),
    ...over,
  };
}

/** Runs one episode; returns its outcome and the requests and answers it caused. */
async function episode(s: AgentSession, over: Partial<Config['agent']> = {}) {
  const fromRequest = server.requests.length;
  const fromReply = mock.replies.length;
  const outcome = await agent(over).run(s);
  const requests = server.requests.slice(fromRequest);
  const replies = mock.replies.slice(fromReply).map((r) => r.reply);
  return { outcome, requests, responses: requests.filter((r) => responsesRequests(server).includes(r)), replies };
}

const sum = (replies: { usage: ResponsesUsage }[], k: 'input' | 'output' | 'cached') =>
  replies.reduce((a, r) => a + (r.usage[k] ?? 0), 0);

/** The user's own messages (Codex adds an <environment_context> one of its own). */
const prompts = (r: RecordedRequest) => userTexts(r.body).filter((t) => !t.startsWith('<environment_context>'));

async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const f of (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile())) {
    const path = join(f.parentPath, f.name);
    out[path.slice(dir.length)] = createHash('sha256')
      .update(await readFile(path))
      .digest('hex');
  }
  return out;
}

async function rolloutOf(contextDir: string): Promise<string> {
  const files = (await readdir(join(contextDir, 'home', 'sessions'), { recursive: true })).filter((f) =>
    /rollout-.*\.jsonl$/.test(f),
  );
  expect(files).toHaveLength(1);
  return join(contextDir, 'home', 'sessions', files[0] as string);
}

async function record(name: string, content: string): Promise<void> {
  if (RECORD) await writeFile(join(FIXTURES, name), content);
}

/** stdout of a run: the JSON lines of its log (stderr holds Codex's plain-text warnings). */
async function stdoutOf(s: AgentSession): Promise<string> {
  const log = await readFile(s.logFile, 'utf8');
  return `${log
    .split('\n')
    .filter((l) => l.startsWith('{"type":'))
    .join('\n')}\n`;
}

function leftovers(marker: string): string[] {
  const ps = execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' });
  return ps.split('\n').filter((l) => l.includes(marker) && !l.includes('ps -eo'));
}

const write = (n: number) => `printf ${n} > value.txt && "$FORKFLUSH_GRADE"`;

describe('codex agent: a conversation carried and forked', () => {
  let ws = '';
  let first = '';
  let carried = '';
  let firstThread = '';

  it('starts fresh with an empty context: no history, the file written, usage parsed', async () => {
    ws = await workspace();
    first = await folder('ctx-a');
    script = codingModel({ command: write(42), text: 'Wrote 42.', usage });
    const s = session(ws, first, 'PROMPT-A: write 42 to value.txt');
    const { outcome, requests, responses, replies } = await episode(s);

    expect(outcome.exit, outcome.note).toBe('finished');
    expect(responses).toHaveLength(2);
    // No earlier conversation: the first request holds this prompt and nothing the model said or ran.
    expect(prompts(responses[0] as RecordedRequest)).toEqual(['PROMPT-A: write 42 to value.txt']);
    expect(toolOutputs(responses[0]?.body)).toEqual([]);
    expect(responses[0]?.body.input.some((i: any) => i.role === 'assistant' || i.type === 'function_call')).toBe(false);
    expect(responses[0]?.headers.authorization).toBe('Bearer dummy-key');
    // The command ran in the workspace, and its grader call reached loopback from the sandbox.
    expect(await readFile(join(ws, 'value.txt'), 'utf8')).toBe('42');
    expect(requests.some((r) => r.path === '/grade')).toBe(true);
    expect(toolOutputs(responses[1]?.body).join('')).toContain(SCORE);

    const input = sum(replies, 'input');
    const output = sum(replies, 'output');
    expect(outcome.usage).toMatchObject({ inputTokens: input, outputTokens: output, turns: 2 });
    expect(outcome.usage?.pricedFrom).toContain('gpt-5-codex');
    // The cached part of the input at the cached price.
    const cached = sum(replies, 'cached');
    expect(outcome.usage?.costUsd).toBeCloseTo(((input - cached) * 1.25 + cached * 0.125 + output * 10) / 1e6, 9);
    expect(outcome.reportedSpend).toBe(input + output);
    expect(outcome.note).toBeUndefined();

    const rec = JSON.parse(await readFile(join(first, 'session.json'), 'utf8'));
    firstThread = rec.threadId;
    expect(rec).toMatchObject({ agent: 'codex', totals: { inputTokens: input, outputTokens: output }, modelCalls: 2 });
    // The context keeps the conversation and forkflush's config, not Codex's indexes and caches.
    expect((await readdir(join(first, 'home'))).sort()).toEqual(['config.toml', 'sessions']);
    expect(await rolloutOf(first)).toContain(firstThread);
    await record('fresh.stdout.jsonl', await stdoutOf(s));
    await record('fresh.rollout.jsonl', await readFile(await rolloutOf(first), 'utf8'));
  });

  it('carries the conversation into the next episode, and charges only the new tokens', async () => {
    carried = await folder('ctx-b');
    await cp(first, carried, { recursive: true }); // forkflush hands each episode a copy
    script = codingModel({ command: write(43), text: 'Wrote 43.', usage });
    const s = session(ws, carried, 'CONTINUE-B: now write 43');
    const { outcome, responses, replies } = await episode(s);

    expect(outcome.exit, outcome.note).toBe('finished');
    expect(responses).toHaveLength(2);
    // The first request already holds episode A: its prompt and its command's output.
    expect(prompts(responses[0] as RecordedRequest)).toEqual([
      'PROMPT-A: write 42 to value.txt',
      'CONTINUE-B: now write 43',
    ]);
    expect(toolOutputs(responses[0]?.body)).toHaveLength(1);
    expect(toolOutputs(responses[0]?.body)[0]).toContain(SCORE);
    expect(await readFile(join(ws, 'value.txt'), 'utf8')).toBe('43');

    // Codex reports the thread's running total; the episode is charged its own answers only.
    expect(outcome.usage).toMatchObject({
      inputTokens: sum(replies, 'input'),
      outputTokens: sum(replies, 'output'),
      turns: 2,
    });
    expect(outcome.reportedSpend).toBe(sum(replies, 'input') + sum(replies, 'output'));
    const rec = JSON.parse(await readFile(join(carried, 'session.json'), 'utf8'));
    expect(rec.threadId).toBe(firstThread);
    expect(rec.modelCalls).toBe(4);
    await record('carried.stdout.jsonl', await stdoutOf(s));
    await record('carried.rollout.jsonl', await readFile(await rolloutOf(carried), 'utf8'));
  });

  it('forks: a copy of the context resumes in another workspace, and the original stays as it was', async () => {
    const fork = await folder('ctx-fork');
    await cp(carried, fork, { recursive: true });
    const before = await snapshot(carried);
    const otherWs = await workspace();
    script = codingModel({ command: `${write(44)} && pwd`, text: 'Wrote 44.', usage });
    const { outcome, responses } = await episode(session(otherWs, fork, 'FORK-C: try 44'));

    expect(outcome.exit, outcome.note).toBe('finished');
    expect(prompts(responses[0] as RecordedRequest)).toEqual([
      'PROMPT-A: write 42 to value.txt',
      'CONTINUE-B: now write 43',
      'FORK-C: try 44',
    ]);
    expect(toolOutputs(responses[0]?.body)).toHaveLength(2);
    // The fork worked in its own workspace; the parent's workspace and context are untouched.
    expect(await readFile(join(otherWs, 'value.txt'), 'utf8')).toBe('44');
    expect(toolOutputs(responses[1]?.body).at(-1)).toContain(otherWs);
    expect(await readFile(join(ws, 'value.txt'), 'utf8')).toBe('43');
    expect(await snapshot(carried)).toEqual(before);
    expect(JSON.parse(await readFile(join(fork, 'session.json'), 'utf8')).threadId).toBe(firstThread);
  });
});

describe('codex agent: bounds', () => {
  it('stops a session whose tokens pass the allowance (Codex has no limit of its own): exit budget', async () => {
    const ws = await workspace();
    const ctx = await folder('ctx-tokens');
    const marker = `busy-${Date.now()}`;
    script = busyModel({ command: `sleep 0.3; echo ${marker}`, usage: () => ({ input: 5000, output: 100 }) });
    const s = session(ws, ctx, 'keep going', { allowance: 8000 });
    const { outcome, replies } = await episode(s);

    expect(outcome.exit).toBe('budget');
    expect(outcome.note).toMatch(/stopped by forkflush: the session spent \d+ tokens of its 8000/);
    expect(replies.length).toBeGreaterThanOrEqual(2);
    expect(replies.length).toBeLessThanOrEqual(3);
    // Charged what the model reported up to the stop, read from the session file.
    expect(outcome.reportedSpend).toBeGreaterThan(8000);
    expect(outcome.reportedSpend).toBeLessThanOrEqual(5100 * replies.length);
    expect(leftovers(marker)).toEqual([]);
    await record('budget.stdout.jsonl', await stdoutOf(s));
    await record('budget.rollout.jsonl', await readFile(await rolloutOf(ctx), 'utf8'));

    // The next episode carries on from a turn stopped while a tool call was pending: Codex closes
    // that call in the history it sends (the API refuses a call without an output).
    const next = await folder('ctx-tokens-next');
    await cp(ctx, next, { recursive: true });
    script = codingModel({ command: write(9), text: 'Done.', usage });
    const after = await episode(session(ws, next, 'CONTINUE after the stop'));
    expect(after.outcome.exit, after.outcome.note).toBe('finished');
    const body = after.responses[0]?.body;
    expect(prompts(after.responses[0] as RecordedRequest)).toEqual(['keep going', 'CONTINUE after the stop']);
    const calls = body.input.filter((i: any) => i.type === 'function_call').map((i: any) => i.call_id);
    const outputs = body.input.filter((i: any) => i.type === 'function_call_output').map((i: any) => i.call_id);
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(outputs.sort()).toEqual(calls.sort());
    expect(after.outcome.usage, after.outcome.note).toMatchObject({
      inputTokens: sum(after.replies, 'input'),
      outputTokens: sum(after.replies, 'output'),
      turns: 2,
    });
    await record('resumed-after-stop.rollout.jsonl', await readFile(await rolloutOf(next), 'utf8'));
  });

  it('stops at agent.max_turns model responses: exit budget', async () => {
    const ws = await workspace();
    script = busyModel({ command: 'sleep 0.2; echo again', usage });
    const { outcome, replies } = await episode(session(ws, await folder('ctx-turns'), 'keep going'), { max_turns: 2 });

    expect(outcome.exit).toBe('budget');
    expect(outcome.note).toContain('used its 2 model turns (agent.max_turns)');
    expect(outcome.usage?.turns).toBe(2);
    expect(replies.length).toBeLessThanOrEqual(3);
  });

  it('a time budget is the deadline: stopped there, exit budget', async () => {
    const ws = await workspace();
    script = busyModel({ command: 'sleep 1; echo again', usage });
    const { outcome } = await episode(
      session(ws, await folder('ctx-minutes'), 'keep going', {
        unit: 'minutes',
        deadlineMs: 2500,
        deadlineIsBudget: true,
      }),
    );

    expect(outcome.exit).toBe('budget');
    expect(outcome.reportedSpend).toBeNull();
    expect(outcome.seconds).toBeGreaterThanOrEqual(2.4);
    expect(outcome.seconds).toBeLessThan(6);
  });

  it('a model that never answers is killed at the deadline: exit timeout, nothing left running', async () => {
    const ws = await workspace();
    const ctx = await folder('ctx-hang');
    server.hang = true;
    try {
      const { outcome, responses } = await episode(session(ws, ctx, 'hello?', { deadlineMs: 5000 }));
      expect(outcome.exit).toBe('timeout');
      // The request was made and held: the stop is the hang's, not a slow start's.
      expect(responses.length).toBeGreaterThanOrEqual(1);
      expect(outcome.seconds).toBeGreaterThanOrEqual(4.9);
      expect(outcome.seconds).toBeLessThan(9);
      // The thread was recorded and no answer came: nothing spent, as far as anyone can tell.
      expect(outcome.reportedSpend).toBe(0);
      expect(outcome.usage).toMatchObject({ inputTokens: 0, outputTokens: 0, turns: 0 });
      expect(outcome.note).toContain('usage as Codex recorded it up to the stop');
      expect(leftovers(ws)).toEqual([]);
    } finally {
      server.hang = false;
    }
  });
});

describe('codex agent: a context it cannot resume', () => {
  it('a session.json naming a thread that is not there: a note and a fresh conversation', async () => {
    const ws = await workspace();
    const ctx = await folder('ctx-unknown');
    const ghost = '01a22b3f-0000-7000-8000-000000000000';
    await writeFile(
      join(ctx, 'session.json'),
      JSON.stringify({ agent: 'codex', threadId: ghost, totals: null, modelCalls: 0, model: null }),
    );
    await mkdir(join(ctx, 'home', 'sessions'), { recursive: true });
    script = chattyModel({ text: 'Hello.', usage });
    const { outcome, responses } = await episode(session(ws, ctx, 'PROMPT-FRESH'));

    expect(outcome.exit).toBe('finished');
    expect(outcome.note).toContain(
      `could not resume the carried Codex conversation (the session file of thread ${ghost} is missing); started a fresh conversation`,
    );
    expect(prompts(responses[0] as RecordedRequest)).toEqual(['PROMPT-FRESH']);
    expect(responses[0]?.body.input.some((i: any) => i.role === 'assistant' || i.type === 'function_call')).toBe(false);
    const rec = JSON.parse(await readFile(join(ctx, 'session.json'), 'utf8'));
    expect(rec.threadId).not.toBe(ghost);
  });

  it('a corrupt session.json: a note and a fresh conversation, with none of the old files', async () => {
    const ws = await workspace();
    const ctx = await folder('ctx-corrupt');
    await writeFile(join(ctx, 'session.json'), '{"agent": "codex", "threadId": ');
    await mkdir(join(ctx, 'home', 'sessions', '2026', '01', '01'), { recursive: true });
    await writeFile(join(ctx, 'home', 'sessions', '2026', '01', '01', 'rollout-x.jsonl'), 'garbage\n');
    script = chattyModel({ text: 'Hello.', usage });
    const { outcome, responses } = await episode(session(ws, ctx, 'PROMPT-FRESH-2'));

    expect(outcome.exit).toBe('finished');
    expect(outcome.note).toMatch(
      /could not resume the carried Codex conversation \(session.json is not JSON .*\); started a fresh conversation/,
    );
    expect(prompts(responses[0] as RecordedRequest)).toEqual(['PROMPT-FRESH-2']);
    expect(existsSync(join(ctx, 'home', 'sessions', '2026', '01', '01', 'rollout-x.jsonl'))).toBe(false);
  });
});
