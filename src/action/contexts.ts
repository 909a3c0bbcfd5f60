// Agent contexts (transcripts) on the forge: anyone who can read the repository can read its
// refs, and a transcript holds whatever the agent read and printed. With a key (the repository
// secret FORKFLUSH_CONTEXT_KEY) a context is pushed as one AES-256-GCM blob, bound to its run and
// episode; without one it is pushed as files in a private repository and not at all in a public one.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join, normalize, sep } from 'node:path';
import { UserError } from '../core/errors.js';

/** How an episode's context is kept on the forge. */
export type ContextStore = 'encrypted' | 'plain' | 'none';

/** The one file of an encrypted context's tree. */
export const SEALED_CONTEXT = 'context.ffc';

const MAGIC = Buffer.from('FFC1');
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** FORKFLUSH_CONTEXT_KEY: 32 random bytes, in base64 (44 characters) or hex (64). */
export function parseContextKey(text: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (key.length !== 32 || (!/^[0-9a-fA-F]{64}$/.test(t) && key.toString('base64') !== t)) {
    throw new UserError(
      'FORKFLUSH_CONTEXT_KEY must be 32 random bytes in base64 or hex: make one with `openssl rand -base64 32` and store it as a repository secret',
    );
  }
  return key;
}

/** Where contexts go: encrypted with a key; else as files in a private repository, else nowhere. */
export function contextStore(key: Buffer | null, privateRepository: boolean | null): ContextStore {
  if (key) return 'encrypted';
  return privateRepository === true ? 'plain' : 'none';
}

/** Whether the job's repository is private, from the event that started the job (null: unknown). */
export async function repositoryIsPrivate(eventPath: string | undefined): Promise<boolean | null> {
  if (!eventPath) return null;
  try {
    const event = JSON.parse(await readFile(eventPath, 'utf8')) as { repository?: { private?: unknown } };
    return typeof event.repository?.private === 'boolean' ? event.repository.private : null;
  } catch {
    return null;
  }
}

function aad(run: string, episode: string): Buffer {
  return Buffer.from(`forkflush context ${run} ${episode}`);
}

export function encryptContext(key: Buffer, run: string, episode: string, archive: Buffer): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad(run, episode));
  const body = Buffer.concat([cipher.update(archive), cipher.final()]);
  return Buffer.concat([MAGIC, iv, body, cipher.getAuthTag()]);
}

/** The archive, or null when the blob was not sealed with this key for this run and episode. */
export function decryptContext(key: Buffer, run: string, episode: string, sealed: Buffer): Buffer | null {
  if (sealed.length < MAGIC.length + IV_BYTES + TAG_BYTES || !sealed.subarray(0, 4).equals(MAGIC)) return null;
  const iv = sealed.subarray(4, 4 + IV_BYTES);
  const tag = sealed.subarray(sealed.length - TAG_BYTES);
  const body = sealed.subarray(4 + IV_BYTES, sealed.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(aad(run, episode));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(body), decipher.final()]);
  } catch {
    return null;
  }
}

/**
 * A folder's regular files as one buffer: for each, its path's length and path, an executable
 * flag, its size and its bytes. Links and special files are not contexts and are left out.
 */
export async function packFolder(dir: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  const walk = async (rel: string) => {
    const entries = await readdir(join(dir, rel), { withFileTypes: true });
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) await walk(path);
      else if (e.isFile()) {
        const full = join(dir, path);
        const data = await readFile(full);
        const exec = ((await stat(full)).mode & 0o111) !== 0;
        const name = Buffer.from(path);
        const head = Buffer.alloc(13);
        head.writeUInt32BE(name.length, 0);
        head.writeUInt8(exec ? 1 : 0, 4);
        head.writeBigUInt64BE(BigInt(data.length), 5);
        parts.push(head.subarray(0, 4), name, head.subarray(4), data);
      }
    }
  };
  await walk('');
  return Buffer.concat(parts);
}

/** Writes a packed folder into `dir`; a path that would leave the folder is refused. */
export async function unpackFolder(archive: Buffer, dir: string): Promise<void> {
  let at = 0;
  while (at < archive.length) {
    const nameLength = archive.readUInt32BE(at);
    const path = archive.subarray(at + 4, at + 4 + nameLength).toString();
    at += 4 + nameLength;
    const exec = archive.readUInt8(at) === 1;
    const size = Number(archive.readBigUInt64BE(at + 1));
    at += 9;
    const data = archive.subarray(at, at + size);
    at += size;
    const target = normalize(join(dir, path));
    if (path.startsWith('/') || path.split('/').includes('..') || !target.startsWith(dir + sep)) {
      throw new Error(`a context holds the path ${JSON.stringify(path)}, outside its folder`);
    }
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, data, { mode: exec ? 0o755 : 0o644 });
  }
}
