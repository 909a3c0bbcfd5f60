// The `command` agent: any program that follows forkflush's contract (README, "The command agent").
// It reports its own spend in the budget's unit, in $FORKFLUSH_USAGE_FILE.
import { failureLine } from '../core/text.js';
import { readRegular } from '../io/agent-files.js';
import { couldNotStart } from '../io/process.js';
import type { AgentOutcome } from './agent.js';
import { defineAgent, launch, stopExit } from './session.js';

export function commandAgent(command: string) {
  return defineAgent({
    kind: 'command',
    // Only what the user lists in agent.env: a command agent's keys are the user's to name.
    passEnv: [],
    maxTurns: undefined,
    async run(s): Promise<AgentOutcome> {
      const watched = s.unit === 'tokens' || s.unit === 'usd';
      const { run: r, notes } = await launch(s, {
        executable: '/bin/sh',
        args: ['-c', command],
        env: {},
        input: s.prompt,
        maxOutput: 64_000,
        // Tokens and money are what the agent says it spent: watch the usage file.
        ...(watched
          ? {
              pollMs: 200,
              meter: async () => {
                const spent = await readUsage(s.usageFile);
                if (typeof spent !== 'number') return null;
                return s.unit === 'tokens'
                  ? { inputTokens: spent, outputTokens: 0, costUsd: null, turns: 0 }
                  : { inputTokens: 0, outputTokens: 0, costUsd: spent, turns: 0 };
              },
            }
          : {}),
      });
      const usage = await readUsage(s.usageFile);
      const seconds = r.ms / 1000;
      const exit = stopExit(r, s.deadlineIsBudget) ?? (r.spawnError || r.exitCode !== 0 ? 'crash' : 'finished');
      if (exit === 'crash' && r.stopped === null) {
        const tail = failureLine(r.stderr);
        notes.unshift(
          `agent exited with ${r.spawnError ?? (r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`)}${tail ? `: ${tail.slice(0, 200)}` : ''}`,
        );
      }
      let reportedSpend: number | null = null;
      // One that could not start spent nothing (worker/episode.ts charges it nothing).
      const notStarted = r.stopped === null && couldNotStart(r);
      if (typeof usage === 'number') reportedSpend = watched ? usage : null;
      else if (watched && !notStarted) {
        const why = usage === undefined ? 'wrote no usage file' : `wrote an unreadable usage file (${usage.error})`;
        notes.push(`the agent ${why}`);
      }
      return { exit, reportedSpend, seconds, ...(notes.length > 0 ? { note: notes.join('; ') } : {}) };
    },
  });
}

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
