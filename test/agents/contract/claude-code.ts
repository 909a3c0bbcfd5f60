// Claude Code (the real CLI) against a scripted Anthropic Messages API (mock/anthropic.ts).
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { adapterFor } from '../../../src/agents/specs.js';
import type { Config } from '../../../src/core/config.js';
import { anthropicError, anthropicMessages, conversationText, isMessagesCall, userTexts } from '../mock/anthropic.js';
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

export const CLAUDE = join(CLI_BIN, 'claude');
const USAGE = { input_tokens: 1200, output_tokens: 80, cache_read_input_tokens: 300 };

const model = new ModelControl(
  {
    isModelCall: isMessagesCall,
    view: (req) => ({
      // Claude Code adds <system-reminder> blocks of its own as user text.
      prompts: userTexts(req)
        .map((t) => t.trim())
        .filter((t) => !t.startsWith('<')),
      answered: (req.body?.messages ?? []).some((m: { role: string }) => m.role === 'assistant'),
      text: conversationText(req),
      credential: (req.headers['x-api-key'] as string | undefined) ?? req.headers.authorization,
    }),
    errorBody: anthropicError,
  },
  (control) =>
    anthropicMessages((_req, step) => {
      const k = scaleOf(control.plan);
      const usage = {
        input_tokens: USAGE.input_tokens * k,
        output_tokens: USAGE.output_tokens * k,
        cache_read_input_tokens: USAGE.cache_read_input_tokens * k,
      };
      const turn = shellTurn(control.plan, step);
      return { step: 'shell' in turn ? { tool: 'Bash', command: turn.shell } : { text: turn.text }, usage };
    }),
);

let url = '';
let root = '';

export const claudeHarness: AgentHarness & { root: () => string; tmp: () => string } = {
  kind: 'claude-code',
  shell: true,
  workCalls: 2,
  perCall: { input: USAGE.input_tokens + USAGE.cache_read_input_tokens, output: USAGE.output_tokens },
  model,
  root: () => root,
  tmp: () => join(root, 'claude-tmp'),
  async start() {
    requireCli(CLAUDE);
    url = await model.server.start();
    root = await tempRoot('claude');
    // Claude Code's per-user scratch folder (CLAUDE_CODE_TMPDIR), inside the test's root.
    await mkdir(join(root, 'claude-tmp'), { mode: 0o700 });
  },
  async stop() {
    await model.server.stop();
    if (root) await rm(root, { recursive: true, force: true });
  },
  adapter: (over: Partial<Config['agent']> = {}) =>
    adapterFor({ kind: 'claude-code', command: CLAUDE, args: [], env: [], timeout: 60, ...over }),
  env: () => ({
    ANTHROPIC_BASE_URL: url,
    ANTHROPIC_API_KEY: 'sk-ant-dummy-for-the-mock',
    CLAUDE_CODE_TMPDIR: join(root, 'claude-tmp'),
  }),
  envWithoutLogin: () => ({ ANTHROPIC_BASE_URL: url, CLAUDE_CODE_TMPDIR: join(root, 'claude-tmp') }),
  // Seen with 2.1.332 against the mock: a 401 is retried with backoff until the episode's deadline.
  retriesRefusedKey: true,
  // Seen with 2.1.332: a 429 (retry-after 1) and a dropped connection are retried past a 150 s
  // deadline; a 529 it gives up on within it.
  outlasts: { 'rate-limit': 'timeout', network: 'timeout' },
  missingLogin: /Claude Code has no API key and no login: set ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN/,

  // A Claude subscription's credentials file in the user's config folder: copied into the
  // episode, used as the bearer token, gone from the context afterwards; CLAUDE_CODE_OAUTH_TOKEN too.
  async login(t) {
    const user = await t.folder('user-claude');
    const credentials = {
      claudeAiOauth: {
        accessToken: 'sk-ant-oat01-from-the-login',
        refreshToken: 'sk-ant-ort01-never-used',
        expiresAt: Date.now() + 3_600_000,
        scopes: ['user:inference', 'user:profile'],
        subscriptionType: 'max',
      },
    };
    const file = join(user, '.credentials.json');
    await writeFile(file, JSON.stringify(credentials), { mode: 0o600 });
    const saved = process.env.CLAUDE_CONFIG_DIR;
    process.env.CLAUDE_CONFIG_DIR = user;
    try {
      const ws = await t.repo();
      const ctx = await t.folder('ctx');
      model.work('login.txt', '1');
      const { out, calls } = await episode(
        claudeHarness,
        await t.session(ws, ctx, {}, claudeHarness.envWithoutLogin()),
      );
      expect(out.exit, out.note).toBe('finished');
      expect(calls.map((c) => c.credential)).toEqual(calls.map(() => 'Bearer sk-ant-oat01-from-the-login'));
      await expect(stat(join(ctx, 'home', '.credentials.json'))).rejects.toThrow(/ENOENT/);
      expect(JSON.parse(await readFile(file, 'utf8'))).toEqual(credentials);
    } finally {
      if (saved === undefined) delete process.env.CLAUDE_CONFIG_DIR;
      else process.env.CLAUDE_CONFIG_DIR = saved;
    }
    // A long-lived token from `claude setup-token` passes through as it is.
    model.answer('Hello.');
    const { out, calls } = await episode(
      claudeHarness,
      await t.session(
        await t.repo(),
        await t.folder('ctx'),
        {},
        { ...claudeHarness.envWithoutLogin(), CLAUDE_CODE_OAUTH_TOKEN: 'sk-ant-oat01-setup-token' },
      ),
    );
    expect(out.exit, out.note).toBe('finished');
    expect(calls[0]?.credential).toBe('Bearer sk-ant-oat01-setup-token');
  },
};
