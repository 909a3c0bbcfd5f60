// Whose limits a sandbox counts against. RLIMIT_NPROC counts the processes (and threads) of a
// user: sandboxes that run as one user share one limit, so a branch that fills it makes its
// sibling's grader fail to fork (EAGAIN), and the sibling is recorded with no score. So every
// sandbox runs under an account of its own:
// - under root, a uid of its own, from a range no user has (`UID_RANGE`), leased while its
//   commands run: an episode's agent and the gradings it asks for share one (they share the
//   workspace); setup and the judge get their own, never an agent's;
// - as an ordinary user, bwrap puts every sandbox in a user namespace of its own, and the kernel
//   counts a user's processes per user namespace (Linux 5.14 and later: "ucounts"), each against
//   the sandbox's own limit, and all of them together against the user's own.
// Where neither holds (a range that is taken, a container that maps only 65536 uids, an older
// kernel) every sandbox shares one limit, and the sandbox's name says so.
import { readFileSync } from 'node:fs';
import { SANDBOX_MAX_PROCESSES, SANDBOX_SLOTS_PER_PROCESS } from '../core/bounds.js';

/**
 * The uids forkflush's sandboxes run as under root: past what systemd (containers up to
 * 1879048191) and SSSD (Active Directory up to 2000200000) hand out, and below systemd's foreign
 * range (2147352576) and 2^31, where signedness bugs live. One group for all of them, so that
 * folders the user shares with every episode (sandbox.write) stay writable by each.
 */
export const UID_RANGE = { group: 2_013_000_000, first: 2_013_000_001, size: 2 ** 27 } as const;
const PID_SPACE = 2 ** 22;

/** A uid of the range: slot `slot` of the process with id `pid` (unique among live processes). */
export function rangeUid(pid: number, slot: number): number {
  return UID_RANGE.first + (pid % PID_SPACE) * SANDBOX_SLOTS_PER_PROCESS + slot;
}

export interface Lease {
  uid: number;
  gid: number;
  release(): void;
}

/**
 * This process's slots of the range. A lease takes the free slot released longest ago, so that
 * a uid is not handed out again while the last of its processes (stopped by SIGKILL, their PID
 * namespace still being torn down) may still count against it.
 */
export class UidPool {
  private readonly free: number[] = Array.from({ length: SANDBOX_SLOTS_PER_PROCESS }, (_, i) => i);

  constructor(private readonly pid: number) {}

  lease(): Lease {
    const slot = this.free.shift();
    if (slot === undefined)
      throw new Error(
        `forkflush runs at most ${SANDBOX_SLOTS_PER_PROCESS} sandboxes at once as root (each as a user of its own): run fewer episodes at once (--concurrency)`,
      );
    let released = false;
    return {
      uid: rangeUid(this.pid, slot),
      gid: UID_RANGE.group,
      release: () => {
        if (released) return;
        released = true;
        this.free.push(slot);
      },
    };
  }
}

/** The files that say which ids are taken, as text ('' when missing). */
export interface IdFiles {
  passwd: string;
  group: string;
  subuid: string;
  subgid: string;
  /** This process's /proc/self/uid_map and gid_map: which ids its user namespace can use. */
  uidMap: string;
  gidMap: string;
}

/**
 * Why the range cannot be used here, or null: a user or group with an id in it (passwd, group,
 * or an NSS source listed the same way), a subordinate range (rootless containers) that overlaps
 * it, or a user namespace (a container) that does not map all of it.
 */
