// What the job's processes may see. The token is needed by this process only, and the runner's
// file commands (GITHUB_ENV, GITHUB_OUTPUT, ...) belong to this step, not to the agent.
import { sandboxEnv } from '../worker/env.js';

/**
 * Removes forge credentials (the token input, GITHUB_TOKEN, the Actions runtime tokens) from this
 * process's environment once they are read, so that no child process inherits them: not the
 * agent, and not a git command running in a checkout whose config the agent could have changed.
 */
export function forgetForgeSecrets(env: NodeJS.ProcessEnv): void {
  const kept = sandboxEnv(env);
  for (const name of Object.keys(env)) {
    // FORKFLUSH_ variables are no secret; sandboxEnv drops them only because the worker sets its own.
    if (!(name in kept) && !name.startsWith('FORKFLUSH_')) delete env[name];
  }
}

/**
 * Files through which a step sets the job's environment, PATH, outputs and summary. An agent
 * that wrote to them could change the outputs forkflush reports or the environment of the
 * job's later steps.
 */
const RUNNER_FILE_COMMANDS = ['GITHUB_ENV', 'GITHUB_PATH', 'GITHUB_OUTPUT', 'GITHUB_STATE', 'GITHUB_STEP_SUMMARY'];

/** The environment the agent and the grader start from (the worker then removes forge secrets). */
export function agentEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const name of RUNNER_FILE_COMMANDS) delete out[name];
  return out;
}
