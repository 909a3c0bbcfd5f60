// Files an agent could write, read without following a link or blocking on a FIFO, as they grow and
// never past a limit; and the copying of CLI logins.
import { constants, existsSync } from 'node:fs';
import { type FileHandle, mkdir, open, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** The JSON objects of JSONL text; lines that are not JSON objects are skipped. */
export function* jsonLines(text: string): Generator<Record<string, unknown>> {
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      const v: unknown = JSON.parse(t);
      if (isRecord(v)) yield v;
    } catch {
      // A torn or foreign line.
    }
  }
}

/** The last text `read` finds in the JSON lines of `text` that is not blank (a final message), or null. */
export function lastText(text: string, read: (e: Record<string, unknown>) => unknown): string | null {
  let out: string | null = null;
  for (const e of jsonLines(text)) {
    const v = read(e);
    if (typeof v === 'string' && v.trim() !== '') out = v;
  }
  return out;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A count as a CLI reports it: a finite non-negative number, else 0. */
export function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

/** A reported figure: a finite non-negative number, else null (absent or nonsense). */
export function figure(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;
}

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

/** A credential file a CLI's login left in the user's own home, and where the episode's CLI looks for it. */
export interface LoginFile {
  /** In the user's CLI home (outside every sandbox; forkflush reads it, the agent never sees it there). */
  from: string;
  /** Or its content, from a variable (a repository secret on a runner). */
  fromEnv?: string;
  /** In the episode's CLI home. */
  to: string;
}

/** A login file copied into an episode's CLI home. */
export interface InstalledLogin {
  to: string;
}

/**
 * Copies (never moves or links) a login's credential files into the episode's CLI home, mode 0600
 * (a variable with the content wins over the file): to be removed when the session ends, never to
 * travel on with the context.
 */
export async function installLogins(files: LoginFile[], env: NodeJS.ProcessEnv): Promise<InstalledLogin[]> {
  const installed: InstalledLogin[] = [];
  for (const f of files) {
    const fromEnv = f.fromEnv ? env[f.fromEnv]?.trim() : undefined;
    // The user's own file may be a symlink (a dotfiles manager's): it is outside every sandbox.
    const fromFile = fromEnv ? null : await readFile(f.from, 'utf8').catch(() => null);
    const text = fromEnv || fromFile;
    if (!text) continue;
    await mkdir(dirname(f.to), { recursive: true });
    await rm(f.to, { force: true });
    await writeFile(f.to, text, { mode: 0o600, flag: 'wx' });
    installed.push({ to: f.to });
  }
  return installed;
}

/** Removes the copied login files; nothing goes back to the user's (the agent could write them; README, "Keys and logins"). */
export async function removeLogins(installed: InstalledLogin[]): Promise<void> {
  for (const login of installed) await rm(login.to, { force: true });
}

/** Whether a login's credential file is there, or its content is in its variable. */
export function hasLogin(files: LoginFile[], env: NodeJS.ProcessEnv): boolean {
  return files.some((f) => (f.fromEnv && env[f.fromEnv]?.trim()) || existsSync(f.from));
}

/** Whether any of these variables is set (`NAME=value`: to that value). */
export function anySet(names: readonly string[], env: NodeJS.ProcessEnv): boolean {
  return names.some((n) => {
    const [name, value] = n.split('=') as [string, string | undefined];
    return value === undefined ? Boolean(env[name]) : env[name] === value;
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
