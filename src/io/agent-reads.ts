// Reading files an agent could write: regular files only, opened without following a link or
// blocking on a FIFO, never past a limit, and as they grow (a CLI's log, its session file).
import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';

/** The most forkflush reads of one file an agent could write: a sparse file of any size costs the agent nothing. */
export const MAX_AGENT_FILE_BYTES = 64 * 1024 * 1024;
/** What one read of a growing file takes, and the longest line it keeps (a longer one is dropped). */
const CHUNK_BYTES = 8 * 1024 * 1024;
const MAX_LINE_BYTES = 16 * 1024 * 1024;

/** A file a CLI appends to, read as it grows: the whole lines added since the last read, a chunk at most. */
export class GrowingFile {
  private rest = Buffer.alloc(0);
  /** Lines too long to keep (dropped, not parsed). */
  dropped = 0;
  private skipping = false;
  private reading: Promise<unknown> = Promise.resolve();
  path: string | null;

  constructor(
    /** The file, or a finder for a file not known yet (a session the CLI names itself). */
    private readonly locate: string | (() => Promise<string | null>),
    /** Where reading starts (what an earlier episode left is not this one's). */
    public offset = 0,
  ) {
    this.path = typeof locate === 'string' ? locate : null;
  }

  /** The whole lines added since the last read, a chunk at most (reads never overlap). */
  lines(): Promise<string[]> {
    const next = this.reading.then(() => this.read());
    this.reading = next.catch(() => {});
    return next;
  }

  /** A last line not ended yet, if any. */
  unfinished(): string {
    return this.skipping ? '' : this.rest.toString('utf8');
  }

  /** Every whole line up to the end of the file as it is now, a chunk at a time. */
  async *remaining(): AsyncGenerator<string> {
    for (;;) {
      const before = this.offset;
      for (const line of await this.lines()) yield line;
      if (this.offset === before) return;
    }
  }

  private async read(): Promise<string[]> {
    if (this.path === null && typeof this.locate !== 'string') this.path = await this.locate();
    if (this.path === null) return [];
    const chunk = await readFrom(this.path, this.offset, CHUNK_BYTES);
    if (chunk.length === 0) return [];
    this.offset += chunk.length;
    let data = Buffer.concat([this.rest, chunk]);
    if (this.skipping) {
      // The rest of a line too long to keep.
      const nl = data.indexOf(0x0a);
      if (nl === -1) {
        this.rest = Buffer.alloc(0);
        return [];
      }
      this.skipping = false;
      data = data.subarray(nl + 1);
    }
    const end = data.lastIndexOf(0x0a);
    // A line still being written waits for the next read, unless it is too long to keep.
    this.rest = end === -1 ? data : data.subarray(end + 1);
    if (this.rest.length > MAX_LINE_BYTES) {
      this.rest = Buffer.alloc(0);
      this.skipping = true;
      this.dropped++;
    }
    return end === -1 ? [] : data.subarray(0, end).toString('utf8').split('\n');
  }
}

/** `read` of a regular file, opened without following a link or blocking; `none` when there is none. */
async function regular<T>(path: string, none: T, read: (h: FileHandle, size: number) => Promise<T>): Promise<T> {
  const h = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (!h) return none;
  try {
    const s = await h.stat();
    return s.isFile() ? await read(h, s.size) : none;
  } finally {
    await h.close();
  }
}

/** What a file holds from `offset` on; nothing when it is not a regular file. */
export function readFrom(path: string, offset: number, max = MAX_AGENT_FILE_BYTES): Promise<Buffer> {
  return regular(path, Buffer.alloc(0), async (h, size) => {
    if (size <= offset) return Buffer.alloc(0);
    const buf = Buffer.alloc(Math.min(size - offset, max));
    const { bytesRead } = await h.read(buf, 0, buf.length, offset);
    return buf.subarray(0, bytesRead);
  });
}

/** A regular file's size (0 when there is none). */
export function sizeOf(path: string): Promise<number> {
  return regular(path, 0, async (_, size) => size);
}

/** The start of a regular file as text, at most `max` bytes; null when there is no regular file there. */
export function readRegular(path: string, max = 1_000_000): Promise<string | null> {
  return regular(path, null, async (h, size) => {
    const buf = Buffer.alloc(Math.min(max, size));
    const { bytesRead } = await h.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).toString('utf8');
  });
}

/** The lines a CLI prints to the episode's log from now on, handed to `on` as they come; all that is left once `final`. */
export async function followLog(
  logFile: string,
  on: (line: string) => void,
): Promise<(final?: boolean) => Promise<void>> {
  const log = new GrowingFile(logFile, await sizeOf(logFile));
  return async (final) => {
    if (!final) for (const line of await log.lines()) on(line);
    else {
      for await (const line of log.remaining()) on(line);
      const rest = log.unfinished();
      if (rest) on(rest);
    }
  };
}
