// A task folder that is not a repository's root (a plain folder, or a subfolder of a monorepo)
// becomes a repository of its own: a copy in the run folder, committed.
import { cp, lstat, mkdir, readdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { RUNS_FOLDER } from '../core/names.js';
import { Git } from '../io/git.js';
import { AS_IS } from '../worker/cleanroom.js';

/** What a copy never takes: git's own folder, forkflush's runs, installed packages. */
const NEVER_COPIED = new Set([RUNS_FOLDER, '.git', 'node_modules']);

/** Copies the task folder to `repo` and commits it there; what was left out is said in `warnings`. */
export async function copyTask(taskDir: string, repo: string, warnings: string[]): Promise<void> {
  const left = await copyTaskFiles(taskDir, repo);
  if (left.length > 0)
    warnings.push(
      `left out of the copy, as git keeps only files and links: ${left.slice(0, 5).join(', ')}${left.length > 5 ? ` and ${left.length - 5} more` : ''}`,
    );
  const git = new Git(repo);
  await git.exec(['init', '--quiet', '--initial-branch=main']);
  // Its bytes as they are, and the take-home command's archive too (an agent's .gitattributes).
  await mkdir(join(repo, '.git', 'info'), { recursive: true });
  await writeFile(join(repo, '.git', 'info', 'attributes'), AS_IS);
  await git.exec(['add', '-A']);
  await git.exec(['commit', '--quiet', '-m', `forkflush: the task folder ${taskDir}`]);
}

/**
 * A task folder's files, as a run on a copy starts from them (no .git, runs or node_modules). In a
 * monorepo only what its repository would take (tracked, or untracked and not ignored): the
 * root's .gitignore keeps a .env out of the copy as it keeps it out of the repository.
 * Returns what it left out: FIFOs, sockets and devices, which a commit cannot hold (and cp refuses).
 */
export async function copyTaskFiles(taskDir: string, to: string): Promise<string[]> {
  await mkdir(to, { recursive: true });
  const left: string[] = [];
  const filter = async (path: string) => {
    const s = await lstat(path);
    const kept = s.isFile() || s.isDirectory() || s.isSymbolicLink();
    if (!kept) left.push(path);
    return kept;
  };
  const entries = (await enclosingRepositoryTakes(taskDir)) ?? (await readdir(taskDir));
  for (const entry of entries) {
    if (NEVER_COPIED.has(entry.split('/')[0] ?? '')) continue;
    await mkdir(dirname(join(to, entry)), { recursive: true });
    // Links as written: a relative one made absolute would lead out of the copy, into the user's folder.
    await cp(join(taskDir, entry), join(to, entry), { recursive: true, filter, verbatimSymlinks: true });
  }
  return left;
}

/**
 * The paths below `dir` that the repository around it would commit, or null outside any
 * repository, or where it would commit none (a folder its .gitignore keeps out: the user's own
 * scratch, copied whole as a plain folder is).
 */
async function enclosingRepositoryTakes(dir: string): Promise<string[] | null> {
  const git = new Git(dir);
  const inside = await git.exec(['rev-parse', '--is-inside-work-tree'], { check: false });
  if (inside.exitCode !== 0 || inside.stdout.trim() !== 'true') return null;
  const listed = await git.exec(['ls-files', '--cached', '--others', '--exclude-standard', '-z']);
  // A file removed from the work tree is still in the index: there is nothing to copy.
  const paths = listed.stdout.split('\0').filter(Boolean);
  const present = await Promise.all(
    paths.map((p) =>
      lstat(join(dir, p)).then(
        () => p,
        () => null,
      ),
    ),
  );
  const taken = [...new Set(present.filter((p): p is string => p !== null))];
  return taken.length > 0 ? taken : null;
}
