// The one door to child processes. It owns timeouts and stops: a command runs in its own process
// group, and stopping it signals the whole group (an agent's tools and a grader's workers too)
// and every descendant that left the group (Codex runs its tools in sessions of their own).
// A confined command runs in the sandbox (io/sandbox.ts), whose PID namespace dies with it.
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync, type WriteStream } from 'node:fs';
import {
  DRAIN_POLLS_MAX,
  LOG_MAX_BYTES,
  NOT_STARTED_WITHIN_MS,
  OUTPUT_DRAIN_MS,
  PROCESS_TRACK_EVERY_MS,
  SECOND_SIGNAL_AFTER_MS,
} from '../core/bounds.js';
import { openingPath } from './opening-path.js';
import { type Confinement, type Sandbox, type Wrapped, writeFd3 } from './sandbox.js';

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
export function stopAllCommands(graceMs = 500): void {
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

/** A command that never ran: it could not be spawned, or exited 126/127 at once. */
export function couldNotStart(r: { spawnError?: string; exitCode: number | null; ms: number }): boolean {
  return r.spawnError !== undefined || ((r.exitCode === 126 || r.exitCode === 127) && r.ms < NOT_STARTED_WITHIN_MS);
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
  return spawnAndWait(file, args, options, undefined);
}

function spawnAndWait(
  file: string,
  args: string[],
  options: RunOptions,
  confined: Wrapped | undefined,
): Promise<RunResult> {
  const started = performance.now();
  const max = options.maxOutput ?? 1_000_000;
  return new Promise((resolve) => {
    const child = spawn(confined?.file ?? file, confined?.args ?? args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', ...(confined?.fd3 ? ['pipe' as const] : [])],
    });
    if (confined?.fd3) writeFd3(child, confined.fd3);
    if (child.pid !== undefined) running.add(child.pid);
    if (!stopOnExit) {
      // Whatever way this process ends (an exit, a crash), no command of its outlives it.
      stopOnExit = true;
      process.once('exit', () => stopAllCommands(0));
    }
    let stopped: string | null = null;
    let killTimer: NodeJS.Timeout | undefined;
    let secondTimer: NodeJS.Timeout | undefined;
    let log: WriteStream | undefined;
    let logged = 0;
    let logProblem: string | null = null;
    // Resolved once the log is closed (every write flushed, or failed): the caller reads it next.
    let logClosed = Promise.resolve();
    if (options.logFile) {
      const stream = createWriteStream(options.logFile, { flags: 'a' });
      log = stream;
      logClosed = new Promise((closed) => stream.once('close', () => closed()));
      // A log that cannot be written (a full disk) stops the command: nothing it does is recorded.
      log.on('error', (e) => {
        logProblem ??= e.message;
        log = undefined;
        stop(LOG_FULL);
      });
    }
    const logMax = options.logMaxBytes ?? LOG_MAX_BYTES;
    const toLog = (d: string) => {
      if (!log) return;
      logged += Buffer.byteLength(d);
      if (logged <= logMax) {
        log.write(d);
        return;
      }
      log.write(`\n[forkflush: the output passed ${logMax} bytes here; the command was stopped]\n`);
      log.end();
      log = undefined;
      stop(LOG_FULL);
    };
    const out = new Tail(max);
    const err = new Tail(max);
    let chunks = 0;
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      chunks++;
      out.add(d);
      toLog(d);
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      chunks++;
      err.add(d);
      toLog(d);
    });
    // Descendants found when the stop began (and, tracked, while it ran): once the leader dies
    // they are orphans that no longer lead back to it, so they are remembered for the SIGKILL.
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
    let blockedOn: string | null = null;
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
      }, options.killAfterMs ?? 2000);
      killTimer.unref();
    };
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => stop('timeout'), options.timeoutMs);
    const onAbort = () => stop(String(options.signal?.reason ?? 'aborted'));
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });

    // EPIPE when a command exits without reading its stdin is expected, not an error.
    child.stdin.on('error', () => {});
    child.stdin.end(options.input ?? '');

    let spawnError: string | undefined;
    child.on('error', (e) => {
      spawnError = e.message;
    });
    // Anything the group left running past its leader's exit is stopped, so that nothing keeps
    // the pipes open (and this promise pending) after the command itself is done. Output is read
    // until the command exits, and for a moment after: a child that holds the pipes ends nothing.
    let done = false;
    let ended: { exitCode: number | null; signal: NodeJS.Signals | null } | null = null;
    let drainTimer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (done || !ended) return;
      done = true;
      if (timer) clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      if (secondTimer) clearTimeout(secondTimer);
      if (drainTimer) clearTimeout(drainTimer);
      if (tracker) clearInterval(tracker);
      options.signal?.removeEventListener('abort', onAbort);
      child.stdout.destroy();
      child.stderr.destroy();
      const result = {
        ...ended,
        stdout: out.text(),
        stderr: err.text(),
        stopped,
        ms: performance.now() - started,
        ...(spawnError ? { spawnError } : {}),
        ...(blockedOn !== null ? { blockedOn } : {}),
        ...(out.cut || err.cut ? { outputCut: true as const } : {}),
        ...(logProblem ? { logProblem } : {}),
      };
      log?.end();
      void logClosed.then(() => resolve(result));
    };
    // The drain's end: on a busy machine the timer can fire before the loop has read what the
    // command wrote before it exited (timers run before I/O in a loop's turn), so the output is
    // given up only after a turn of the loop that read nothing more (a child that holds the pipes
    // and keeps writing is bounded by the count).
    const drain = (seen: number, polls: number) => {
      if (chunks === seen || polls === 0) finish();
      else setImmediate(() => drain(chunks, polls - 1));
    };
    child.on('exit', (exitCode, signal) => {
      ended = { exitCode, signal };
      if (child.pid !== undefined) running.delete(child.pid);
      if (tracker) remember();
      if (child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
      if (stopped !== null || tracker) killAll(strays, 'SIGKILL');
      drainTimer = setTimeout(() => drain(-1, DRAIN_POLLS_MAX), OUTPUT_DRAIN_MS);
    });
    child.on('close', (exitCode, signal) => {
      ended ??= { exitCode, signal };
      finish();
    });
  });
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone.
  }
}

