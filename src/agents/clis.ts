// What a user needs for each agent kind: the CLI it starts when agent.command does not name one,
// how to install it (the pre-flight says so when it is missing), and the secret its GitHub worker
// step reads (`forkflush init --github` writes it; README, "Keys and logins").
export const AGENT_CLIS = {
  'claude-code': {
    executable: 'claude',
    install: 'npm i -g @anthropic-ai/claude-code',
    secret: { name: 'ANTHROPIC_API_KEY', note: 'or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`' },
  },
  codex: {
    executable: 'codex',
    install: 'npm i -g @openai/codex',
    secret: { name: 'OPENAI_API_KEY', note: 'or CODEX_AUTH_JSON, the content of ~/.codex/auth.json' },
  },
  copilot: {
    executable: 'copilot',
    install: 'npm i -g @github/copilot',
    secret: { name: 'COPILOT_GITHUB_TOKEN', note: 'a fine-grained token with the Copilot Requests permission' },
  },
  gemini: {
    executable: 'gemini',
    install: 'npm i -g @google/gemini-cli',
    secret: { name: 'GEMINI_API_KEY', note: 'or GEMINI_OAUTH_CREDS, the content of ~/.gemini/oauth_creds.json' },
  },
  aider: {
    executable: 'aider',
    install: 'pip install aider-chat',
    secret: { name: 'OPENAI_API_KEY', note: 'or the key of the model aider uses' },
  },
  opencode: {
    executable: 'opencode',
    install: 'npm i -g opencode-ai',
    secret: { name: 'ANTHROPIC_API_KEY', note: "or the key of opencode's provider, or OPENCODE_AUTH_CONTENT" },
  },
} as const;
