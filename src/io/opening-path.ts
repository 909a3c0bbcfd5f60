// What a stuck process is waiting for: Linux tells, in /proc, which syscall a process is in and
// with what arguments, and its memory holds the path it passed. Used to name the file a command
// that never answered was waiting to open (a FIFO with no writer blocks open() for good).
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';

/** Syscalls that open a path, and which argument is the path: by machine (Linux's numbers). */
const OPEN_SYSCALLS: Partial<Record<NodeJS.Architecture, Record<number, number>>> = {
  x64: { 2: 0, 257: 1, 437: 1 }, // open, openat, openat2
  arm64: { 56: 1, 437: 1 }, // openat, openat2
};

/**
 * The path a process is waiting to open (a FIFO with no writer blocks `open` for good), read from
 * /proc: the syscall it is in and, in its memory, the name it passed. Null where that cannot be
 * known (another syscall, another system, no permission).
 */
export function openingPath(pid: number): string | null {
  try {
    const [nr, ...args] = readFileSync(`/proc/${pid}/syscall`, 'utf8').trim().split(' ');
    const arg = OPEN_SYSCALLS[process.arch]?.[Number(nr)];
    const address = arg === undefined ? undefined : args[arg];
    if (address === undefined) return null;
    const fd = openSync(`/proc/${pid}/mem`, 'r');
    try {
      const buf = Buffer.alloc(4096);
      const n = readSync(fd, buf, 0, buf.length, BigInt(address));
      const end = buf.subarray(0, n).indexOf(0);
      return end > 0 ? buf.subarray(0, end).toString('utf8') : null;
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
}
