// The one door to child processes. It owns timeouts and stops: a command runs in its own process
// group, and stopping it signals the whole group (an agent's tools and a grader's workers too)
// and every descendant that left the group (Codex runs its tools in sessions of their own).
// A confined command runs in the sandbox (io/sandbox.ts), whose PID namespace dies with it; an
// unconfined one's group is kept by group-keeper.ts, should this process be killed.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import {
  DRAIN_POLLS_MAX,
  LOG_MAX_BYTES,
  OUTPUT_DRAIN_MS,
  PROCESS_OUTPUT_MAX_CHARS,
  PROCESS_TRACK_EVERY_MS,
  SECOND_SIGNAL_AFTER_MS,
  STOP_ALL_GRACE_MS,
  STOP_GRACE_MS,
  STOP_PASSES_MAX,
} from '../core/bounds.js';
import { afterAwake } from './awake.js';
import { findExecutable, withoutRelativePaths } from './executables.js';
import { keeperInput, keeperPid, keepGroup, type Launch, releaseGroup, selfKept, startKeeper } from './group-keeper.js';
import { openingPath } from './opening-path.js';
import { descendantProcesses, killAll, killGroup, type ProcessLink, startTime, stillRuns } from './process-tree.js';
import type { Confinement, Sandbox, Wrapped } from './sandbox.js';
import { withFilterAtFd3 } from './seccomp.js';

export interface RunOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Written to stdin, which is then closed. Without it stdin is closed at once. */
  input?: string;
  /** Stop the command after this many milliseconds. */
  timeoutMs?: number;
  /** Stop the command when this aborts; the abort reason is reported as `stopped`. */
  signal?: AbortSignal;
  /** Also write stdout and stderr to this file (for long agent logs), at most LOG_MAX_BYTES of it. */
  logFile?: string;
  /** The most the log file takes (default LOG_MAX_BYTES). */
  logMaxBytes?: number;
  /** Keep at most this many characters of each stream in memory (the end is kept). */
  maxOutput?: number;
  /** Grace period between SIGTERM and SIGKILL. */
  killAfterMs?: number;
  /** Run the command in the sandbox, confined so. */
  confine?: { sandbox: Sandbox; confinement: Confinement };
  /**
   * Unconfined: remember every descendant seen while the command runs and kill those still alive
   * when it ends, so that a daemon it detached (setsid, double fork) does not outlive it. A process
   * that detaches and is re-parented between two looks still escapes: only the sandbox is sure.
   */
  track?: boolean;
}

/** Spawns a command the way runProcess does (an episode's confined spawner has this shape). */
export type Spawner = (file: string, args: string[], options: RunOptions) => Promise<RunResult>;

/** Read by the agents' runner (core/bounds.ts sets it). */
export { LOG_MAX_BYTES };
/** The `stopped` reason of a command whose output passed LOG_MAX_BYTES. */
export const LOG_FULL = 'log-full';

export interface RunResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Why the command was stopped: 'timeout', the abort reason, or null if it ended on its own. */
  stopped: string | null;
  ms: number;
  /** The command could not start at all (e.g. not found). */
  spawnError?: string;
  /** Stopped for time: the path its leader was waiting to open then (a FIFO, say), where Linux tells. */
  blockedOn?: string;
  /** Output was dropped: a stream passed `maxOutput` (its end is kept). */
  outputCut?: true;
  /** Why its log file could not be written (it was then stopped: LOG_FULL). */
  logProblem?: string;
}

/**
 * The leaders of the commands running now (each leads its process group; a confined one is bwrap).
 * What a forkflush that exits without waiting for them must stop first: a command in a group of
 * its own outlives the process that started it.
 */
const running = new Set<number>();
let stopOnExit = false;

/**
 * Stops every command this process started that is still running, and what they started (their
 * groups, and descendants that left them): SIGTERM, a moment for them to clean up (git removes its
 * lock files), then SIGKILL. Synchronous, for a process about to exit.
 */
export function stopAllCommands(graceMs = STOP_ALL_GRACE_MS): void {
  const leaders = [...running];
  if (leaders.length === 0) return;
  const strays = new Map<number, string>();
  for (const pid of leaders) for (const p of descendantProcesses(pid)) strays.set(p.pid, p.start);
  for (const pid of leaders) killGroup(pid, 'SIGTERM');
  killAll(strays, 'SIGTERM');
  const until = Date.now() + graceMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (Date.now() < until && leaders.some((pid) => startTime(pid) !== null)) Atomics.wait(pause, 0, 0, 20);
  for (const pid of leaders) killGroup(pid, 'SIGKILL');
  killAll(strays, 'SIGKILL');
  running.clear();
}

