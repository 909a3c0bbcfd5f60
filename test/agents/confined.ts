// The spawner an episode gives its agent: the real CLIs run in forkflush's sandbox here, as they do
// in a run (home hidden, a PID namespace, the test's folder the only place to write, no forge
// token whatever the session's environment holds). Where the machine has no working bubblewrap
// this says so loudly and runs them unconfined.
import type { AgentSession } from '../../src/agents/agent.js';
import type { Config } from '../../src/core/config.js';
import { NO_ACCOUNT } from '../../src/io/sandbox.js';
import { agentConfinement, isolationFor, sessionSpawner } from '../../src/worker/boundary.js';

const isolation = await isolationFor('auto');
if (!isolation.sandbox) {
  console.warn(`\n*** agent tests run WITHOUT the sandbox: ${isolation.warning} ***\n`);
}

// One account for every session of this test file: they run one after another.
const account = isolation.sandbox?.account() ?? NO_ACCOUNT;

const NO_EXTRA = { sandbox: { mode: 'auto', read: [], write: [] } } as unknown as Config;

/** `spawn` and `confined` for a session whose files all live under `folder`. */
export function confinedSpawn(folder: string): Pick<AgentSession, 'spawn' | 'confined'> {
  const confinement = {
    ...agentConfinement(
      { workspace: folder, context: folder, box: folder, objects: [], private: [] },
      NO_EXTRA,
      process.env,
    ),
    account,
  };
  confinement.tmp = folder;
  return { spawn: sessionSpawner(isolation.sandbox, confinement, []), confined: isolation.sandbox !== null };
}
