// What an agent leaves in the folders it could write, made safe for forkflush to read, copy and
// remove: forkflush reads usage files and transcripts there after the sandbox is gone, and copies
// contexts on. A symbolic link or a special file (a FIFO, a socket, a device) would make forkflush
// read or write what it points at, outside the agent's reach, or block on it. A name that is not
// UTF-8 cannot be named from JavaScript's strings, and a path past PATH_MAX cannot be opened: both
// would make every later copy or removal of the folder fail. All of these are removed. Names are
// handled as bytes throughout, and trees are removed by `rm -rf` (which walks with openat, to any
// depth), never by a walk of string paths.
//
// A workspace and the judge's checkout are swept too (`sweepTree`), before forkflush's git or any
// walk of its reads them: git opens some files of a work tree by name, with a blocking open()
// (.gitignore, .gitattributes, a nested .git's HEAD and refs), and follows what leads out of the
// tree there (a .git file, a link to a FIFO elsewhere). Other links stay: repositories commit them,
// and git records a link's target as text without following it.
import { execFile } from 'node:child_process';
import type { Dirent } from 'node:fs';
import { lstat, readdir, rename, unlink } from 'node:fs/promises';
import { promisify } from 'node:util';
import {
  CONTEXT_FILE_MAX_BYTES,
  CONTEXT_MAX_BYTES,
  CONTEXT_MAX_ENTRIES,
  CONTEXT_PATH_MAX_BYTES,
  GIT_TIMEOUT_MS,
  NOTE_NAMED_TRAPS_MAX,
} from '../core/bounds.js';
import { withoutRelativePaths } from './executables.js';
import { runProcess } from './process.js';

const execAsync = promisify(execFile);
const exec = (file: string, args: string[]) => execAsync(file, args, { env: withoutRelativePaths(process.env) });

export interface Cleaned {
  /** Symbolic links and special files. */
  links: number;
  /** Entries whose name is not UTF-8. */
  names: number;
  /** Folders nested past CONTEXT_PATH_MAX_BYTES. */
  deep: number;
  /** Files past CONTEXT_FILE_MAX_BYTES (by their apparent size: sparse ones too). */
  big: number;
  /** Folders emptied because their files passed the total they may hold. */
  emptied: number;
  /** Folders emptied because they held more entries than they may. */
  crowded: number;
  /**
   * Entries that could stall forkflush's git or lead it out of the tree: special files in a
   * workspace or the judge's checkout, and anywhere what git follows at its own names (TRAP_RULE).
   */
  traps: number;
  /** The first few of them (the note names them), relative to the folder swept. */
  trapPaths: string[];
}

export const NOTHING_CLEANED: Readonly<Cleaned> = {
  links: 0,
  names: 0,
  deep: 0,
  big: 0,
  emptied: 0,
  crowded: 0,
  traps: 0,
  trapPaths: [],
};

/** Adds what one cleaning removed to a running total. */
export function addCleaned(total: Cleaned, more: Cleaned): void {
  for (const k of ['links', 'names', 'deep', 'big', 'emptied', 'crowded', 'traps'] as const) total[k] += more[k];
  total.trapPaths = [...total.trapPaths, ...more.trapPaths].slice(0, NOTE_NAMED_TRAPS_MAX);
}

/**
 * What git could block on or be led out of the tree by, as find(1) tests it: special files (FIFOs,
 * sockets, devices: git records none of them); links at the names git opens (.gitignore,
 * .gitattributes, .gitmodules); a .git that is not a folder (a link, or a file naming a git
 * directory elsewhere); and in a .git folder, links and a commondir file (where git reads refs).
 * Git records nothing of the last three kinds either. Links elsewhere are kept.
 */
const TRAP_RULE = [
  ...['(', '-type', 'p', '-o', '-type', 's', '-o', '-type', 'b', '-o', '-type', 'c', ')'],
  ...['-o', '(', '-name', '.gitignore', '-o', '-name', '.gitattributes', '-o', '-name', '.gitmodules', ')'],
  ...['-type', 'l'],
  ...['-o', '-name', '.git', '!', '-type', 'd'],
  ...['-o', '-path', '*/.git/*', '(', '-type', 'l', '-o', '-name', 'commondir', '!', '-type', 'd', ')'],
];

/**
 * Removes from a tree an agent (or code it wrote) had in its hands whatever TRAP_RULE names, at
 * any depth, without following a link or opening a file: one find(1), names as bytes. A folder it
 * cannot read (one the agent locked against itself) is given back to its owner and swept again.
 * The .git folders of repositories nested in it go too (not after setup, whose checkouts the grader
 * may ask git about: `nestedRepos: false`). Bounded like a git command and stopped by
 * `signal`. Returns what went: counted, and every path (relative to `dir`); `complete` is false
 * when there were more names than it keeps (10 MB of them).
 */
