// What an agent leaves in the folders it could write, made safe for forkflush to read: forkflush
// reads usage files and transcripts there after the sandbox is gone, and copies contexts on.
// A symbolic link or a special file (a FIFO, a socket, a device) would make forkflush read or
// write what it points at, outside the agent's reach, or block on it; they are removed.
import { constants } from 'node:fs';
import { open, readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** Removes every symbolic link and special file under `dir`; returns how many went. */
export async function removeLinksAndSpecials(dir: string): Promise<number> {
  let removed = 0;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) removed += await removeLinksAndSpecials(path);
    else if (!e.isFile()) {
      await unlink(path).catch(() => {});
      removed++;
    }
  }
  return removed;
}

/**
 * The start of a regular file, at most `max` bytes, without following a link; null when there is
 * no regular file there.
 */
export async function readRegular(path: string, max = 1_000_000): Promise<string | null> {
  // O_NONBLOCK: a FIFO put there must not hang forkflush (it is then refused as not a file).
  const h = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (!h) return null;
  try {
    const s = await h.stat();
    if (!s.isFile()) return null;
    const buf = Buffer.alloc(Math.min(max, s.size));
    const { bytesRead } = await h.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).toString('utf8');
  } finally {
    await h.close();
  }
}
