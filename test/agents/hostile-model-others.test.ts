// A hostile or broken model behind the other real agent CLIs (Gemini CLI, Qwen Code, opencode, and
// aider's fake) in forkflush's sandbox, as test/agents/hostile-model.test.ts does for Claude Code and
// Codex: usage figures that are negative or strings, and a key the upstream echoes in a form the
// egress mask does not see. What must hold: the spend is never under-counted silently (an unsure
// reading is said and charged as unknown: core/usage.ts unsureFigures), and the provider's key never
// reaches the agent or forkflush's records (README "Safety", docs/architecture.md "Egress").
// Each row failed before its fix; its comment says what went wrong then. Now: the CLIs' usage
// figures are read with core/json.ts `figure` (one there but not a count is NaN, so the spend is
// unknown), aider's usage line takes any figure, and the session runner masks the proxy's keys in
// the log, the words and the failure it records (agents/runner.ts withoutKeys).
import { mkdir, readFile, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adapterFor } from '../../src/agents/specs.js';
import type { Config } from '../../src/core/config.js';
import { FAKE_AIDER } from './contract/aider.js';
import { openAIChatVendor } from './contract/copilot.js';
import { GEMINI, geminiPrompts } from './contract/gemini.js';
import {
  type AgentHarness,
  episode,
  ModelControl,
  requireCli,
  type Tools,
  tempRoot,
  toolsFor,
} from './contract/harness.js';
import { OPENCODE } from './contract/opencode.js';
import { QWEN } from './contract/qwen-code.js';
import { type GeminiContent, geminiHandler, isStreamCall } from './mock/gemini.js';
import { chatCompletionsHandler, isChatCall } from './mock/openai-chat.js';
import { type RecordedRequest, sendEvents } from './mock/server.js';

const KEY = 'sk-proj-the-real-openai-key-0123456789';
const GKEY = 'AIzaSy-the-real-gemini-key-0123456789';

// Chat completions: the usage and text the row sets.
let chatUsage: any = { prompt_tokens: 1000, completion_tokens: 100 };
let chatText = 'Done.';
let chatRaw: ((req: RecordedRequest, res: ServerResponse) => void) | null = null;
const chatModel = new ModelControl(openAIChatVendor, () => {
  const h = chatCompletionsHandler(() => ({ text: chatText, usage: chatUsage }));
  return (req, res, server) => (chatRaw && isChatCall(req) ? chatRaw(req, res) : h(req, res, server));
});

/** A streamed answer whose text comes in the given deltas (each its own SSE event). */
function streamDeltas(res: ServerResponse, model: string, deltas: string[]) {
  const id = 'chatcmpl-x';
  const chunk = (choices: unknown[], extra = {}) => ({
    data: { id, object: 'chat.completion.chunk', created: 1, model, choices, ...extra },
  });
  sendEvents(res, [
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]),
    ...deltas.map((d) => chunk([{ index: 0, delta: { content: d }, finish_reason: null }])),
    chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]),
    chunk([], { usage: { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100 } }),
    { data: '[DONE]' },
  ]);
}

let gemUsage: any = { promptTokenCount: 1200, candidatesTokenCount: 80 };
const gemModel = new ModelControl(
  {
    isModelCall: isStreamCall,
    view: (req) => {
      const contents: GeminiContent[] = req.body?.contents ?? [];
      return {
        prompts: geminiPrompts(contents),
        answered: contents.some((c) => c.role === 'model'),
        text: JSON.stringify(contents),
        credential: req.headers['x-goog-api-key'] as string | undefined,
      };
    },
    errorBody: (status, message) => ({ error: { code: status, message, status: 'INVALID_ARGUMENT' } }),
  },
  () => geminiHandler(() => ({ text: 'Done.', usage: gemUsage })),
);

let root = '';
let chatUrl = '';
let gemUrl = '';

function opencodeConfig(): string {
  return JSON.stringify({
    enabled_providers: ['mock'],
    provider: {
      mock: {
        npm: '@ai-sdk/openai-compatible',
        name: 'Mock',
        options: { baseURL: `${chatUrl}/v1`, apiKey: KEY },
        models: {
          'mock-model': {
            name: 'Mock',
            limit: { context: 128_000, output: 8192 },
            cost: { input: 1, output: 2, cache_read: 0.1, cache_write: 0.5 },
          },
        },
      },
    },
    small_model: 'mock/mock-model',
  });
}

