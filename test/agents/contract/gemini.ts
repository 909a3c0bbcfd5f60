// Gemini CLI (the real CLI) against a scripted Gemini API (mock/gemini.ts).
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { adapterFor } from '../../../src/agents/specs.js';
import type { Config } from '../../../src/core/config.js';
import {
  callRoundsSincePrompt,
  type GeminiContent,
  type GenerateContentBody,
  geminiHandler,
  isStreamCall,
} from '../mock/gemini.js';
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

export const GEMINI = join(CLI_BIN, 'gemini');
export const MODEL = 'gemini-2.5-flash';
const USAGE = { promptTokenCount: 1200, candidatesTokenCount: 80, thoughtsTokenCount: 20 };

/** The prompts of a request (user texts other than the CLI's session context). */
export function geminiPrompts(contents: GeminiContent[]): string[] {
  return contents
    .filter((c) => c.role === 'user')
    .flatMap((c) => c.parts.map((p) => p.text))
    .filter((t): t is string => t !== undefined && !t.startsWith('<session_context>'))
    .map((t) => t.trim());
}

const model = new ModelControl(
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
    errorBody: (status, message) => ({
      error: { code: status, message, status: status === 401 ? 'UNAUTHENTICATED' : 'INVALID_ARGUMENT' },
    }),
  },
  (control) =>
    geminiHandler((body: GenerateContentBody) => {
      const k = scaleOf(control.plan);
      const usage = {
        promptTokenCount: USAGE.promptTokenCount * k,
        candidatesTokenCount: USAGE.candidatesTokenCount * k,
        thoughtsTokenCount: USAGE.thoughtsTokenCount * k,
      };
      const turn = shellTurn(control.plan, callRoundsSincePrompt(body));
      return 'shell' in turn
        ? { functionCalls: [{ name: 'run_shell_command', args: { command: turn.shell, description: 'Work' } }], usage }
        : { text: turn.text, usage };
    }),
);

let url = '';
let root = '';

export const geminiHarness: AgentHarness & { root: () => string } = {
  kind: 'gemini',
  shell: true,
  workCalls: 2,
  perCall: { input: USAGE.promptTokenCount, output: USAGE.candidatesTokenCount + USAGE.thoughtsTokenCount },
  model,
  root: () => root,
  async start() {
    requireCli(GEMINI);
    url = await model.server.start();
    root = await tempRoot('gemini');
  },
  async stop() {
    await model.server.stop();
    if (root) await rm(root, { recursive: true, force: true });
  },
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({ kind: 'gemini', command: GEMINI, model: MODEL, args: [], env: [], timeout: 1800, ...over }),
  env: () => ({ GOOGLE_GEMINI_BASE_URL: url, GEMINI_API_KEY: 'dummy-key' }),
  envWithoutLogin: () => ({ GOOGLE_GEMINI_BASE_URL: url }),
  missingLogin: /Gemini CLI has no API key and no login: set GEMINI_API_KEY, or log in with Google/,
  // Seen with 0.61.0: a 429, a 529 and a dropped connection are all retried past a 150 s deadline.
  outlasts: { 'rate-limit': 'timeout', overload: 'timeout', network: 'timeout' },

  // Login with Google: the OAuth files are copied into the episode and the CLI, set to use them,
  // checks the token with Google at start-up (seen through the proxy; this machine is offline,
  // so the CLI then stops), and the copies are gone from the context afterwards.
  async login(t) {
    const user = await t.folder('user-gemini');
    await mkdir(join(user, '.gemini'));
    const creds = {
      access_token: 'ya29.from-the-login',
      refresh_token: '1//never-used',
      scope: 'https://www.googleapis.com/auth/cloud-platform',
      token_type: 'Bearer',
      expiry_date: Date.now() + 3_600_000,
    };
    await writeFile(join(user, '.gemini', 'oauth_creds.json'), JSON.stringify(creds), { mode: 0o600 });
    const proxy = new MockModelServer((_req, res) => void res.writeHead(502).end());
    const proxyUrl = await proxy.start();
    const saved = process.env.GEMINI_CLI_HOME;
    process.env.GEMINI_CLI_HOME = user;
    try {
      const ctx = await t.folder('ctx');
      const { out } = await episode(
        geminiHarness,
        await t.session(await t.repo(), ctx, {}, { ...geminiHarness.envWithoutLogin(), HTTPS_PROXY: proxyUrl }),
      );
      expect(out.exit).toBe('crash');
      expect(proxy.connects).toContain('oauth2.googleapis.com:443');
      await expect(stat(join(ctx, 'home', '.gemini', 'oauth_creds.json'))).rejects.toThrow(/ENOENT/);
    } finally {
      if (saved === undefined) delete process.env.GEMINI_CLI_HOME;
      else process.env.GEMINI_CLI_HOME = saved;
      await proxy.stop();
    }
  },
};
