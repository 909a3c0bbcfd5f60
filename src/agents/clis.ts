// What a user needs for each agent kind: the CLI it starts when agent.command does not name one,
// how to install it (the pre-flight says so when it is missing), the secret its GitHub worker
// step reads (`forkflush init --github` writes it; README, "Keys and logins"), and the package and
// version forkflush was tested with: `npm run test:agents` installs exactly these
// (scripts/install-agent-clis.mjs reads them from this file), and the Action installs the one its
// run's config names (src/action/agent-install.ts). This file imports nothing, so that the
// script can read it as it is.

/** How a CLI's package is installed: npm (a global install under a prefix), or pip (in a virtual environment). */
export type CliInstaller = 'npm' | 'pip';

export const AGENT_CLIS = {
  'claude-code': {
    executable: 'claude',
    install: 'npm i -g @anthropic-ai/claude-code',
    package: '@anthropic-ai/claude-code',
    version: '2.1.332',
    installer: 'npm',
    secret: { name: 'ANTHROPIC_API_KEY', note: 'or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`' },
  },
  codex: {
    executable: 'codex',
    install: 'npm i -g @openai/codex',
    package: '@openai/codex',
    version: '0.171.0',
    installer: 'npm',
    secret: { name: 'OPENAI_API_KEY', note: 'or CODEX_AUTH_JSON, the content of ~/.codex/auth.json' },
  },
  copilot: {
    executable: 'copilot',
    install: 'npm i -g @github/copilot',
    package: '@github/copilot',
    version: '1.0.102',
    installer: 'npm',
    secret: { name: 'COPILOT_GITHUB_TOKEN', note: 'a fine-grained token with the Copilot Requests permission' },
  },
  gemini: {
    executable: 'gemini',
    install: 'npm i -g @google/gemini-cli',
    package: '@google/gemini-cli',
    version: '0.61.0',
    installer: 'npm',
    secret: { name: 'GEMINI_API_KEY', note: 'or GEMINI_OAUTH_CREDS, the content of ~/.gemini/oauth_creds.json' },
  },
  aider: {
    executable: 'aider',
    install: 'pip install aider-chat',
    package: 'aider-chat',
    // Not tested against the real aider: PyPI cannot be reached where forkflush is developed, so
    // its adapter is tested against a fake built from aider's documentation and source
    // (test/fixtures/agents/aider/). This is the newest release when that was written.
    version: '0.86.2',
    installer: 'pip',
    secret: { name: 'OPENAI_API_KEY', note: 'or the key of the model aider uses' },
  },
  opencode: {
    executable: 'opencode',
    install: 'npm i -g opencode-ai',
    package: 'opencode-ai',
    version: '1.18.33',
    installer: 'npm',
    secret: { name: 'ANTHROPIC_API_KEY', note: "or the key of opencode's provider, or OPENCODE_AUTH_CONTENT" },
  },
} as const satisfies Record<
  string,
  {
    executable: string;
    install: string;
    package: string;
    version: string;
    installer: CliInstaller;
    secret: { name: string; note: string };
  }
>;

export type CliKind = keyof typeof AGENT_CLIS;
