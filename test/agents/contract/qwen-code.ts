// Qwen Code (the real CLI) with its OpenAI auth against a scripted chat completions API (mock/openai-chat.ts).
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { adapterFor } from '../../../src/agents/specs.js';
import type { Config } from '../../../src/core/config.js';
import { type ChatRequestBody, chatCompletionsHandler, toolRoundsSinceUser } from '../mock/openai-chat.js';
import { openAIChatVendor } from './copilot.js';
import { type AgentHarness, CLI_BIN, ModelControl, requireCli, scaleOf, shellTurn, tempRoot } from './harness.js';

export const QWEN = join(CLI_BIN, 'qwen');
const MODEL = 'gpt-5-mini';
const USAGE = { prompt_tokens: 1000, completion_tokens: 100 };

const model = new ModelControl(openAIChatVendor, (control) =>
  chatCompletionsHandler((body: ChatRequestBody) => {
    const k = scaleOf(control.plan);
    const usage = { prompt_tokens: USAGE.prompt_tokens * k, completion_tokens: USAGE.completion_tokens * k };
    const turn = shellTurn(control.plan, toolRoundsSinceUser(body));
    return 'shell' in turn
      ? { toolCalls: [{ name: 'run_shell_command', arguments: { command: turn.shell, description: 'Work' } }], usage }
      : { text: turn.text, usage };
  }),
);

let url = '';
let root = '';

export const qwenHarness: AgentHarness & { root: () => string } = {
  kind: 'qwen-code',
  shell: true,
  workCalls: 2,
  perCall: { input: USAGE.prompt_tokens, output: USAGE.completion_tokens },
  model,
  root: () => root,
  async start() {
    requireCli(QWEN);
    url = await model.server.start();
    root = await tempRoot('qwen');
  },
  async stop() {
    await model.server.stop();
    if (root) await rm(root, { recursive: true, force: true });
  },
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({
      kind: 'qwen-code',
      command: QWEN,
      model: MODEL,
      args: [],
      env: [],
      timeout: 120,
      ...over,
    } as Config['agent']),
  env: () => ({ OPENAI_BASE_URL: `${url}/v1`, OPENAI_API_KEY: 'dummy-key', OPENAI_MODEL: MODEL }),
  envWithoutLogin: () => ({ OPENAI_BASE_URL: `${url}/v1`, OPENAI_MODEL: MODEL }),
  missingLogin: /Qwen Code has no API key: set OPENAI_API_KEY/,
  // Its own jittered backoff gave up on these after 100 to 150 s in CI, around the deadline.
  outlasts: { 'rate-limit': 'timeout', overload: 'timeout', network: 'timeout' },
};
