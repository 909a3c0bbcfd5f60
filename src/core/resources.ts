// A judge's grading that failed for want of a resource: whose failure was it? Each sandbox has
// a process limit of its own (io/accounts.ts), so a grader that cannot fork hit its own limit,
// the branch's own doing, unless the machine itself ran out (its process table, its memory, its
// disk, its open-file table: no sandbox has a limit of its own on those). The grader's words cannot decide it:
// the graded code is the agent's and can print "Resource temporarily unavailable" on purpose to
// have the round voided. So words only earn one more try; what forkflush measured outside the
// sandbox while the judge ran decides: the machine short -> the round is void (no winner, the
// lineage goes on unchanged: core/select.ts `voidReason`), else the failure is the branch's own.
import { DISK_FULL_BELOW_BYTES, DISK_FULL_BELOW_INODES } from './bounds.js';

/** What a grader can run out of. */
export type Resource = 'processes' | 'memory' | 'disk' | 'files';
export const RESOURCES = ['processes', 'memory', 'disk', 'files'] as const satisfies readonly Resource[];
/** How messages name each. */
const SAID: Record<Resource, string> = { processes: 'processes', memory: 'memory', disk: 'disk', files: 'open files' };

/** What forkflush saw of the machine while a judge ran (null: not known here). */
export interface MachineReadings {
  /** The most tasks (processes and threads) alive at once, and how many the machine can have. */
  tasksPeak: number | null;
  taskCapacity: number | null;
  /** Processes the OOM killer killed on the machine (or in forkflush's memory cgroup) meanwhile. */
  oomKills: number | null;
  /** The least memory available, and the machine's total, in bytes. */
  memAvailableMin: number | null;
  memTotal: number | null;
  /** The least free space and free inodes on the judge's filesystems. */
  diskFreeMin: number | null;
  inodesFreeMin: number | null;
  /** The most files open on the machine at once, and how many it can have open (/proc/sys/fs/file-nr). */
  filesPeak: number | null;
  fileCapacity: number | null;
}

export const NO_READINGS: MachineReadings = {
  tasksPeak: null,
  taskCapacity: null,
  oomKills: null,
  memAvailableMin: null,
  memTotal: null,
  diskFreeMin: null,
  inodesFreeMin: null,
  filesPeak: null,
  fileCapacity: null,
};

/**
 * What the machine ran short of while it was watched: fewer than 1% of its tasks free (at least
 * 64), an OOM kill or under 1% of its memory available, or a nearly full disk.
 */
export function machineShort(r: MachineReadings): Resource[] {
  const short: Resource[] = [];
  if (r.tasksPeak !== null && r.taskCapacity !== null) {
    if (r.taskCapacity - r.tasksPeak < Math.max(64, r.taskCapacity / 100)) short.push('processes');
  }
  const lowMemory = r.memAvailableMin !== null && r.memTotal !== null && r.memAvailableMin < r.memTotal / 100;
  if ((r.oomKills ?? 0) > 0 || lowMemory) short.push('memory');
  if (
    (r.diskFreeMin !== null && r.diskFreeMin < DISK_FULL_BELOW_BYTES) ||
    (r.inodesFreeMin !== null && r.inodesFreeMin < DISK_FULL_BELOW_INODES)
  )
    short.push('disk');
  if (r.filesPeak !== null && r.fileCapacity !== null) {
    if (r.fileCapacity - r.filesPeak < Math.max(1024, r.fileCapacity / 100)) short.push('files');
  }
  return short;
}

const SIGNS: [Resource, RegExp][] = [
  [
    'processes',
    /Resource temporarily unavailable|\bEAGAIN\b|fork: retry|Cannot fork|can't fork|fork failed|can't start new thread|unable to create (new )?native thread|pthread_create/i,
  ],
  ['memory', /Cannot allocate memory|\bENOMEM\b|MemoryError|out of memory|OutOfMemoryError|std::bad_alloc/i],
  // A shell's word for a child killed by SIGKILL, which the OOM killer sends.
  ['memory', /(^|\s)Killed(\s|$)/m],
  ['disk', /No space left on device|\bENOSPC\b|Disk quota exceeded|\bEDQUOT\b/i],
  // The machine's table, not a process's own limit (EMFILE, "Too many open files").
  ['files', /Too many open files in system|\bENFILE\b/i],
];

