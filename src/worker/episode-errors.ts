// How an episode ends without a result: stopped (InterruptedError), or on a full disk
// (DiskFullError, told from an agent's words by the filesystems themselves).
import { statfs } from 'node:fs/promises';
import { DISK_FULL_BELOW_BYTES, DISK_FULL_BELOW_INODES, FAILURE_QUOTE_MAX_CHARS } from '../core/bounds.js';

export class InterruptedError extends Error {
  override name = 'InterruptedError';
  /** What the stopped attempt spent, where it is known: measured, reported, or estimated (core/charge.ts). */
  constructor(
    message: string,
    readonly spent: number | null = null,
    /** `spent` is an estimate: the agent reported no usage. */
    readonly estimated = false,
  ) {
    super(message);
  }
}

/**
 * A full disk (or quota) during an episode: nobody's result, whoever filled it (the agent, a
 * sibling, the machine). The episode is not recorded; what its agent spent is charged, and it runs
 * again when the run is resumed.
 */
export class DiskFullError extends Error {
  override name = 'DiskFullError';
  constructor(
    message: string,
    /** What the attempt spent, where it is known. */
    readonly spent: number | null,
  ) {
    super(message);
  }
}

/** The line of an error that says the disk (or a quota) is full, or null. */
export function diskFullLine(message: string): string | null {
  return (
    message
      .split('\n')
      // git's checkout and its refs name the file they could not write, and not why.
      .find((l) =>
        /No space left on device|ENOSPC|Disk quota exceeded|EDQUOT|unable to write file|couldn't write|Out of diskspace/i.test(
          l,
        ),
      )
      ?.trim()
      .slice(0, FAILURE_QUOTE_MAX_CHARS) ?? null
  );
}

/**
 * Whether an error is a full disk: it says so, and one of the episode's filesystems is nearly
 * full now. The words alone are not enough: error messages quote names the agent chose.
 */
export async function diskFull(e: unknown, dirs: string[]): Promise<string | null> {
  const line = e instanceof Error ? diskFullLine(e.message) : null;
  if (!line) return null;
  for (const dir of dirs) {
    const s = await statfs(dir).catch(() => null);
    if (s && (s.bavail * s.bsize < DISK_FULL_BELOW_BYTES || (s.files > 0 && s.ffree < DISK_FULL_BELOW_INODES)))
      return line;
  }
  return null;
}
