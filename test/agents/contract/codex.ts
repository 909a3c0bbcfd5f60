// Codex (the real CLI) against a scripted OpenAI Responses API (mock/openai-responses.ts).
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { adapterFor } from '../../../src/agents/specs.js';
import type { Config } from '../../../src/core/config.js';
import { lastInput, openAIResponses, toolOutputs, userTexts } from '../mock/openai-responses.js';
import type { RecordedRequest } from '../mock/server.js';
import {
  type AgentHarness,
  CLI_BIN,
  episode,
  ModelControl,
  requireCli,
  scaleOf,
  shellTurn,
  tempRoot,
} from './harness.js';

export const CODEX = join(CLI_BIN, 'codex');
const USAGE = { input: 1000, output: 40, cached: 600 };

const isResponsesCall = (r: RecordedRequest) => r.method === 'POST' && r.path.endsWith('/responses');

const model = new ModelControl(
  {
    isModelCall: isResponsesCall,
    view: (req) => ({
      // Codex sends its own <environment_context> (and AGENTS.md) as user messages.
      prompts: userTexts(req.body)
        .map((t) => t.trim())
        .filter((t) => !t.startsWith('<') && !t.startsWith('# AGENTS.md')),
      answered: (req.body?.input ?? []).some(
        (i: { role?: string; type?: string }) => i.role === 'assistant' || i.type === 'function_call',
      ),
      text: JSON.stringify(req.body?.input ?? null) + toolOutputs(req.body).join('\n'),
      credential: req.headers.authorization,
    }),
    errorBody: (status, message) => ({
      error: { message, type: status === 401 ? 'invalid_api_key' : 'invalid_request_error', code: null },
    }),
  },
  (control) =>
    openAIResponses((body) => {
      const k = scaleOf(control.plan);
      const usage = { input: USAGE.input * k, output: USAGE.output * k, cached: USAGE.cached * k };
      // The last input is the prompt at the start of a turn, a command's output later on.
      const turn = shellTurn(control.plan, lastInput(body)?.type === 'message' ? 0 : 1);
      return 'shell' in turn ? { command: turn.shell, usage } : { text: turn.text, usage };
    }).handler,
);

let url = '';
let root = '';

export const codexHarness: AgentHarness & { root: () => string; url: () => string } = {
  kind: 'codex',
  shell: true,
  workCalls: 2,
  perCall: { input: USAGE.input, output: USAGE.output },
  model,
  root: () => root,
  url: () => url,
  async start() {
    requireCli(CODEX);
    url = await model.server.start();
    root = await tempRoot('codex');
  },
  async stop() {
    await model.server.stop();
    if (root) await rm(root, { recursive: true, force: true });
  },
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({ kind: 'codex', command: CODEX, model: 'gpt-5-codex', args: [], env: [], timeout: 60, ...over }),
  env: () => ({ OPENAI_BASE_URL: `${url}/v1`, OPENAI_API_KEY: 'dummy-key' }),
  // No key, no login and no endpoint of the user's own: nothing Codex could log in with.
  envWithoutLogin: () => ({}),
  missingLogin:
    /Codex has no API key and no login: set OPENAI_API_KEY \(or CODEX_API_KEY\), or log in with `codex login`/,

  // A ChatGPT login (`codex login`): its auth.json is copied into the episode, Codex sends its
  // access token, and the copy is gone from the context afterwards.
  async login(t) {
    const user = await t.folder('user-codex');
    const jwt = fakeJwt({
      email: 'dev@example.com',
      exp: Math.floor(Date.now() / 1000) + 86_400,
      'https://api.openai.com/auth': {
        chatgpt_plan_type: 'plus',
        chatgpt_account_id: 'acct-1',
        chatgpt_user_id: 'u-1',
      },
    });
    const auth = {
      auth_mode: 'chatgpt',
      OPENAI_API_KEY: null,
      tokens: { id_token: jwt, access_token: jwt, refresh_token: 'rt-never-used', account_id: 'acct-1' },
      last_refresh: new Date().toISOString(),
    };
    const file = join(user, 'auth.json');
    await writeFile(file, JSON.stringify(auth), { mode: 0o600 });
    const saved = process.env.CODEX_HOME;
    process.env.CODEX_HOME = user;
    try {
      const ctx = await t.folder('ctx');
      model.work('login.txt', '1');
      // The endpoint is the mock's; no key: Codex authenticates with the login there.
      const { out, calls } = await episode(
        codexHarness,
        await t.session(await t.repo(), ctx, {}, { OPENAI_BASE_URL: `${url}/v1` }),
      );
      expect(out.exit, out.note).toBe('finished');
      expect(calls.length).toBe(2);
      expect(calls.map((c) => c.credential)).toEqual(calls.map(() => `Bearer ${jwt}`));
      await expect(stat(join(ctx, 'home', 'auth.json'))).rejects.toThrow(/ENOENT/);
      expect(JSON.parse(await readFile(file, 'utf8'))).toEqual(auth);
    } finally {
      if (saved === undefined) delete process.env.CODEX_HOME;
      else process.env.CODEX_HOME = saved;
    }
  },
};

/** An unsigned JWT: Codex reads the login's claims from it and never checks a signature. */
function fakeJwt(claims: Record<string, unknown>): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.sig`;
}
