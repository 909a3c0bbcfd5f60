// Running the grader: the user's command, in a folder, bounded by grader.timeout, and confined
// (when the run has a sandbox) since it runs code the agent wrote.
import type { Config } from '../core/config.js';
import { parseScore } from '../core/score.js';
import { failureLine } from '../core/text.js';
import { runShell } from '../io/process.js';
import type { Confinement, Sandbox } from '../io/sandbox.js';

export interface Grading {
  score: number | null;
  reason?: string;
  seconds: number;
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

export async function runGrader(
  config: Config,
  workdir: string,
  env: NodeJS.ProcessEnv,
  confine?: { sandbox: Sandbox; confinement: Confinement },
  signal?: AbortSignal,
): Promise<Grading> {
  const g = config.grader;
  const r = await runShell(g.command, {
    cwd: workdir,
    env,
    timeoutMs: g.timeout * 1000,
    maxOutput: 1_000_000,
    ...(signal ? { signal } : {}),
    ...(confine ? { confine } : { track: true }),
  });
  const base = { seconds: r.ms / 1000, exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr };
  if (r.stopped === 'timeout') return { ...base, score: null, reason: `the grader timed out after ${g.timeout} s` };
  if (r.spawnError) return { ...base, score: null, reason: `the grader could not start: ${r.spawnError}` };
  if (r.exitCode !== 0) {
    const tail = failureLine(r.stderr.trim() ? r.stderr : r.stdout, 200);
    const how = r.signal ? `was killed by ${r.signal}` : `exited with code ${r.exitCode}`;
    return { ...base, score: null, reason: `the grader ${how}${tail ? `: ${tail}` : ''}` };
  }
  const reading = parseScore(r.stdout);
  return reading.score === null ? { ...base, score: null, reason: reading.reason } : { ...base, score: reading.score };
}