export async function sweepTree(
  dir: string,
  signal?: AbortSignal,
  o: { nestedRepos?: boolean } = {},
): Promise<{ cleaned: Cleaned; paths: string[]; complete: boolean }> {
  const found = new Set<string>();
  let complete = true;
  const find = async (rule: string[], then: string[]) => {
    const r = await runProcess('find', ['.', ...rule, '-print0', ...then], {
      cwd: dir,
      timeoutMs: GIT_TIMEOUT_MS,
      maxOutput: 10_000_000,
      ...(signal ? { signal } : {}),
    });
    if (r.stopped !== null || r.spawnError) throw new Error(`${dir} could not be swept: ${r.stopped ?? r.spawnError}`);
    // Names past the bound are not known (nor what they were): a caller that must know each says so.
    if (r.outputCut) complete = false;
    for (const name of r.stdout.split('\0')) if (name) found.add(name.replace(/^\.\//, ''));
    return r.exitCode;
  };
  for (let pass = 0; pass < 2; pass++) {
    if ((await find(['-mindepth', '1', '(', ...TRAP_RULE, ')'], ['-delete'])) === 0) break;
    // chmod applies a folder's mode before it walks into it; it never follows links in the tree.
    await exec('chmod', ['-R', 'u+rwX', '--', dir]).catch(() => {});
  }
  // A repository nested in the tree: git would record its folder as a link to a commit it does not
  // have (its files lost), and list it as one entry (a file under it unseen). Its files stay.
  if (o.nestedRepos !== false)
    await find(['-mindepth', '2', '-name', '.git', '-type', 'd', '-prune'], ['-exec', 'rm', '-rf', '--', '{}', '+']);
  const paths = [...found];
  return {
    cleaned: { ...NOTHING_CLEANED, traps: paths.length, trapPaths: paths.slice(0, NOTE_NAMED_TRAPS_MAX) },
    paths,
    complete,
  };
}

/** What a context may hold in all: bytes of files, and entries (its walk stops past them). */
export const CONTEXT_LIMITS = { bytes: CONTEXT_MAX_BYTES, entries: CONTEXT_MAX_ENTRIES } as const;

/**
 * Removes every symbolic link and special file under `dir`, every entry whose name is not UTF-8,
 * and every folder nested too deep to copy; and everything, when what is left passes `limits`
 * (the walk stops at the entry past them). Returns what went.
 */
export async function cleanAgentFolder(
  dir: string,
  limits: { bytes: number; entries: number } | null = null,
): Promise<Cleaned> {
  const cleaned: Cleaned = { ...NOTHING_CLEANED };
  const kept = { bytes: 0, entries: 0, maxEntries: limits?.entries ?? Number.POSITIVE_INFINITY };
  const root = Buffer.from(dir);
  await walk(root, root.length + 1, false, cleaned, kept);
  const crowded = kept.entries > kept.maxEntries;
  if (crowded || kept.bytes > (limits?.bytes ?? Number.POSITIVE_INFINITY)) {
    await emptyFolder(dir);
    if (crowded) cleaned.crowded++;
    else cleaned.emptied++;
  }
  return cleaned;
}

const DOT_GIT = Buffer.from('.git');
const COMMONDIR = Buffer.from('commondir');

async function walk(
  dir: Buffer,
  rootLength: number,
  inGit: boolean,
  cleaned: Cleaned,
  kept: { bytes: number; entries: number; maxEntries: number },
): Promise<void> {
  const entries = (await readdir(dir, { withFileTypes: true, encoding: 'buffer' }).catch(() => [])) as Dirent<Buffer>[];
  for (const e of entries) {
    // Past the entries it may hold, the folder is emptied whole: no need to look further.
    if (++kept.entries > kept.maxEntries) return;
    const path = Buffer.concat([dir, Buffer.from('/'), e.name]);
    if (!isUtf8(e.name)) {
      await dropTree(dir, path);
      cleaned.names++;
    } else if (e.isDirectory()) {
      if (path.length > CONTEXT_PATH_MAX_BYTES) {
        await dropTree(dir, path);
        cleaned.deep++;
      } else await walk(path, rootLength, inGit || e.name.equals(DOT_GIT), cleaned, kept);
    } else if (!e.isFile()) {
      await unlink(path).catch(() => {});
      cleaned.links++;
    } else if (e.name.equals(DOT_GIT) || (inGit && e.name.equals(COMMONDIR))) {
      // A git directory named from here (TRAP_RULE): a context is committed with git on GitHub.
      await unlink(path).catch(() => {});
      cleaned.traps++;
      if (cleaned.trapPaths.length < NOTE_NAMED_TRAPS_MAX)
        cleaned.trapPaths = [...cleaned.trapPaths, path.subarray(rootLength).toString()];
    } else {
      const size = (await lstat(path).catch(() => null))?.size ?? 0;
      if (size > CONTEXT_FILE_MAX_BYTES) {
        await unlink(path).catch(() => {});
        cleaned.big++;
      } else kept.bytes += size;
    }
  }
}

function isUtf8(name: Buffer): boolean {
  return Buffer.from(name.toString('utf8'), 'utf8').equals(name);
}

/** Removes an entry whatever its name: renamed to one JavaScript can pass to `rm`, then removed. */
async function dropTree(dir: Buffer, path: Buffer): Promise<void> {
  const plain = `${dir.toString('utf8')}/.forkflush-removed-${process.pid}-${Math.random().toString(36).slice(2)}`;
  await rename(path, plain).catch(() => {});
  await removeTree(plain);
}

/** A summary of the unusual things cleanAgentFolder removed, for a note (null when none; links are routine). */
export function cleanedNote(c: Cleaned): string | null {
  const parts = [
    c.names ? `${c.names} entries whose names are not UTF-8` : '',
    c.deep ? `${c.deep} folders nested deeper than ${CONTEXT_PATH_MAX_BYTES} bytes of path` : '',
    c.big ? `${c.big} files larger than ${CONTEXT_FILE_MAX_BYTES / 1024 / 1024} MB` : '',
    c.emptied ? `everything in a context whose files passed ${CONTEXT_MAX_BYTES / 1024 / 1024} MB in all` : '',
    c.crowded
      ? `everything in a context of more than ${CONTEXT_MAX_ENTRIES.toLocaleString('en')} files and folders`
      : '',
    c.traps
      ? `${c.traps} special files or git redirects that could stall forkflush's git (${c.trapPaths.map((p) => JSON.stringify(p)).join(', ')}${c.traps > c.trapPaths.length ? ', ...' : ''})`
      : '',
  ].filter(Boolean);
  return parts.length > 0 ? `removed from the folders the agent wrote: ${parts.join(', ')}` : null;
}

/**
 * Runs a removal; if it fails (a folder the agent made unreadable or unwritable: for its owner, not
 * for root), gives the tree back to its owner and runs it again, which then throws if it fails.
 */
async function removing(tree: string, remove: () => Promise<unknown>): Promise<void> {
  try {
    await remove();
  } catch {
    // chmod applies a folder's mode before it walks into it; it never follows links in the tree.
    await exec('chmod', ['-R', 'u+rwX', '--', tree]).catch(() => {});
    await remove();
  }
}

/** Removes a folder and everything in it, whatever the names, modes and depth; nothing if it is not there. */
export async function removeTree(path: string): Promise<void> {
  await removing(path, () => exec('rm', ['-rf', '--', path]));
}

/** Empties a folder (kept: it may be a job's working directory), whatever the names and however deep. */
export async function emptyFolder(dir: string): Promise<void> {
  // find reads the names itself, as bytes; one rm for all of them.
  await removing(dir, () =>
    exec('find', [dir, '-mindepth', '1', '-maxdepth', '1', '-exec', 'rm', '-rf', '--', '{}', '+']),
  );
}

/** The files of the repositories nested in `dir` (not their .git), relative to it: git lists none of them; null: more than 10 MB of names. */
export async function nestedRepoFiles(dir: string, signal?: AbortSignal): Promise<string[] | null> {
  const run = async (args: string[]) => {
    const r = await runProcess('find', args, {
      cwd: dir,
      timeoutMs: GIT_TIMEOUT_MS,
      maxOutput: 10_000_000,
      ...(signal ? { signal } : {}),
    });
    if (r.stopped !== null || r.spawnError) throw new Error(`${dir} could not be listed: ${r.stopped ?? r.spawnError}`);
    return r.outputCut ? null : r.stdout.split('\0').filter(Boolean);
  };
  const roots = await run(['.', '-mindepth', '2', '-name', '.git', '-type', 'd', '-prune', '-printf', '%h\\0']);
  if (roots === null || roots.length === 0) return roots;
  const inside = ['(', '-name', '.git', '-type', 'd', '-prune', ')', '-o', '!', '-type', 'd', '-print0'];
  const files = await run([...roots, ...inside]);
  return files && [...new Set(files.map((f) => f.replace(/^\.\//, '')))];
}
