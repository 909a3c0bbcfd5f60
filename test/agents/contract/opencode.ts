// opencode (the real CLI) with an OpenAI-compatible provider of the test's own, against a scripted
// chat completions API (mock/openai-chat.ts). Its provider's key is checked by the API, as a real
// one is: without it, or its login, the call is refused.
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { adapterFor } from '../../../src/agents/specs.js';
import type { Config } from '../../../src/core/config.js';
import { type ChatRequestBody, chatCompletionsHandler, toolRoundsSinceUser } from '../mock/openai-chat.js';
import { openAIChatVendor } from './copilot.js';
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

export const OPENCODE = join(CLI_BIN, 'opencode');
const USAGE = { prompt_tokens: 1000, completion_tokens: 100 };

const model = new ModelControl(openAIChatVendor, (control) => {
  const chat = chatCompletionsHandler((body: ChatRequestBody) => {
    const k = scaleOf(control.plan);
    const usage = { prompt_tokens: USAGE.prompt_tokens * k, completion_tokens: USAGE.completion_tokens * k };
    const turn = shellTurn(control.plan, toolRoundsSinceUser(body));
    return 'shell' in turn
      ? { toolCalls: [{ name: 'bash', arguments: { command: turn.shell, description: 'Work' } }], usage }
      : { text: turn.text, usage };
  });
  return (req, res, server) => {
    if (!/^Bearer \S/.test(req.headers.authorization ?? '')) {
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end(JSON.stringify(openAIChatVendor.errorBody(401, 'Incorrect API key provided')));
      return;
    }
    return chat(req, res, server);
  };
});

let url = '';
let root = '';

/** opencode's inline config: the mock as a provider (with prices, so opencode prices the calls). */
function config(apiKey: string | null): string {
  return JSON.stringify({
    enabled_providers: ['mock'],
    provider: {
      mock: {
        npm: '@ai-sdk/openai-compatible',
        name: 'Mock',
        options: { baseURL: `${url}/v1`, ...(apiKey ? { apiKey } : {}) },
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

export const opencodeHarness: AgentHarness = {
  kind: 'opencode',
  shell: true,
  workCalls: 2,
  perCall: { input: USAGE.prompt_tokens, output: USAGE.completion_tokens },
  model,
  root: () => root,
  async start() {
    requireCli(OPENCODE);
    url = await model.server.start();
    root = await tempRoot('opencode');
  },
  async stop() {
    await model.server.stop();
    if (root) await rm(root, { recursive: true, force: true });
  },
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({
      kind: 'opencode',
      command: OPENCODE,
      model: 'mock/mock-model',
      args: [],
      env: [],
      timeout: 60,
      ...over,
    } as Config['agent']),
  // Offline: no fetch of the model catalogue (opencode carries one).
  env: () => ({ OPENCODE_CONFIG_CONTENT: config('sk-mock'), OPENCODE_DISABLE_MODELS_FETCH: '1' }),
  envWithoutLogin: () => ({ OPENCODE_CONFIG_CONTENT: config(null), OPENCODE_DISABLE_MODELS_FETCH: '1' }),
  // opencode talks to any provider: the API says there is no key.
  missingLogin: /Incorrect API key provided/,

  // `opencode auth login`'s credentials file: copied into the episode, sent as the provider's key,
  // gone from the context afterwards.
  async login(t) {
    const data = await t.folder('user-data');
    await mkdir(join(data, 'opencode'));
    await writeFile(
      join(data, 'opencode', 'auth.json'),
      JSON.stringify({ mock: { type: 'api', key: 'sk-from-login' } }),
      {
        mode: 0o600,
      },
    );
    const saved = process.env.XDG_DATA_HOME;
    process.env.XDG_DATA_HOME = data;
    try {
      const ctx = await t.folder('ctx');
      model.work('login.txt', '1');
      const { out, calls } = await episode(
        opencodeHarness,
        await t.session(await t.repo(), ctx, {}, opencodeHarness.envWithoutLogin()),
      );
      expect(out.exit, out.note).toBe('finished');
      expect(calls.map((c) => c.credential)).toEqual(calls.map(() => 'Bearer sk-from-login'));
      await expect(stat(join(ctx, 'data', 'opencode', 'auth.json'))).rejects.toThrow(/ENOENT/);
    } finally {
      if (saved === undefined) delete process.env.XDG_DATA_HOME;
      else process.env.XDG_DATA_HOME = saved;
    }
  },
};
