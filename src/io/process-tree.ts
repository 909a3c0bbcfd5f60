// The processes of this machine as a tree: a command's descendants (whatever group or session they
// moved to), their start times (to tell a process from a later one that reused its pid), and the
// signals that stop a group or remembered processes. io/process.ts stops commands with these.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { withoutRelativePaths } from './executables.js';

export function killGroup(pid: number, signal: NodeJS.Signals): void {
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
export function killAll(pids: Map<number, string>, signal: NodeJS.Signals, spare?: Set<number>): void {
  for (const [pid, start] of pids) {
    if (spare?.has(pid) || startTime(pid) !== start) continue;
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

export interface ProcessLink {
  pid: number;
  ppid: number;
  /** When it started (clock ticks since boot), to tell it from a later process with its pid. */
  start: string;
  /** Its state letter (R running, S sleeping, T stopped, Z zombie...); '' where /proc does not tell. */
  state: string;
}

/** Every live descendant of `root`, whatever its process group or session. */
export function descendants(root: number): number[] {
  return descendantProcesses(root).map((p) => p.pid);
}

/** The descendants of `root`, down to `levels` below it (all, by default). */
export function descendantProcesses(root: number, levels = Number.POSITIVE_INFINITY): ProcessLink[] {
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
export function startTime(pid: number): string | null {
  if (process.platform !== 'linux') return '';
  return statFields(pid)?.[19] ?? null;
}

/** Whether a remembered process still runs: its pid not reused, and not a zombie (which runs no more); off Linux, where /proc does not tell, false. */
export function stillRuns(pid: number, start: string): boolean {
  if (process.platform !== 'linux') return false;
  const fields = statFields(pid);
  return fields !== null && fields[19] === start && fields[0] !== 'Z' && fields[0] !== 'X';
}

/** Every process with its parent: from /proc on Linux, from ps elsewhere (macOS). */
function processLinks(): ProcessLink[] {
  const links: ProcessLink[] = [];
  try {
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      const fields = statFields(name);
      // Field 4 is the parent (index 1 after the name), field 22 the start time (index 19).
      if (fields)
        links.push({ pid: Number(name), ppid: Number(fields[1]), start: fields[19] ?? '', state: fields[0] ?? '' });
    }
    return links;
  } catch {
    try {
      const out = execFileSync('ps', ['-A', '-o', 'pid=,ppid='], {
        encoding: 'utf8',
        env: withoutRelativePaths(process.env),
      });
      for (const line of out.split('\n')) {
        const [pid, ppid] = line.trim().split(/\s+/).map(Number);
        if (pid && ppid !== undefined && !Number.isNaN(ppid)) links.push({ pid, ppid, start: '', state: '' });
      }
    } catch {
      // No way to see the tree: the process group alone is signalled.
    }
    return links;
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
