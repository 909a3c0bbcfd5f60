// GitHub Copilot CLI (the real CLI) in bring-your-own-key mode against a scripted OpenAI chat
// completions API (mock/openai-chat.ts).
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { adapterFor } from '../../../src/agents/specs.js';
import type { Config } from '../../../src/core/config.js';
import {
  type ChatRequestBody,
  chatCompletionsHandler,
  isChatCall,
  messageText,
  toolRoundsSinceUser,
} from '../mock/openai-chat.js';
import { MockModelServer } from '../mock/server.js';
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

export const COPILOT = join(CLI_BIN, 'copilot');
export const MODEL = 'gpt-5-mini';
const USAGE = { prompt_tokens: 1000, completion_tokens: 100 };

export const openAIChatVendor = {
  isModelCall: isChatCall,
  view: (req: { body: any; headers: Record<string, unknown> }) => {
    const messages: { role: string }[] = req.body?.messages ?? [];
    return {
      prompts: messages.filter((m) => m.role === 'user').map((m) => messageText(m as never).trim()),
      answered: messages.some((m) => m.role === 'assistant'),
      text: JSON.stringify(messages),
      credential: req.headers.authorization as string | undefined,
    };
  },
  errorBody: (status: number, message: string) => ({
    error: { message, type: status === 401 ? 'invalid_api_key' : 'invalid_request_error', code: null },
  }),
};

const model = new ModelControl(openAIChatVendor, (control) =>
  chatCompletionsHandler((body: ChatRequestBody) => {
    const k = scaleOf(control.plan);
    const usage = { prompt_tokens: USAGE.prompt_tokens * k, completion_tokens: USAGE.completion_tokens * k };
    const turn = shellTurn(control.plan, toolRoundsSinceUser(body));
    return 'shell' in turn
      ? { toolCalls: [{ name: 'bash', arguments: { command: turn.shell, description: 'Work' } }], usage }
      : { text: turn.text, usage };
  }),
);

let url = '';
let root = '';

export const copilotHarness: AgentHarness & { root: () => string } = {
  kind: 'copilot',
  shell: true,
  workCalls: 2,
  perCall: { input: USAGE.prompt_tokens, output: USAGE.completion_tokens },
  model,
  root: () => root,
  async start() {
    requireCli(COPILOT);
    url = await model.server.start();
    root = await tempRoot('copilot');
  },
  async stop() {
    await model.server.stop();
    if (root) await rm(root, { recursive: true, force: true });
  },
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({ kind: 'copilot', command: COPILOT, args: [], env: [], timeout: 120, ...over } as Config['agent']),
  env: () => ({
    COPILOT_PROVIDER_BASE_URL: `${url}/v1`,
    COPILOT_PROVIDER_API_KEY: 'dummy-key',
    COPILOT_MODEL: MODEL,
    // No GitHub login, telemetry or update checks: this machine has no network.
    COPILOT_OFFLINE: 'true',
  }),
  envWithoutLogin: () => ({ COPILOT_MODEL: MODEL }),
  missingLogin: /Copilot CLI has no login: set COPILOT_GITHUB_TOKEN/,

  // COPILOT_GITHUB_TOKEN reaches the CLI, which checks it with GitHub at start-up: seen as a
  // request through the proxy, and in the CLI's own words ("token found but could not be validated").
  async login(t) {
    const proxy = new MockModelServer((_req, res) => void res.writeHead(502).end());
    const proxyUrl = await proxy.start();
    try {
      const { out } = await episode(
        copilotHarness,
        await t.session(
          await t.repo(),
          await t.folder('ctx'),
          {},
          { COPILOT_MODEL: MODEL, COPILOT_GITHUB_TOKEN: 'github_pat_from_the_login', HTTPS_PROXY: proxyUrl },
        ),
      );
      expect(out.exit).toBe('crash');
      expect(out.note).toContain('Authentication token found but could not be validated');
      expect(proxy.connects).toContain('api.github.com:443');
    } finally {
      await proxy.stop();
    }
  },
};
