// A hostile or broken model behind the real agent CLIs (Claude Code, Codex) in forkflush's sandbox:
// a provider whose usage figures are negative, strings or missing, and one that echoes the key in a
// compressed answer. What must hold: the spend is never under-counted silently (an unsure reading
// is said and charged as unknown), the budget holds, and the provider's key never reaches the
// agent or forkflush's records (README "Safety": "model keys", docs/architecture.md "Egress").

import { mkdir, readFile, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adapterFor } from '../../src/agents/specs.js';
import type { Config } from '../../src/core/config.js';
import { CLAUDE } from './contract/claude-code.js';
import { CODEX } from './contract/codex.js';
import {
  type AgentHarness,
  episode,
  ModelControl,
  requireCli,
  type Tools,
  tempRoot,
  toolsFor,
} from './contract/harness.js';
import { anthropicError, anthropicMessages, conversationText, isMessagesCall, userTexts } from './mock/anthropic.js';
import { type RecordedRequest, sendEvents } from './mock/server.js';

const ANTHROPIC_KEY = 'sk-ant-api03-the-real-key-0123456789abcdef';
const OPENAI_KEY = 'sk-proj-the-real-openai-key-0123456789';

// Claude Code against an Anthropic mock whose usage figures (or whole answer) the row sets.
let claudeUsage: Record<string, unknown> = { input_tokens: 1200, output_tokens: 80 };
let claudeRaw: ((req: RecordedRequest, res: ServerResponse) => void) | null = null;
const claudeBase = anthropicMessages(() => ({ step: { text: 'Done.' }, usage: claudeUsage as never }));
const claudeModel = new ModelControl(
  {
    isModelCall: isMessagesCall,
    view: (req) => ({
      prompts: userTexts(req),
      answered: false,
      text: conversationText(req),
      credential: req.headers['x-api-key'] as string | undefined,
    }),
    errorBody: anthropicError,
  },
  () => (req, res, server) => {
    if (claudeRaw && isMessagesCall(req)) return claudeRaw(req, res);
    return claudeBase(req, res, server);
  },
);

// Codex against a Responses API mock whose `response.completed` carries the usage the row sets (or none).
let codexUsage: unknown;
const isResponsesCall = (r: RecordedRequest) => r.method === 'POST' && r.path.endsWith('/responses');
const codexModel = new ModelControl(
  {
    isModelCall: isResponsesCall,
    view: (req) => ({
      prompts: [],
      answered: false,
      text: JSON.stringify(req.body),
      credential: req.headers.authorization,
    }),
    errorBody: (_status, message) => ({ error: { message, type: 'invalid_request_error', code: null } }),
  },
  () => (req, res) => {
    if (!isResponsesCall(req)) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
    const id = `resp_${Math.random().toString(36).slice(2, 10)}`;
    const item = {
      type: 'message',
      id: `msg_${id}`,
      role: 'assistant',
      content: [{ type: 'output_text', text: 'Done.', annotations: [] }],
    };
    const ev = (data: Record<string, unknown>) => ({ event: data.type as string, data });
    sendEvents(res, [
      ev({ type: 'response.created', response: { id, status: 'in_progress' } }),
      ev({ type: 'response.output_item.added', output_index: 0, item }),
      ev({ type: 'response.output_item.done', output_index: 0, item }),
      ev({
        type: 'response.completed',
        response: { id, status: 'completed', ...(codexUsage === undefined ? {} : { usage: codexUsage }) },
      }),
    ]);
  },
);

let root = '';
let claudeUrl = '';
let codexUrl = '';

const claude: AgentHarness = {
  kind: 'claude-code',
  shell: true,
  workCalls: 1,
  perCall: { input: 1200, output: 80 },
  model: claudeModel,
  root: () => root,
  start: async () => {},
  stop: async () => {},
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({ kind: 'claude-code', command: CLAUDE, args: [], env: [], timeout: 60, ...over }),
  env: () => ({
    ANTHROPIC_BASE_URL: claudeUrl,
    ANTHROPIC_API_KEY: ANTHROPIC_KEY,
    CLAUDE_CODE_TMPDIR: join(root, 'claude-tmp'),
  }),
  envWithoutLogin: () => ({}),
  missingLogin: /no API key/,
};

const codex: AgentHarness = {
  kind: 'codex',
  shell: true,
  workCalls: 1,
  perCall: { input: 1000, output: 40 },
  model: codexModel,
  root: () => root,
  start: async () => {},
  stop: async () => {},
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({ kind: 'codex', command: CODEX, model: 'gpt-5-codex', args: [], env: [], timeout: 60, ...over }),
  env: () => ({ OPENAI_BASE_URL: `${codexUrl}/v1`, OPENAI_API_KEY: OPENAI_KEY }),
  envWithoutLogin: () => ({}),
  missingLogin: /no API key/,
};