/**
 * Signals remembered processes, except those in `spare`; one whose start time changed is another
 * process that reused the pid, and is left alone.
 */
function killAll(pids: Map<number, string>, signal: NodeJS.Signals, spare?: Set<number>): void {
  for (const [pid, start] of pids) {
    if (spare?.has(pid) || startTime(pid) !== start) continue;
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

interface ProcessLink {
  pid: number;
  ppid: number;
  /** When it started (clock ticks since boot), to tell it from a later process with its pid. */
  start: string;
}

/** Every live descendant of `root`, whatever its process group or session. */
export function descendants(root: number): number[] {
  return descendantProcesses(root).map((p) => p.pid);
}

/** The descendants of `root`, down to `levels` below it (all, by default). */
function descendantProcesses(root: number, levels = Number.POSITIVE_INFINITY): ProcessLink[] {
  const children = new Map<number, ProcessLink[]>();
  for (const link of processLinks()) {
    const list = children.get(link.ppid) ?? [];
    list.push(link);
    children.set(link.ppid, list);
  }
  const found: ProcessLink[] = [];
  let level = [root];
  for (let depth = 0; depth < levels && level.length > 0; depth++) {
    const next: number[] = [];
    for (const pid of level) {
      for (const child of children.get(pid) ?? []) {
        found.push(child);
        next.push(child.pid);
      }
    }
    level = next;
  }
  return found;
}

/** The fields of /proc/<pid>/stat after the command name, which is in parentheses and may hold spaces. */
function statFields(pid: number | string): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** A process's start time, '' where /proc does not tell (macOS), null when it is gone. */
function startTime(pid: number): string | null {
  if (process.platform !== 'linux') return '';
  return statFields(pid)?.[19] ?? null;
}

/** Every process with its parent: from /proc on Linux, from ps elsewhere (macOS). */
function processLinks(): ProcessLink[] {
  const links: ProcessLink[] = [];
  try {
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      const fields = statFields(name);
      // Field 4 is the parent (index 1 after the name), field 22 the start time (index 19).
      if (fields) links.push({ pid: Number(name), ppid: Number(fields[1]), start: fields[19] ?? '' });
    }
    return links;
  } catch {
    try {
      const out = execFileSync('ps', ['-A', '-o', 'pid=,ppid='], { encoding: 'utf8' });
      for (const line of out.split('\n')) {
        const [pid, ppid] = line.trim().split(/\s+/).map(Number);
        if (pid && ppid !== undefined && !Number.isNaN(ppid)) links.push({ pid, ppid, start: '' });
      }
    } catch {
      // No way to see the tree: the process group alone is signalled.
    }
    return links;
  }
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

/** Whether a process with this pid exists (EPERM: it does, as another user's). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
