// The git objects a round's agents borrow: the repository's as they were when the round's first
// episode was prepared, hard-linked into the run folder. What a sibling writes while the round
// runs (its snapshot's tree and blobs, its result commit) is not among them, so no branch can copy
// another's work of the same round and win a tie with it. A link copies no data; where links
// cannot be made (another filesystem, a repository of another user's), the episode borrows the
// live objects and its result says so.
import { link, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';

/** The objects folder the round's workspaces borrow, or why the live one is borrowed instead. */
export type RoundObjects = { dir: string } | { note: string };

/**
 * The round's folder under `root`, made by `fill` the first time (atomically: a crash leaves no
 * half-made one in use): `linkObjects` at the round's start; for a round already begun without one
 * (a run resumed by a release that made none), a pack of what its bases reach (local/forge.ts).
 */
export async function roundObjects(
  root: string,
  round: number,
  fill: (dir: string) => Promise<void>,
): Promise<RoundObjects> {
  const dir = join(root, `round-${round}`);
  if ((await readdir(dir).catch(() => null)) !== null) return { dir };
  const partial = `${dir}.partial`;
  try {
    await rm(partial, { recursive: true, force: true });
    await fill(partial);
    await rename(partial, dir);
    return { dir };
  } catch (e) {
    await rm(partial, { recursive: true, force: true }).catch(() => {});
    const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message.split('\n')[0];
    return {
      note: `the repository's objects could not be linked into the run folder (${why}): this episode could read its siblings' work of this round`,
    };
  }
}

/** Fills a round's folder with hard links to every file of `objects`. */
export const linkObjects = (objects: string) => (dir: string) => linkTree(objects, dir, objects);

/** Removes a settled round's folder (and one left half-made). */
export async function dropRoundObjects(root: string, round: number): Promise<void> {
  for (const dir of [join(root, `round-${round}`), join(root, `round-${round}.partial`)])
    await rm(dir, { recursive: true, force: true });
}

/** Hard-links every file of `from` into `to`; the alternates file is rewritten with absolute paths. */
async function linkTree(from: string, to: string, objects: string): Promise<void> {
  await mkdir(to, { recursive: true });
  const entries = await readdir(from, { withFileTypes: true }).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return [];
    throw e;
  });
  await Promise.all(
    entries.map(async (e) => {
      const [src, dst] = [join(from, e.name), join(to, e.name)];
      // git's own temporary files and quarantines: half-written, and gone soon.
      if (/^(?:tmp_|incoming-)/.test(e.name)) return;
      if (e.isDirectory()) return linkTree(src, dst, objects);
      if (src === join(objects, 'info', 'alternates')) {
        const lines = (await readFile(src, 'utf8')).split('\n').map((l) => l.trim());
        const paths = lines.filter((l) => l !== '' && !l.startsWith('#'));
        return writeFile(dst, paths.map((l) => (isAbsolute(l) ? l : resolve(objects, l))).join('\n'));
      }
      if (!e.isFile()) return;
      await link(src, dst).catch((err: NodeJS.ErrnoException) => {
        // An object git removed (pruned, or packed) while the folder was made: nothing to borrow.
        if (err.code !== 'ENOENT') throw err;
      });
    }),
  );
}