/**
 * After a stop was asked for (SIGTERM, Ctrl-C): if this process has not ended `ms` from now,
 * something it waits for does not listen to the stop. Then it says so, stops every command it
 * started, and exits with `code`. Whatever was saved stays saved (records are written whole or not
 * at all); what was in flight runs again on resume. The timer does not keep the process alive.
 */
export function exitWithin(ms: number, code: number, say: (line: string) => void): void {
  const timer = setTimeout(() => {
    say(`forkflush: still stopping after ${ms / 1000} s; every command it started is stopped now, and it exits`);
    stopAllCommands();
    process.exit(code);
  }, ms);
  timer.unref();
}

/**
 * Ctrl-Z (SIGTSTP): the commands forkflush runs lead process groups of their own, out of the
 * terminal's reach, so they are stopped with it and go on with it: no agent runs on unwatched, past
 * its limits, while forkflush is stopped. (Its limits count awake time: io/awake.ts.)
 */
export function stopWithCommands(): void {
  // Again until every one is stopped: a process may fork while its parent is being stopped, and a
  // new one may continue another already stopped (`kill -CONT -1` in the sandbox).
  const tree = new Map<number, string>();
  // Not the group keeper: stopped, it would leave the commands running if forkflush were killed meanwhile.
  const keeper = keeperPid();
  // A state unknown (no /proc) counts as stopped once signalled.
  const runs = (p: ProcessLink) => (p.state === '' ? !tree.has(p.pid) : !'TtZX'.includes(p.state));
  let running: ProcessLink[] = [];
  for (let pass = 0; pass < STOP_PASSES_MAX; pass++) {
    running = descendantProcesses(process.pid).filter((p) => p.pid !== keeper && runs(p));
    if (running.length === 0) break;
    const found = new Map(running.map((p) => [p.pid, p.start]));
    killAll(found, 'SIGSTOP');
    for (const [pid, start] of found) tree.set(pid, start);
  }
  if (running.length > 0)
    process.stderr.write(`forkflush: ${running.length} of its commands would not stay stopped; they run on\n`);
  // Stopped here until continued (`fg`, `bg`: SIGCONT to forkflush's group alone).
  process.kill(process.pid, 'SIGSTOP');
  killAll(tree, 'SIGCONT');
}

/** Runs a shell command line (sh -c) in its own process group. */
export function runShell(command: string, options: RunOptions): Promise<RunResult> {
  return runProcess('/bin/sh', ['-c', command], options);
}

export function runProcess(file: string, args: string[], options: RunOptions): Promise<RunResult> {
  if (options.confine) {
    const { sandbox, confinement } = options.confine;
    return sandbox
      .handOver(confinement)
      .then(() => spawnAndWait(file, args, options, sandbox.wrap(confinement, options.cwd, file, args)));
  }
  // A long command outside the sandbox tells the keeper its group itself, before it runs.
  if (options.track)
    return findExecutable(file, (options.env ?? process.env).PATH ?? '').then((program) =>
      spawnAndWait(file, args, options, undefined, program ? selfKept(program, args) : undefined),
    );
  return spawnAndWait(file, args, options, undefined);
}

function spawnAndWait(
  file: string,
  args: string[],
  options: RunOptions,
  confined: Wrapped | undefined,
  launch?: Launch,
): Promise<RunResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    // 1. The command, in a process group of its own, remembered as running until it exits.
    const child = startChild(options, confined, launch ?? { file, args });
    // 2. How it is stopped: for time, for the abort signal, or for a log that is full.
    const stopper = stopperFor(child, options, confined);
    // In awake time: a stop of forkflush, or a freeze of the machine, is no time the command used.
    const cancelLimit =
      options.timeoutMs === undefined ? undefined : afterAwake(options.timeoutMs, () => stopper.stop('timeout'));
    const onAbort = () => stopper.stop(String(options.signal?.reason ?? 'aborted'));
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
    // 3. Its output: each stream's end in memory, and all of it in the log file, up to its cap.
    const output = readOutput(child, options, stopper.stop);
    // 4. Its input. EPIPE when a command exits without reading its stdin is expected, not an error.
    child.stdin.on('error', () => {});
    child.stdin.end(options.input ?? '');
    // 5. Its end: the result as it is once the output is given up, handed over once the log is closed.
    const settle = (ended: Ended, spawnError: string | undefined): RunResult => {
      cancelLimit?.();
      stopper.clear();
      options.signal?.removeEventListener('abort', onAbort);
      const logProblem = output.log?.problem();
      return {
        ...ended,
        stdout: output.out.text(),
        stderr: output.err.text(),
        stopped: stopper.stopped(),
        ms: performance.now() - started,
        ...(spawnError ? { spawnError } : {}),
        ...stopper.blocked(),
        ...(output.out.cut || output.err.cut ? { outputCut: true as const } : {}),
        ...(logProblem ? { logProblem } : {}),
      };
    };
    void waitForEnd(child, output, settle).then(async (result) => {
      await stopper.strayGone();
      resolve(result);
    });
    child.on('exit', () => {
      // What the group left is killed before the keeper lets it go: a forkflush killed in between leaves nothing running.
      stopper.leaderExited();
      if (child.pid !== undefined) {
        running.delete(child.pid);
        releaseGroup(child.pid);
      }
    });
  });
}

