// Names of environment variables that hold forge credentials or forkflush's own keys. No list in
// a config can pass them to an agent or a grader (core/config.ts refuses them; worker/env.ts
// drops them again).
const FORGE_SECRETS = [
  /^GITHUB_TOKEN$/,
  /^GH_TOKEN$/,
  /^GH_ENTERPRISE_TOKEN$/,
  /^GITHUB_ENTERPRISE_TOKEN$/,
  /^ACTIONS_RUNTIME_TOKEN$/,
  /^ACTIONS_ID_TOKEN_REQUEST_(TOKEN|URL)$/,
  /^ACTIONS_(RUNTIME|CACHE|RESULTS)_URL$/,
  /^INPUT_.*(TOKEN|KEY|SECRET).*$/,
  // Ours: the context and record keys, and the contract variables the worker sets itself.
  /^FORKFLUSH_/,
  /^PRIVATE_KEY$/,
  /^WEBHOOK_SECRET$/,
  /^APP_ID$/,
];

export function isForgeSecret(name: string): boolean {
  return FORGE_SECRETS.some((re) => re.test(name));
}