const base = (kind: string, model: ModelControl, adapter: AgentHarness['adapter'], env: () => NodeJS.ProcessEnv) =>
  ({
    kind,
    shell: true,
    workCalls: 1,
    perCall: { input: 1000, output: 100 },
    model,
    root: () => root,
    start: async () => {},
    stop: async () => {},
    adapter,
    env,
    envWithoutLogin: () => ({}),
    missingLogin: /x/,
  }) as AgentHarness;

const opencode = base(
  'opencode',
  chatModel,
  (over = {}) =>
    adapterFor({
      kind: 'opencode',
      command: OPENCODE,
      model: 'mock/mock-model',
      args: [],
      env: [],
      timeout: 60,
      ...over,
    } as Config['agent']),
  () => ({ OPENCODE_CONFIG_CONTENT: opencodeConfig(), OPENCODE_DISABLE_MODELS_FETCH: '1' }),
);
const qwen = base(
  'qwen-code',
  chatModel,
  (over = {}) =>
    adapterFor({
      kind: 'qwen-code',
      command: QWEN,
      model: 'gpt-5-mini',
      args: [],
      env: [],
      timeout: 120,
      ...over,
    } as Config['agent']),
  () => ({ OPENAI_BASE_URL: `${chatUrl}/v1`, OPENAI_API_KEY: KEY, OPENAI_MODEL: 'gpt-5-mini' }),
);
const aider = base(
  'aider',
  chatModel,
  (over = {}) =>
    adapterFor({
      kind: 'aider',
      command: FAKE_AIDER,
      model: 'openai/gpt-5-mini',
      args: [],
      env: [],
      timeout: 60,
      ...over,
    } as Config['agent']),
  () => ({ OPENAI_API_BASE: `${chatUrl}/v1`, OPENAI_API_KEY: KEY, AIDER_FAKE_RETRY_TIMEOUT: '4' }),
);
const gemini = base(
  'gemini',
  gemModel,
  (over = {}) =>
    adapterFor({
      kind: 'gemini',
      command: GEMINI,
      model: 'gemini-2.5-flash',
      args: [],
      env: [],
      timeout: 1800,
      ...over,
    } as Config['agent']),
  () => ({ GOOGLE_GEMINI_BASE_URL: gemUrl, GEMINI_API_KEY: GKEY }),
);