/**
 * Resolves when the command is done: anything the group left running past its leader's exit is
 * stopped (by the caller, at 'exit'), so that nothing keeps the pipes open (and this pending)
 * after the command itself is done. Output is read until the command exits, and for a moment
 * after: a child that holds the pipes ends nothing.
 */
function waitForEnd(
  child: Child,
  output: ReturnType<typeof readOutput>,
  settle: (ended: Ended, spawnError: string | undefined) => RunResult,
): Promise<RunResult> {
  return new Promise((resolve) => {
    let spawnError: string | undefined;
    child.on('error', (e) => {
      spawnError = e.message;
    });
    let done = false;
    let ended: Ended | null = null;
    let drainTimer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (done || !ended) return;
      done = true;
      clearTimeout(drainTimer);
      child.stdout.destroy();
      child.stderr.destroy();
      const result = settle(ended, spawnError);
      output.log?.end();
      void (output.log?.closed ?? Promise.resolve()).then(() => resolve(result));
    };
    // The drain's end: on a busy machine the timer can fire before the loop has read what the
    // command wrote before it exited (timers run before I/O in a loop's turn), so the output is
    // given up only after a turn of the loop that read nothing more (a child that holds the pipes
    // and keeps writing is bounded by the count).
    const drain = (seen: number, polls: number) => {
      if (output.chunks() === seen || polls === 0) finish();
      else setImmediate(() => drain(output.chunks(), polls - 1));
    };
    child.on('exit', (exitCode, signal) => {
      ended = { exitCode, signal };
      drainTimer = setTimeout(() => drain(-1, DRAIN_POLLS_MAX), OUTPUT_DRAIN_MS);
    });
    child.on('close', (exitCode, signal) => {
      ended ??= { exitCode, signal };
      finish();
    });
  });
}

type Child = ChildProcessByStdio<Writable, Readable, Readable>;
type Ended = { exitCode: number | null; signal: NodeJS.Signals | null };

/** Spawns the command in a group of its own; no command outlives this process, however it ends. */
function startChild(options: RunOptions, confined: Wrapped | undefined, launch: Launch): Child {
  if (!confined) startKeeper();
  const child = withFilterAtFd3(
    confined?.fd3,
    (extra) =>
      spawn(confined?.file ?? launch.file, confined?.args ?? launch.args, {
        cwd: options.cwd,
        env: withoutRelativePaths(options.env ?? process.env),
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe', ...extra, ...(launch.keeperAt3 ? [keeperInput()] : [])],
      }) as Child,
  );
  if (child.pid !== undefined) running.add(child.pid);
  // Outside the sandbox nothing else ties the command to this process if it is killed (SIGKILL).
  if (child.pid !== undefined && !confined) keepGroup(child.pid);
  if (!stopOnExit) {
    // Whatever way this process ends (an exit, a crash), no command of its outlives it.
    stopOnExit = true;
    process.once('exit', () => stopAllCommands(0));
  }
  return child;
}

/**
 * Stops a command and what it started: SIGTERM to its group and to the descendants that left it,
 * a second SIGTERM, then SIGKILL. Descendants found when the stop began (and, tracked, while it
 * ran) are remembered: once the leader dies they are orphans that no longer lead back to it.
 */