let ct: Tools;
let xt: Tools;
beforeAll(async () => {
  requireCli(CLAUDE);
  requireCli(CODEX);
  root = await tempRoot('hostile');
  await mkdir(join(root, 'claude-tmp'), { mode: 0o700 });
  claudeUrl = await claudeModel.server.start();
  codexUrl = await codexModel.server.start();
  ct = toolsFor(root, claude);
  // A folder of its own: each Tools numbers its folders from 1.
  await mkdir(join(root, 'codex'));
  xt = toolsFor(join(root, 'codex'), codex);
});
afterAll(async () => {
  await claudeModel.server.stop();
  await codexModel.server.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

/** One Claude Code episode with a 3000-token allowance: the model answers "Done." once. */
async function claudeEpisode() {
  const s = await ct.session(await ct.repo(), await ct.folder('ctx'), { allowance: 3000, unit: 'tokens' });
  return { ...(await episode(claude, s)), session: s };
}

describe('a model whose usage figures cannot be trusted', () => {
  // Failed before its fix: the model reported 5000 input tokens and -4000 output; the usage was
  // dropped as one that cannot be, but the spend made from it (the two netted: 1000) was kept, so the
  // episode was "finished" with 1000 tokens charged against a 3000-token allowance its input alone
  // passed. Now such figures make the spend unknown (core/usage.ts unsureFigures).
  it('a negative token count is not netted against the rest: the spend is unknown, or the overrun is one', async () => {
    claudeRaw = null;
    claudeUsage = { input_tokens: 5000, output_tokens: -4000 };
    const { out, calls } = await claudeEpisode();
    expect(calls).toHaveLength(1);
    expect(
      out.reportedSpend === null || (out.reportedSpend >= 5000 && out.exit === 'budget'),
      JSON.stringify(out),
    ).toBe(true);
  });

  // Failed before its fix: a provider that sends its counts as strings ("input_tokens": "90000"):
  // Claude Code's modelUsage held inputTokens "090000" (its cost, $0.36, counted them), and forkflush
  // read 0: "finished", reportedSpend 80, and no note at all. A figure that is there but not a
  // number now makes the spend unknown (said, charged as such), never 0.
  it('token counts the provider sent as strings are never read as zero in silence', async () => {
    claudeRaw = null;
    claudeUsage = { input_tokens: '90000', output_tokens: 80 };
    const { out, calls } = await claudeEpisode();
    expect(calls).toHaveLength(1);
    expect(
      out.reportedSpend === null || (out.reportedSpend >= 90_000 && out.exit === 'budget'),
      JSON.stringify(out),
    ).toBe(true);
  });

  // Failed before its fix: an OpenAI-compatible server that streams no usage (common for
  // self-hosted gateways): Codex's turn.completed reports all zeros, and forkflush recorded
  // reportedSpend 0, no note, "finished": the run's budget never counted such a model. A model that
  // answered with no input tokens counted is now an unknown spend, said as such, never a certain 0.
  it('a model that answers without any usage: the spend is unknown and said, never a certain zero', async () => {
    codexUsage = undefined;
    const s = await xt.session(await xt.repo(), await xt.folder('ctx'), { allowance: 3000, unit: 'tokens' });
    const { out, calls } = await episode(codex, s);
    expect(calls).toHaveLength(1);
    expect(out.exit, out.note).toBe('finished');
    expect(out.reportedSpend, JSON.stringify(out)).toBeNull();
    expect(out.note ?? '').toMatch(/unknown|no usage/);
  });
});

describe("the provider's key", () => {
  // Failed before its fix: the proxy asks for `accept-encoding: identity` and masks the key in
  // the bytes it relays, but an upstream that compressed anyway (gzip) passed the key through the
  // mask; the CLI decoded it, and the note read "... API Error: 400 bad key sk-ant-api03-the-real-key-...",
  // in the log too. The proxy now decodes such an answer before it masks it (io/egress-mask.ts).
  it('a key the upstream echoes in a gzip-compressed answer never reaches the agent, its log or the note', async () => {
    claudeRaw = (req, res) => {
      const body = gzipSync(JSON.stringify(anthropicError(400, `bad key ${String(req.headers['x-api-key'])}`)));
      res.writeHead(400, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'content-length': body.length,
      });
      res.end(body);
    };
    try {
      const { out, calls, session } = await claudeEpisode();
      expect(calls.length).toBeGreaterThanOrEqual(1);
      // The upstream did get the key (the proxy swapped it in): it is its echo that must not come back.
      expect(calls[0]?.credential).toBe(ANTHROPIC_KEY);
      expect(out.note ?? '').not.toContain(ANTHROPIC_KEY);
      expect(await readFile(session.logFile, 'utf8')).not.toContain(ANTHROPIC_KEY);
    } finally {
      claudeRaw = null;
    }
  });
});