const tools = new Map<AgentHarness, Tools>();
beforeAll(async () => {
  for (const c of [OPENCODE, QWEN, GEMINI]) requireCli(c);
  root = await tempRoot('hostile-others');
  chatUrl = await chatModel.server.start();
  gemUrl = await gemModel.server.start();
  for (const h of [opencode, qwen, aider, gemini]) {
    await mkdir(join(root, h.kind));
    tools.set(h, toolsFor(join(root, h.kind), h));
  }
});
afterAll(async () => {
  await chatModel.server.stop();
  await gemModel.server.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

/** One episode of a kind with a 3000-token allowance: the model answers once. */
async function run(h: AgentHarness) {
  const t = tools.get(h) as Tools;
  const s = await t.session(await t.repo(), await t.folder('ctx'), { allowance: 3000, unit: 'tokens' });
  const r = await episode(h, s);
  const log = await readFile(s.logFile, 'utf8').catch(() => '');
  return { ...r, log };
}

describe('a model whose usage figures cannot be trusted', () => {
  // Gemini CLI adds the provider's candidatesTokenCount (-4000) into its stats as is
  // ("candidates": -4000); gemini.ts usageFromStats reads it through count(), which turns it into 0
  // before unsureFigures sees it: "finished", reportedSpend 1000, no note. Must be an unknown spend, said.
  it('gemini: a negative output count is not read as zero in silence: the spend is unknown', async () => {
    gemUsage = { promptTokenCount: 1000, candidatesTokenCount: -4000 };
    const { out, calls } = await run(gemini);
    expect(calls).toHaveLength(1);
    expect(out.reportedSpend, JSON.stringify(out)).toBeNull();
    expect(out.note ?? '').toMatch(/unknown/);
  });

  // A provider that sends its counts as strings: Gemini CLI's stats hold "candidates": "090000"
  // (string concatenation), which count() reads as 0: "finished", reportedSpend 1000 (input only),
  // no note. A figure that is there but not a number must make the spend unknown, never 0.
  it('gemini: an output count the provider sent as a string is never read as zero in silence', async () => {
    gemUsage = { promptTokenCount: 1000, candidatesTokenCount: '90000' };
    const { out, calls } = await run(gemini);
    expect(calls).toHaveLength(1);
    expect(
      out.reportedSpend === null || (out.reportedSpend >= 91_000 && out.exit === 'budget'),
      JSON.stringify(out),
    ).toBe(true);
  });

  // Qwen Code prints the provider's figure as is in its result ("output_tokens": -4000); qwen-code.ts
  // tokensOf reads it through count() as 0: "finished", reportedSpend 1000, no note. The rule that
  // makes a negative count an unknown spend never sees it. Must be unknown, said.
  it('qwen-code: a negative output count is not read as zero in silence: the spend is unknown', async () => {
    chatRaw = null;
    chatUsage = { prompt_tokens: 1000, completion_tokens: -4000 };
    const { out, calls } = await run(qwen);
    expect(calls).toHaveLength(1);
    expect(out.reportedSpend, JSON.stringify(out)).toBeNull();
    expect(out.note ?? '').toMatch(/unknown/);
  });

  // opencode clamps the negative output to 0 itself but its step_finish still says so
  // ("tokens":{"total":-3000,"input":1000,"output":0,...}); opencode.ts addEvents reads input and
  // output only: "finished", reportedSpend 1000, no note. A total below zero must make the spend unknown.
  it('opencode: a negative output count (its total below zero) makes the spend unknown, said', async () => {
    chatRaw = null;
    chatUsage = { prompt_tokens: 1000, completion_tokens: -4000 };
    const { out, calls } = await run(opencode);
    expect(calls).toHaveLength(1);
    expect(out.reportedSpend, JSON.stringify(out)).toBeNull();
    expect(out.note ?? '').toMatch(/unknown/);
  });

  // aider prints a negative count as is ("Tokens: 1.0k sent, -4000 received."); aider.ts's TOKENS
  // pattern takes digits only, so the line is not read: the call that was made and answered is
  // lost, the episode is a "crash" with reportedSpend 0 (charged 0, as measured) and a note saying
  // "aider made no successful model call". A call whose usage line cannot be read must not be a certain 0.
  it('aider: a usage line with a negative count is not a call that never happened, charged 0', async () => {
    chatRaw = null;
    chatText = 'Done.';
    chatUsage = { prompt_tokens: 1000, completion_tokens: -4000 };
    const { out, calls } = await run(aider);
    expect(calls).toHaveLength(1);
    expect(out.reportedSpend === null || out.reportedSpend >= 1000, JSON.stringify(out)).toBe(true);
  });
});

describe("the provider's key", () => {
  // An upstream (a gateway) that streams the key back in the model's text, split over two SSE
  // deltas: the proxy's mask (io/egress-mask.ts Mask) looks for the key's bytes in a row, and the
  // JSON between the two events breaks them up; the CLI joins the deltas, and the real key is in
  // the agent's log and the outcome's lastWords ("The gateway says your key sk-proj-the-real-...").
  it('qwen-code: a key the upstream streams back split over two deltas never reaches the log or the outcome', async () => {
    chatRaw = (req, res) => {
      const key = String(req.headers.authorization).replace(/^Bearer /, '');
      streamDeltas(res, 'gpt-5-mini', [
        `The gateway says your key ${key.slice(0, 12)}`,
        `${key.slice(12)} is over its quota.`,
      ]);
    };
    try {
      const { out, calls, log } = await run(qwen);
      expect(calls).toHaveLength(1);
      // The upstream did get the key (the proxy swapped it in): it is its echo that must not come back.
      expect(calls[0]?.credential).toBe(`Bearer ${KEY}`);
      expect(JSON.stringify(out)).not.toContain(KEY);
      expect(log).not.toContain(KEY);
    } finally {
      chatRaw = null;
    }
  });
});