function stopperFor(child: Child, options: RunOptions, confined: Wrapped | undefined) {
  let stopped: string | null = null;
  let blockedOn: string | null = null;
  let killTimer: NodeJS.Timeout | undefined;
  let secondTimer: NodeJS.Timeout | undefined;
  const strays = new Map<number, string>();
  const remember = () => {
    if (child.pid === undefined) return;
    for (const p of descendantProcesses(child.pid)) strays.set(p.pid, p.start);
  };
  const tracker = options.track && !confined ? setInterval(remember, PROCESS_TRACK_EVERY_MS) : undefined;
  tracker?.unref();
  const terminate = () => {
    if (child.pid === undefined) return;
    remember();
    if (confined) {
      // bwrap and its init would end the namespace at once: the command and its tools get the
      // SIGTERM and the grace period; bwrap gets the SIGKILL, which ends everything left.
      const init = new Set(descendantProcesses(child.pid, 1).map((p) => p.pid));
      killAll(strays, 'SIGTERM', init);
    } else {
      killGroup(child.pid, 'SIGTERM');
      killAll(strays, 'SIGTERM');
    }
  };
  const stop = (reason: string) => {
    if (stopped !== null || child.pid === undefined) return;
    stopped = reason;
    // Before the signal ends the wait: what a command that never answered was waiting for.
    if (reason === 'timeout' && !confined) blockedOn = openingPath(child.pid);
    terminate();
    // Agent CLIs take a first signal as "interrupt this turn" and carry on (opencode 1.18 does);
    // the second ends them, as a second Ctrl-C does.
    secondTimer = setTimeout(terminate, SECOND_SIGNAL_AFTER_MS);
    secondTimer.unref();
    killTimer = setTimeout(() => {
      if (child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
      killAll(strays, 'SIGKILL');
    }, options.killAfterMs ?? STOP_GRACE_MS);
    killTimer.unref();
  };
  return {
    stop,
    stopped: () => stopped,
    blocked: () => (blockedOn !== null ? { blockedOn } : {}),
    /** The leader is gone: what is left of its group (and, stopped or tracked, its strays) is killed. */
    leaderExited: () => {
      if (tracker) remember();
      if (child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
      if (stopped !== null || tracker) killAll(strays, 'SIGKILL');
    },
    /**
     * After the leader: until the strays it killed have left (at most STOP_GRACE_MS). A SIGKILLed
     * process runs no more, but on a busy machine it takes a moment to go; the caller reads the
     * workspace next, and must find none of the command's processes still in it.
     */
    strayGone: async () => {
      const until = performance.now() + STOP_GRACE_MS;
      while (performance.now() < until && [...strays].some(([pid, start]) => stillRuns(pid, start)))
        await new Promise((r) => setTimeout(r, 20));
    },
    clear: () => {
      clearTimeout(killTimer);
      clearTimeout(secondTimer);
      clearInterval(tracker);
    },
  };
}

/** Reads both streams into their tails and the log file; a log that is full or fails stops the command. */
function readOutput(child: Child, options: RunOptions, stop: (reason: string) => void) {
  const max = options.maxOutput ?? PROCESS_OUTPUT_MAX_CHARS;
  const out = new Tail(max);
  const err = new Tail(max);
  const log = options.logFile ? openLog(options.logFile, options.logMaxBytes ?? LOG_MAX_BYTES, stop) : undefined;
  let chunks = 0;
  const take = (tail: Tail) => (d: string) => {
    chunks++;
    tail.add(d);
    log?.write(d);
  };
  child.stdout.setEncoding('utf8').on('data', take(out));
  child.stderr.setEncoding('utf8').on('data', take(err));
  return { out, err, log, chunks: () => chunks };
}

/** The command's log file, appended to, up to `maxBytes`; `closed` resolves once every write is flushed or failed. */
function openLog(path: string, maxBytes: number, stop: (reason: string) => void) {
  const stream = createWriteStream(path, { flags: 'a' });
  let open: WriteStream | undefined = stream;
  let logged = 0;
  let problem: string | null = null;
  const closed = new Promise<void>((resolve) => stream.once('close', () => resolve()));
  // A log that cannot be written (a full disk) stops the command: nothing it does is recorded.
  stream.on('error', (e) => {
    problem ??= e.message;
    open = undefined;
    stop(LOG_FULL);
  });
  const write = (d: string) => {
    if (!open) return;
    logged += Buffer.byteLength(d);
    if (logged <= maxBytes) {
      open.write(d);
      return;
    }
    open.write(`\n[forkflush: the output passed ${maxBytes} bytes here; the command was stopped]\n`);
    open.end();
    open = undefined;
    stop(LOG_FULL);
  };
  return { write, end: () => open?.end(), closed, problem: () => problem };
}

/**
 * The last `max` characters of a stream, kept as chunks: a flood of 100 MB costs one pass over
 * it, not a copy of the whole tail per chunk.
 */
class Tail {
  private chunks: string[] = [];
  private length = 0;
  cut = false;
  constructor(private readonly max: number) {}

  add(chunk: string): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
    while (this.length - (this.chunks[0]?.length ?? 0) >= this.max && this.chunks.length > 1) {
      this.length -= this.chunks.shift()?.length ?? 0;
      this.cut = true;
    }
  }

  text(): string {
    const all = this.chunks.join('');
    if (all.length <= this.max) return all;
    this.cut = true;
    return all.slice(all.length - this.max);
  }
}
