// The one door to child processes. It owns timeouts and stops: a command runs in its own process
// group, and stopping it signals the whole group (an agent's tools and a grader's workers too)
// and every descendant that left the group (Codex runs its tools in sessions of their own).
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync, type WriteStream } from 'node:fs';

export interface RunOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Written to stdin, which is then closed. Without it stdin is closed at once. */
  input?: string;
  /** Stop the command after this many milliseconds. */
  timeoutMs?: number;
  /** Stop the command when this aborts; the abort reason is reported as `stopped`. */
  signal?: AbortSignal;
  /** Also write stdout and stderr to this file (for long agent logs). */
  logFile?: string;
  /** Keep at most this many characters of each stream in memory (the end is kept). */
  maxOutput?: number;
  /** Grace period between SIGTERM and SIGKILL. */
  killAfterMs?: number;
}

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
}

/** Runs a shell command line (sh -c) in its own process group. */
export function runShell(command: string, options: RunOptions): Promise<RunResult> {
  return runProcess('/bin/sh', ['-c', command], options);
}

export function runProcess(file: string, args: string[], options: RunOptions): Promise<RunResult> {
  const started = performance.now();
  const max = options.maxOutput ?? 1_000_000;
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let stopped: string | null = null;
    let killTimer: NodeJS.Timeout | undefined;
    let log: WriteStream | undefined;
    if (options.logFile) log = createWriteStream(options.logFile, { flags: 'a' });
    const keep = (acc: string, chunk: string) => {
      const next = acc + chunk;
      return next.length > max ? next.slice(next.length - max) : next;
    };
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout = keep(stdout, d);
      log?.write(d);
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr = keep(stderr, d);
      log?.write(d);
    });
    // Descendants found when the stop began: once the leader dies they are orphans that no
    // longer lead back to it, so they are remembered for the SIGKILL.
    let strays: number[] = [];
    const stop = (reason: string) => {
      if (stopped !== null || child.pid === undefined) return;
      stopped = reason;
      strays = descendants(child.pid);
      killGroup(child.pid, 'SIGTERM');
      killAll(strays, 'SIGTERM');
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
    // the pipes open (and this promise pending) after the command itself is done.
    child.on('exit', () => {
      if (child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
      if (stopped !== null) killAll(strays, 'SIGKILL');
    });
    child.on('close', (exitCode, signal) => {
      if (timer) clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      options.signal?.removeEventListener('abort', onAbort);
      const finish = () =>
        resolve({
          exitCode,
          signal,
          stdout,
          stderr,
          stopped,
          ms: performance.now() - started,
          ...(spawnError ? { spawnError } : {}),
        });
      if (log) log.end(finish);
      else finish();
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

function killAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** Every live descendant of `root`, whatever its process group or session. */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of parentLinks()) {
    const list = children.get(ppid) ?? [];
    list.push(pid);
    children.set(ppid, list);
  }
  const found: number[] = [];
  const queue = [root];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    for (const child of children.get(pid) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** [pid, parent pid] of every process: from /proc on Linux, from ps elsewhere (macOS). */
function parentLinks(): Array<[number, number]> {
  const links: Array<[number, number]> = [];
  try {
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        // The command name (field 2) is in parentheses and may hold spaces: parse after it.
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        links.push([Number(name), ppid]);
      } catch {
        // The process ended while we looked.
      }
    }
    return links;
  } catch {
    try {
      const out = execFileSync('ps', ['-A', '-o', 'pid=,ppid='], { encoding: 'utf8' });
      for (const line of out.split('\n')) {
        const [pid, ppid] = line.trim().split(/\s+/).map(Number);
        if (pid && ppid !== undefined && !Number.isNaN(ppid)) links.push([pid, ppid]);
      }
    } catch {
      // No way to see the tree: the process group alone is signalled.
    }
    return links;
  }
}
