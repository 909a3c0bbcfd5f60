// What the machine has left while a judge runs, read from outside every sandbox (so nothing the
// graded code prints can change it): the tasks alive against what the kernel allows, the OOM
// killer's count, the memory available, and the free space of the judge's filesystems. Sampled
// a few times a second from /proc and statfs: a handful of small reads each time.
import { readFileSync, statfsSync } from 'node:fs';
import { MACHINE_WATCH_EVERY_MS } from '../core/bounds.js';
import type { MachineReadings } from '../core/resources.js';

export interface MachineWatch {
  /** Stops watching and returns what it saw. */
  stop(): MachineReadings;
}

/** Starts watching the machine, and the filesystems `paths` are on. */
export type WatchMachine = (paths: string[]) => MachineWatch;

export const watchMachine: WatchMachine = (paths) => {
  const capacity = Math.min(number('/proc/sys/kernel/pid_max'), number('/proc/sys/kernel/threads-max'));
  const oomAtStart = oomKills();
  const r: MachineReadings = {
    tasksPeak: null,
    taskCapacity: Number.isFinite(capacity) ? capacity : null,
    oomKills: null,
    memAvailableMin: null,
    memTotal: meminfo('MemTotal'),
    diskFreeMin: null,
    inodesFreeMin: null,
    filesPeak: null,
    fileCapacity: null,
  };
  const min = (a: number | null, b: number | null) => (b === null ? a : a === null ? b : Math.min(a, b));
  const sample = () => {
    const tasks = loadavgTasks();
    if (tasks !== null) r.tasksPeak = Math.max(r.tasksPeak ?? 0, tasks);
    r.memAvailableMin = min(r.memAvailableMin, meminfo('MemAvailable'));
    // "allocated unused max": the machine's open files, and how many it may have.
    const [open, unused, max] = (read('/proc/sys/fs/file-nr') ?? '').trim().split(/\s+/).map(Number);
    if (Number.isFinite(open) && Number.isFinite(unused) && Number.isFinite(max) && (max as number) > 0) {
      r.filesPeak = Math.max(r.filesPeak ?? 0, (open as number) - (unused as number));
      r.fileCapacity = max as number;
    }
    for (const p of paths) {
      try {
        const s = statfsSync(p);
        r.diskFreeMin = min(r.diskFreeMin, s.bavail * s.bsize);
        if (s.files > 0) r.inodesFreeMin = min(r.inodesFreeMin, s.ffree);
      } catch {
        // Gone (the judge's folder is removed at its end): nothing to read.
      }
    }
  };
  sample();
  const timer = setInterval(sample, MACHINE_WATCH_EVERY_MS);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      sample();
      const end = oomKills();
      r.oomKills = oomAtStart === null || end === null ? null : end - oomAtStart;
      return { ...r };
    },
  };
};

function read(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

function number(path: string): number {
  const n = Number(read(path)?.trim());
  return Number.isFinite(n) && n > 0 ? n : Number.POSITIVE_INFINITY;
}

/** The tasks (processes and threads) alive on the machine: /proc/loadavg's "running/total". */
function loadavgTasks(): number | null {
  const total = read('/proc/loadavg')?.split(' ')[3]?.split('/')[1];
  return total && /^\d+$/.test(total) ? Number(total) : null;
}

/** How many processes the OOM killer has killed since boot (Linux 4.13 and later). */
function oomKills(): number | null {
  const m = /^oom_kill (\d+)$/m.exec(read('/proc/vmstat') ?? '');
  return m ? Number(m[1]) : null;
}

function meminfo(field: string): number | null {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(read('/proc/meminfo') ?? '');
  return m ? Number(m[1]) * 1024 : null;
}
