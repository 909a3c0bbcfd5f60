// Running the grader: the user's command, in a folder, bounded by grader.timeout, and confined
// (when the run has a sandbox) since it runs code the agent wrote. The judge's grading is
// watched from outside, and tried once more when it failed for want of a resource
// (core/resources.ts decides whose failure it was).

import { FAILURE_LINE_MAX_CHARS, GRADER_OUTPUT_MAX_CHARS, MACHINE_SHORTAGE_PAUSE_MS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import {
  type JudgeAttempt,
  machineShort,
  type Resource,
  resourceSigns,
  retryJudge,
  settleJudge,
} from '../core/resources.js';
import { parseScore } from '../core/score.js';
import { failureLine } from '../core/text.js';
import { type WatchMachine, watchMachine } from '../io/machine.js';
import { runShell } from '../io/process.js';
import type { Confinement, Sandbox } from '../io/sandbox.js';

export interface Grading {
  score: number | null;
  reason?: string;
  seconds: number;
  exitCode: number | null;
  /** The signal that ended the grader (SIGKILL: the OOM killer, say), or null. */
  signal: NodeJS.Signals | null;
  /** Stopped at grader.timeout. */
  timedOut?: true;
  /** Why forkflush could not start it (spawn's error: EAGAIN when forkflush itself cannot fork). */
  startError?: string;
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
    maxOutput: GRADER_OUTPUT_MAX_CHARS,
    ...(signal ? { signal } : {}),
    ...(confine ? { confine } : { track: true }),
  });
  const base = { seconds: r.ms / 1000, exitCode: r.exitCode, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
  if (r.stopped === 'timeout')
    return { ...base, score: null, reason: `the grader timed out after ${g.timeout} s`, timedOut: true };
  if (r.spawnError)
    return { ...base, score: null, reason: `the grader could not start: ${r.spawnError}`, startError: r.spawnError };
  if (r.exitCode !== 0) {
    const how = r.signal ? `was killed by ${r.signal}` : `exited with code ${r.exitCode}`;
    // A score on stdout and nothing on stderr: quoting "1" as the error would mislead.
    const printed = r.stderr.trim() ? null : parseScore(r.stdout).score;
    if (printed !== null && printed !== undefined)
      return {
        ...base,
        score: null,
        reason: `the grader ${how} after printing the score ${printed} (a grader that fails gets no score)`,
      };
    const tail = failureLine(r.stderr.trim() ? r.stderr : r.stdout, FAILURE_LINE_MAX_CHARS);
    return { ...base, score: null, reason: `the grader ${how}${tail ? `: ${tail}` : ''}` };
  }
  const reading = parseScore(r.stdout, r.outputCut ? GRADER_OUTPUT_MAX_CHARS : null);
  return reading.score === null ? { ...base, score: null, reason: reading.reason } : { ...base, score: reading.score };
}

/** A judge's grading: its setup (when the config has one) and its grader, in a fresh checkout. */
export type JudgeGrading = Grading & { setupLog?: string; setupFailed?: boolean };

/** How a judge sees the machine: its watch, and the pause a machine found short gets before the second try. */
export interface JudgeMachine {
  watch: WatchMachine;
  pauseMs: number;
}

/** This machine: a shortage gets a few seconds to pass (a sibling's build ending, memory freed). */
export const MACHINE: JudgeMachine = { watch: watchMachine, pauseMs: MACHINE_SHORTAGE_PAUSE_MS };

/**
 * Runs a judge's grading (`attempt`: a fresh checkout each time) while watching the machine
 * (`paths`: the judge's filesystems), and once more when it failed for want of a resource
 * (after a pause when the machine was short). After two failures the machine is blamed only if
 * it was measured short (`machineShort`: the round is then void); otherwise the failure is the
 * branch's own, whatever its output says.
 */
export async function gradeAsJudge(
  attempt: () => Promise<JudgeGrading>,
  paths: string[],
  machine: JudgeMachine = MACHINE,
  signal?: AbortSignal,
): Promise<JudgeGrading & { machineShort?: Resource; note?: string }> {
  const first = await watched(attempt, paths, machine.watch);
  if (!retryJudge(first.as)) return first.grading;
  // A stop cuts the pause short: the second try then ends at once (`attempt` says so).
  if (first.as.short.length > 0) await pause(machine.pauseMs, signal);
  const second = await watched(attempt, paths, machine.watch);
  const verdict = settleJudge(first.as, second.as);
  const { reason: _, ...rest } = second.grading;
  return {
    ...rest,
    score: verdict.score,
    ...(verdict.reason !== undefined ? { reason: verdict.reason } : {}),
    note: verdict.note,
    ...(verdict.machineShort ? { machineShort: verdict.machineShort } : {}),
  };
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

async function watched(
  attempt: () => Promise<JudgeGrading>,
  paths: string[],
  watch: WatchMachine,
): Promise<{ grading: JudgeGrading; as: JudgeAttempt }> {
  const w = watch(paths);
  const grading = await attempt().catch((e: unknown) => {
    w.stop();
    throw e;
  });
  const readings = w.stop();
  // A grader forkflush could not start (spawn EAGAIN: forkflush itself could not fork) failed too.
  const ranAndFailed =
    grading.score === null &&
    grading.timedOut !== true &&
    (grading.setupFailed === true ||
      grading.startError !== undefined ||
      grading.signal !== null ||
      (grading.exitCode !== null && grading.exitCode !== 0));
  const output = grading.setupFailed
    ? (grading.setupLog ?? '')
    : `${grading.startError ?? ''}\n${grading.stdout}\n${grading.stderr}`;
  return {
    grading,
    as: {
      score: grading.score,
      ...(grading.reason !== undefined ? { reason: grading.reason } : {}),
      ranAndFailed,
      signs: ranAndFailed ? resourceSigns(output, grading.signal) : [],
      short: machineShort(readings),
      ...(grading.startError !== undefined ? { startFailed: true } : {}),
    },
  };
}
