// aider against a scripted OpenAI chat completions API (mock/openai-chat.ts). aider (PyPI
// aider-chat) cannot be installed here: the adapter runs test/fixtures/agents/aider/fake-aider.mjs,
// built from aider's documented behaviour (sources in its header). aider never runs the model's
// shell commands, so the model only edits; its API key is checked by the API, as a real one is.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { adapterFor } from '../../../src/agents/specs.js';
import type { Config } from '../../../src/core/config.js';
import { chatCompletionsHandler } from '../mock/openai-chat.js';
import { openAIChatVendor } from './copilot.js';
import { type AgentHarness, ModelControl, scaleOf, tempRoot } from './harness.js';

export const FAKE_AIDER = join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'aider', 'fake-aider.mjs');
const USAGE = { prompt_tokens: 1000, completion_tokens: 100 };

/** A reply in aider's "diff" edit format that creates `file` holding `value`. */
export function aiderEdit(file: string, value: string, from = ''): string {
  return [
    `I will set ${file} to ${value}.`,
    '',
    file,
    '```',
    '<<<<<<< SEARCH',
    ...(from ? [from] : []),
    '=======',
    value,
    '>>>>>>> REPLACE',
    '```',
  ].join('\n');
}

const model = new ModelControl(openAIChatVendor, (control) => {
  const chat = chatCompletionsHandler(() => {
    const p = control.plan;
    const k = scaleOf(p);
    const usage = { prompt_tokens: USAGE.prompt_tokens * k, completion_tokens: USAGE.completion_tokens * k };
    // Busy: an edit whose SEARCH never matches, which aider reflects back to the model.
    const text =
      'work' in p
        ? aiderEdit(p.work.file, p.work.value)
        : 'busy' in p
          ? aiderEdit('README.md', 'x', 'no such line')
          : p.answer;
    return { text, usage };
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

export const aiderHarness: AgentHarness & { root: () => string } = {
  kind: 'aider',
  shell: false,
  workCalls: 1,
  perCall: { input: USAGE.prompt_tokens, output: USAGE.completion_tokens },
  model,
  root: () => root,
  async start() {
    url = await model.server.start();
    root = await tempRoot('aider');
  },
  async stop() {
    await model.server.stop();
    if (root) await rm(root, { recursive: true, force: true });
  },
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({
      kind: 'aider',
      command: FAKE_AIDER,
      // Priced by forkflush: the fake, like aider, prints a cost only for models litellm prices.
      model: 'openai/gpt-5-mini',
      args: [],
      env: [],
      timeout: 60,
      ...over,
    } as Config['agent']),
  // aider gives up on a failing call after 60 s of retries; the fake, after 4 s (the same retries,
  // the same give-up line: what forkflush reads of it; the waits are only time).
  env: () => ({ OPENAI_API_BASE: `${url}/v1`, OPENAI_API_KEY: 'dummy-key', AIDER_FAKE_RETRY_TIMEOUT: '4' }),
  envWithoutLogin: () => ({ OPENAI_API_BASE: `${url}/v1`, AIDER_FAKE_RETRY_TIMEOUT: '4' }),
  // aider talks to any of LiteLLM's providers: the API says there is no key.
  missingLogin: /AuthenticationError/,
};