export function rangeConflict(f: IdFiles): string | null {
  const last = UID_RANGE.first + UID_RANGE.size - 1;
  const inRange = (id: number) => id >= UID_RANGE.group && id <= last;
  for (const [file, text] of [
    ['passwd', f.passwd],
    ['group', f.group],
  ] as const) {
    for (const line of text.split('\n')) {
      const [name, , id] = line.split(':');
      if (name && id !== undefined && /^\d+$/.test(id) && inRange(Number(id)))
        return `${file === 'passwd' ? 'user' : 'group'} ${name} has id ${id}`;
    }
  }
  for (const [file, text] of [
    ['subuid', f.subuid],
    ['subgid', f.subgid],
  ] as const) {
    for (const line of text.split('\n')) {
      const [name, start, count] = line.split(':').map((s) => s.trim());
      if (!name || !/^\d+$/.test(start ?? '') || !/^\d+$/.test(count ?? '')) continue;
      const from = Number(start);
      if (from <= last && from + Number(count) - 1 >= UID_RANGE.group)
        return `/etc/${file} gives ${name} ids ${from} to ${from + Number(count) - 1}`;
    }
  }
  for (const [what, text] of [
    ['uids', f.uidMap],
    ['gids', f.gidMap],
  ] as const) {
    const covered = text.split('\n').some((line) => {
      const [inside, , count] = line.trim().split(/\s+/).map(Number);
      return inside !== undefined && count !== undefined && inside <= UID_RANGE.group && inside + count - 1 >= last;
    });
    if (!covered) return `this user namespace (a container) maps no ${what} as high as ${UID_RANGE.group}`;
  }
  return null;
}

/** The id files of this machine; `entries` adds what NSS lists (getent passwd, getent group). */
export function readIdFiles(entries: { passwd: string; group: string }): IdFiles {
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return '';
    }
  };
  return {
    passwd: `${read('/etc/passwd')}\n${entries.passwd}`,
    group: `${read('/etc/group')}\n${entries.group}`,
    subuid: read('/etc/subuid'),
    subgid: read('/etc/subgid'),
    uidMap: read('/proc/self/uid_map'),
    gidMap: read('/proc/self/gid_map'),
  };
}

/** What the machine can hold, and what forkflush's own process may have (null: unlimited). */
export interface ProcessRoom {
  pidMax: number;
  threadsMax: number;
  /** Its soft RLIMIT_NPROC: what its user's processes, every sandbox's included, may number. */
  ownLimit: number | null;
  /** Its hard RLIMIT_NPROC: no process it starts, root's included once setpriv dropped it, may raise a limit above it. */
  hardLimit: number | null;
}

/**
 * The process limit of one sandbox (RLIMIT_NPROC, which counts threads too): a quarter of what
 * the machine can hold (its process ids, its threads) and, as an ordinary user, of what that
 * user may have (every sandbox counts there too), at most 8192. A quarter: one branch that fills
 * its own limit leaves the machine, forkflush and its siblings the other three. Never above
 * forkflush's own hard limit: prlimit in the sandbox runs without capabilities and could not
 * raise it, and the sandbox would not start at all.
 */
export function processLimit(m: ProcessRoom): number {
  const machine = Math.min(m.pidMax, m.threadsMax);
  const own = m.ownLimit === null ? Number.POSITIVE_INFINITY : m.ownLimit;
  const hard = m.hardLimit === null ? Number.POSITIVE_INFINITY : m.hardLimit;
  return Math.max(1, Math.min(SANDBOX_MAX_PROCESSES, Math.floor(machine / 4), Math.floor(own / 4), hard));
}

/** What this machine can hold and this process may have. */
export function machineProcesses(): ProcessRoom {
  const number = (path: string, fallback: number) => {
    try {
      return Number(readFileSync(path, 'utf8').trim()) || fallback;
    } catch {
      return fallback;
    }
  };
  let limits: (number | null)[] = [null, null];
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max processes'));
    const [soft, hard] = line?.slice('Max processes'.length).trim().split(/\s+/) ?? [];
    limits = [soft, hard].map((n) => (n && /^\d+$/.test(n) ? Number(n) : null));
  } catch {
    // No /proc: no limit known.
  }
  return {
    pidMax: number('/proc/sys/kernel/pid_max', 32768),
    threadsMax: number('/proc/sys/kernel/threads-max', 32768),
    ownLimit: limits[0] ?? null,
    hardLimit: limits[1] ?? null,
  };
}

/**
 * Whether this kernel counts an ordinary user's processes per user namespace (5.14 and later):
 * then each sandbox of that user (a namespace of its own) has a process limit of its own.
 */
export function countsPerNamespace(release: string): boolean {
  const [major = 0, minor = 0] = release.split(/[.-]/).map(Number);
  return major > 5 || (major === 5 && minor >= 14);
}
