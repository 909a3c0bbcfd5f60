// The spawner an episode gives its agent: the real CLIs run in forkflush's sandbox here, as they do
// in a run (home hidden, a PID namespace, the test's folder the only place to write, no forge
// token whatever the session's environment holds), with no network of their own: they reach their
// mock model through forkflush's egress proxy, which holds their keys (worker/egress.ts). Where
// the machine has no working bubblewrap this says so loudly and runs them unconfined.
import { afterAll } from 'vitest';
import type { AgentSession } from '../../src/agents/agent.js';
import type { Config } from '../../src/core/config.js';
import { NO_ACCOUNT } from '../../src/io/sandbox.js';
import { agentConfinement, isolationFor, sessionSpawner } from '../../src/worker/boundary.js';
import { type Egress, startEgress } from '../../src/worker/egress.js';

const isolation = await isolationFor('auto');
if (!isolation.sandbox) {
  console.warn(`\n*** agent tests run WITHOUT the sandbox: ${isolation.warning} ***\n`);
}

// One account for every session of this test file: they run one after another.
const account = isolation.sandbox?.account() ?? NO_ACCOUNT;

const NO_EXTRA = { sandbox: { mode: 'auto', read: [], write: [] } } as unknown as Config;

/** Every proxy a session of this test file started: closed when the file is done. */
const proxies = new Set<Egress>();
afterAll(async () => {
  for (const e of proxies) await e.close();
});

/** What the proxies of this file's sessions refused so far (the CLI asked for a host its kind does not allow); null: nothing. */
export function refusedSoFar(): string | null {
  return [...proxies].find((e) => e.refusedCount() > 0)?.note() ?? null;
}

/**
 * `spawn`, `confined` and `env` for a session of an agent of `kind` whose files all live under
 * `folder`: its environment `env` as the proxy gives it to the agent (placeholders for its keys,
 * its base URL and proxy variables at the proxy).
 */
export async function confinedSession(
  folder: string,
  kind: Config['agent']['kind'],
  env: NodeJS.ProcessEnv,
): Promise<Pick<AgentSession, 'spawn' | 'confined' | 'env' | 'keys'>> {
  const egress = await startEgress({
    config: {
      agent: { kind } as Config['agent'],
      setup: { commands: [] } as unknown as Config['setup'],
      sandbox: NO_EXTRA.sandbox,
    },
    env,
    sandboxed: isolation.sandbox !== null,
  });
  proxies.add(egress);
  const confinement = {
    ...agentConfinement(
      { workspace: folder, context: folder, box: folder, objects: [], private: [] },
      NO_EXTRA,
      process.env,
    ),
    account,
  };
  confinement.tmp = folder;
  if (egress.bind) confinement.shared = [...(confinement.shared ?? []), egress.bind];
  return {
    spawn: sessionSpawner(isolation.sandbox, confinement, null, undefined, egress.wrap),
    confined: isolation.sandbox !== null,
    env: egress.env,
    keys: egress.keys,
  };
}
