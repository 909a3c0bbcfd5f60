// The `command` agent: any program that follows forkflush's contract (README, "The command agent").
// It reports its own spend in the budget's unit, in $FORKFLUSH_USAGE_FILE; its context folder is
// its own to use.

import { readRegular } from '../io/agent-reads.js';
import { ANTHROPIC, GEMINI, OPENAI } from './model-apis.js';
import { defineSpec } from './spec.js';

export const command = defineSpec({
  kind: 'command',
  name: 'agent',
  // Only what the user lists in agent.env: a command agent's keys are the user's to name.
  passEnv: [],
  egress: {
    hosts: [],
    // The SDKs' own variables: a program that takes its base URL from them works through the proxy.
    routes: [ANTHROPIC, OPENAI, GEMINI],
    notProxied: 'any other key agent.env lists: forkflush cannot know where the program sends it',
  },
  // What it printed is its answer.
  finalMessage: (stdout) => stdout,
  async start(e) {
    // Tokens and money are what the agent says it spent: the usage file, watched.
    const watched = e.unit === 'tokens' || e.unit === 'usd';
    let problem = 'the agent wrote no usage file';
    return {
      executable: '/bin/sh',
      args: ['-c', e.agent.command ?? ''],
      input: e.prompt,
      pollMs: 200,
      ...(watched
        ? {
            spent: async () => {
              const spent = await readUsage(e.usageFile);
              if (typeof spent !== 'number') {
                if (spent) problem = `the agent wrote an unreadable usage file (${spent.error})`;
                return null;
              }
              return { tally: {}, spend: spent };
            },
            noUsage: () => problem,
          }
        : {}),
    };
  },
});

/** The spend in a usage file: a number, undefined when there is no file, or why it cannot be read. */
async function readUsage(file: string): Promise<number | undefined | { error: string }> {
  // The agent wrote it: read it as a regular file only, and only its start.
  const text = await readRegular(file, 64_000);
  if (text === null) return undefined;
  try {
    const spent = (JSON.parse(text) as { spent?: unknown }).spent;
    if (typeof spent === 'number' && Number.isFinite(spent) && spent >= 0) return spent;
    return { error: `expected {"spent": <number>}, got ${text.trim().slice(0, 60)}` };
  } catch {
    return { error: `not JSON: ${text.trim().slice(0, 60)}` };
  }
}
