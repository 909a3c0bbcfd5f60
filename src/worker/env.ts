// What the agent and the grader may see of our environment: everything but credentials to the
// forge (GitHub tokens, Actions runtime tokens) and forkflush's own variables.
const FORGE_SECRETS = [
  /^GITHUB_TOKEN$/,
  /^GH_TOKEN$/,
  /^GH_ENTERPRISE_TOKEN$/,
  /^GITHUB_ENTERPRISE_TOKEN$/,
  /^ACTIONS_RUNTIME_TOKEN$/,
  /^ACTIONS_ID_TOKEN_REQUEST_(TOKEN|URL)$/,
  /^ACTIONS_(RUNTIME|CACHE|RESULTS)_URL$/,
  /^INPUT_.*(TOKEN|KEY|SECRET).*$/,
  /^FORKFLUSH_/,
  /^PRIVATE_KEY$/,
  /^WEBHOOK_SECRET$/,
  /^APP_ID$/,
];

export function sandboxEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) if (!FORGE_SECRETS.some((re) => re.test(k))) out[k] = v;
  return out;
}