/** The resources a failed grading's output (or a SIGKILL, the OOM killer's signal) points at. */
export function resourceSigns(output: string, signal: string | null): Resource[] {
  const signs = [...new Set(SIGNS.filter(([, re]) => re.test(output)).map(([r]) => r))];
  if (signal === 'SIGKILL' && !signs.includes('memory')) signs.push('memory');
  return signs;
}

/** One run of the judge (its setup and its grader), as the decision needs it. */
export interface JudgeAttempt {
  score: number | null;
  reason?: string;
  /**
   * It ran and failed (setup or the grader exited non-zero or was killed): a failure that a
   * missing resource may explain. Not a timeout, a grader whose output held no score, or graded
   * code that wrote under protected paths.
   */
  ranAndFailed: boolean;
  /** resourceSigns of what it printed. */
  signs: Resource[];
  /** machineShort of what forkflush saw while it ran. */
  short: Resource[];
  /**
   * forkflush could not start it (spawn failed): its signs are then the kernel's answer to
   * forkflush, never words of the graded code, which never ran.
   */
  startFailed?: boolean;
}

/** Whether a judge's grading gets one more try: it failed, and its words or the machine point at a resource. */
export function retryJudge(a: JudgeAttempt): boolean {
  return a.score === null && a.ranAndFailed && (a.signs.length > 0 || a.short.length > 0);
}

/** The judge's verdict after a second try: the second's score, or why it has none, and whether the machine is to blame. */
export interface JudgeVerdict {
  score: number | null;
  reason?: string;
  /** For the episode's note: that it was graded twice, and why. */
  note: string;
  /** The machine ran out of this while the judge ran, twice: the round is void. */
  machineShort?: Resource;
}

/**
 * Settles a judge that was tried twice. The second try's score stands if it has one. If it
 * failed too, the machine is blamed only when forkflush saw it short while the second try ran
 * (and the first failed for want of a resource), or when forkflush itself could not start it
 * for want of one (the branch's code never ran); a failure the machine had room for is the
 * branch's own, whatever its output says.
 */
export function settleJudge(first: JudgeAttempt, second: JudgeAttempt): JudgeVerdict {
  const firstWhy = `${first.reason ?? 'no score'}${describeWant(first)}`;
  if (second.score !== null)
    return { score: second.score, note: `graded twice: the judge's first grading failed (${firstWhy})` };
  const short = second.ranAndFailed || second.signs.length > 0 ? second.short : [];
  const blamed = second.startFailed
    ? (second.signs[0] ?? short[0])
    : short.find((r) => first.short.includes(r) || first.signs.includes(r) || second.signs.includes(r));
  if (blamed) {
    return {
      score: null,
      reason: `the machine ran out of ${SAID[blamed]} while the judge graded this branch, twice (${second.reason ?? 'no score'}): the round is void`,
      note: `graded twice: the first grading failed too (${firstWhy})`,
      machineShort: blamed,
    };
  }
  const own = second.signs[0];
  return {
    score: null,
    reason: `${second.reason ?? 'no score'}${own ? ` (for want of ${SAID[own]}, within this branch's own limits: the machine had room)` : ''}`,
    note: `graded twice: the first grading failed too (${firstWhy})`,
  };
}

function describeWant(a: JudgeAttempt): string {
  if (a.short.length > 0) return `; the machine was short of ${a.short.map((r) => SAID[r]).join(' and ')}`;
  return a.signs.length > 0 ? `; its output points at ${a.signs.map((r) => SAID[r]).join(' and ')}` : '';
}
