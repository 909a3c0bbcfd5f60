// What the job's processes may see. The token is needed by this process only: the agent's and
// the grader's environments are allowlists (worker/env.ts) that never hold it, and this removes
// it from forkflush's own environment too, so no git command it runs inherits it.
import { isForgeSecret } from '../core/secrets.js';

/**
 * Removes forge credentials (the token input, GITHUB_TOKEN, the Actions runtime tokens) from this
 * process's environment once they are read. FORKFLUSH_ variables stay: they are forkflush's.
 */
export function forgetForgeSecrets(env: NodeJS.ProcessEnv): void {
  for (const name of Object.keys(env)) {
    if (isForgeSecret(name) && !name.startsWith('FORKFLUSH_')) delete env[name];
  }
}
