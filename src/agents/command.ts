// The `command` agent: any program that follows forkflush's contract (README, "The command agent").
import { readRegular } from '../io/agent-files.js';
import { type AgentAdapter, type AgentOutcome, type AgentSession, forkflushVars, stopExit } from './agent.js';

const USAGE_POLL_MS = 200;

export function commandAgent(command: string): AgentAdapter {
  return {
    kind: 'command',
    // Only what the user lists in agent.env: a command agent's keys are the user's to name.
    passEnv: [],
    async run(s: AgentSession): Promise<AgentOutcome> {
      const env: NodeJS.ProcessEnv = {
        ...s.env,
        ...forkflushVars(s),
      };
      // Tokens and money are what the agent says it spent: watch the usage file and stop an overrun.
      const overrun = new AbortController();
      const watched = s.unit === 'tokens' || s.unit === 'usd';
      const poll = watched
        ? setInterval(async () => {
            const usage = await readUsage(s.usageFile);
            if (typeof usage === 'number' && usage > s.allowance) overrun.abort('budget');
          }, USAGE_POLL_MS)
        : undefined;
      const r = await s.spawn('/bin/sh', ['-c', command], {
        cwd: s.workdir,
        env,
        input: s.prompt,
        timeoutMs: s.deadlineMs,
        signal: AbortSignal.any([s.signal, overrun.signal]),
        logFile: s.logFile,
        maxOutput: 64_000,
      });
      if (poll) clearInterval(poll);
      const usage = await readUsage(s.usageFile);
      const seconds = r.ms / 1000;
      const exit = stopExit(r, s.deadlineIsBudget) ?? (r.spawnError || r.exitCode !== 0 ? 'crash' : 'finished');
      const crashNote =
        exit === 'crash' && r.stopped === null
          ? `agent exited with ${r.spawnError ?? (r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`)}${lastLine(r.stderr)}`
          : undefined;
      if (!watched) return { exit, reportedSpend: null, seconds, ...(crashNote ? { note: crashNote } : {}) };
      if (typeof usage === 'number')
        return { exit, reportedSpend: usage, seconds, ...(crashNote ? { note: crashNote } : {}) };
      const why = usage === undefined ? 'wrote no usage file' : `wrote an unreadable usage file (${usage.error})`;
      return {
        exit,
        reportedSpend: null,
        seconds,
        note: [crashNote, `the agent ${why}; charged its whole allowance`].filter(Boolean).join('; '),
      };
    },
  };
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

function lastLine(stderr: string): string {
  const line = stderr.trim().split('\n').at(-1)?.trim();
  return line ? `: ${line.slice(0, 200)}` : '';
}
