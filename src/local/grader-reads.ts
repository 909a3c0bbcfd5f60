// Which files a grader read that git does not have: `init` grades the working tree and prints the
// `git add` line, and a run grades the committed tree; a data file the grader reads but nobody
// committed passes the first and fails the second (issue 20). Reads are seen by access times: each
// candidate's is set before its modification time, which makes the kernel record the next read
// (relatime does, as strictatime does; a filesystem mounted noatime records none, and then the
// answer is "unknown", never a wrong list).
import { readdir, readFile, stat, utimes } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { UNTRACKED_CANDIDATES_MAX_FILES } from '../core/bounds.js';
import { Git } from '../io/git.js';

/**
 * Files of a repository's working tree that git does not track and does not ignore (relative
 * paths); outside a repository, every file but those in hidden folders and node_modules.
 */
export async function untrackedFiles(dir: string): Promise<string[]> {
  const r = await new Git(dir).exec(['ls-files', '--others', '--exclude-standard', '-z'], { check: false });
  if (r.exitCode === 0) return r.stdout.split('\0').filter(Boolean).slice(0, UNTRACKED_CANDIDATES_MAX_FILES);
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .filter((f) => !f.split('/').some((part) => part.startsWith('.') || part === 'node_modules'))
    .slice(0, UNTRACKED_CANDIDATES_MAX_FILES);
}

/**
 * Runs `grade` and says which of `files` (relative to `dir`) it read: null when this filesystem
 * does not record reads. Files it did not read get their access times back.
 */
export async function whileWatchingReads<T>(
  dir: string,
  files: string[],
  grade: () => Promise<T>,
): Promise<{ result: T; read: string[] | null }> {
  const marked: { file: string; atime: Date; mtime: Date; set: number }[] = [];
  for (const f of files) {
    const path = join(dir, f);
    const s = await stat(path).catch(() => null);
    if (!s?.isFile()) continue;
    // A second before the modification: the next read moves it past, whatever the mount's atime policy but noatime.
    const set = Math.floor(s.mtimeMs / 1000) - 1;
    if (
      await utimes(path, set, s.mtime).then(
        () => true,
        () => false,
      )
    )
      marked.push({ file: f, atime: s.atime, mtime: s.mtime, set });
  }
  const first = marked[0];
  // Does a read show here? One of our own on the first file, then its mark again.
  let recorded = false;
  if (first) {
    const path = join(dir, first.file);
    await readFile(path).catch(() => null);
    recorded = ((await stat(path).catch(() => null))?.atimeMs ?? 0) > first.set * 1000;
    await utimes(path, first.set, first.mtime).catch(() => {});
  }
  const result = await grade();
  const read: string[] = [];
  for (const m of marked) {
    const path = join(dir, m.file);
    const s = await stat(path).catch(() => null);
    if (s && s.atimeMs > m.set * 1000) read.push(m.file);
    else await utimes(path, m.atime, m.mtime).catch(() => {});
  }
  return { result, read: recorded ? read : null };
}
