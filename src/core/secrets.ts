// Names of environment variables that hold forge credentials or forkflush's own keys. No list in
// a config can pass them to an agent or a grader (core/config.ts refuses names and prefixes that
// cover them; worker/env.ts drops them again).

/** Credentials by name: the forge's tokens, the Actions runtime's, the app's keys. */
const NAMES = [
  'GITHUB_TOKEN',
  'GH_TOKEN',
  'GH_ENTERPRISE_TOKEN',
  'GITHUB_ENTERPRISE_TOKEN',
  'ACTIONS_RUNTIME_TOKEN',
  'ACTIONS_ID_TOKEN_REQUEST_TOKEN',
  'ACTIONS_ID_TOKEN_REQUEST_URL',
  'ACTIONS_RUNTIME_URL',
  'ACTIONS_CACHE_URL',
  'ACTIONS_RESULTS_URL',
  'PRIVATE_KEY',
  'WEBHOOK_SECRET',
  'APP_ID',
];
/** Ours, all of them: the context and record keys, and the contract variables the worker sets itself. */
const OURS = 'FORKFLUSH_';
/** An Action's inputs: those whose name says token, key or secret. */
const INPUTS = 'INPUT_';
const SECRET_INPUT = /^INPUT_.*(TOKEN|KEY|SECRET).*$/;

export function isForgeSecret(name: string): boolean {
  return NAMES.includes(name) || name.startsWith(OURS) || SECRET_INPUT.test(name);
}

/**
 * A credential that a variable-name prefix (as in `agent.env: [AWS_*]`) would let through, or null:
 * `G*` covers GITHUB_TOKEN, `INPUT_*` the Action's token input, `F*` forkflush's keys.
 */
export function coveredSecret(prefix: string): string | null {
  const named = NAMES.find((n) => n.startsWith(prefix));
  if (named) return named;
  for (const family of [OURS, INPUTS]) {
    if (family.startsWith(prefix) || prefix.startsWith(family)) return `${family}…`;
  }
  return null;
}
