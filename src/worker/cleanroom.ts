// The clean room: forkflush's own view of a repository. Its git directory, index and config are
// forkflush's and the agent never had them, so nothing the agent does to a workspace's git (index
// flags, filters, attribute drivers, hooks, a planted .git) changes what forkflush records. A
// workspace is a plain checkout with a private .git that only borrows the objects; a result is
// the snapshot of the workspace's files, committed on the episode's base and graded in a fresh
// checkout of exactly that commit.
import { appendFile, copyFile, lstat, mkdir, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { emptyFolder } from '../io/agent-files.js';
import { Git, type GitOptions, type GitResult } from '../io/git.js';

/**
 * forkflush's git stores and checks out bytes as they are: whatever .gitattributes the agent
 * wrote (an eol or working-tree-encoding that changes the protected grader the judge runs, a
 * filter, ident), and whatever filters a system or global config defines (git-lfs, say); and
 * `git archive` of its commits (a copied task's take-home command) writes every file as graded,
 * none left out (export-ignore) or expanded (export-subst). $GIT_DIR/info/attributes outranks
 * every .gitattributes file.
 */
export const AS_IS = '* -text -filter -ident !eol !working-tree-encoding -export-subst -export-ignore\n';

/** The identity of commits an agent makes in its workspace's own .git. */
const AGENT_IDENTITY = '[user]\n\tname = forkflush agent\n\temail = agent@forkflush.invalid\n';

/**
 * A git directory of forkflush's (a bare repository it made, with no hooks and its own config)
 * that reads and writes the objects of another repository: `GIT_OBJECT_DIRECTORY`.
 */
export class OwnRepo {
  private readonly git: Git;

  private constructor(
    readonly gitDir: string,
    readonly objects: string,
    options: GitOptions = {},
  ) {
    this.git = new Git(dirname(gitDir), options);
  }

  /** The same repository, its commands run with these options (a signal that stops them, their bound). */
  with(options: GitOptions): OwnRepo {
    return new OwnRepo(this.gitDir, this.objects, { ...this.git.options, ...options });
  }

  /** The signal its commands stop with, if any. */
  get signal(): AbortSignal | undefined {
    return this.git.options.signal;
  }

  /** Opens forkflush's git directory for `objects`, making it if needed (repeat-safe). */
  static async open(gitDir: string, objects: string): Promise<OwnRepo> {
    const own = new OwnRepo(gitDir, objects);
    const head: string[] = await readdir(gitDir).catch(() => []);
    if (!head.includes('HEAD')) {
      await mkdir(dirname(gitDir), { recursive: true });
      await new Git(dirname(gitDir)).exec(['init', '--quiet', '--bare', '--template=', gitDir]);
    }
    return own;
  }

  /** Writes the attributes that keep bytes as they are (again: the agent may have reached the file). */
  async asIs(): Promise<void> {
    // Not its parents: objects that are gone (a repository moved mid-run) are not made anew, empty.
    await mkdir(join(this.gitDir, 'info')).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw e;
    });
    await writeFile(join(this.gitDir, 'info', 'attributes'), AS_IS);
  }

  /** Runs git on these objects, with a work tree and an index of forkflush's choosing. */
  exec(
    args: string[],
    o: { workTree?: string; index?: string; input?: string; check?: boolean } = {},
  ): Promise<GitResult> {
    return this.git.exec(args, {
      ...(o.input !== undefined ? { input: o.input } : {}),
      ...(o.check !== undefined ? { check: o.check } : {}),
      env: {
        GIT_DIR: this.gitDir,
        GIT_OBJECT_DIRECTORY: this.objects,
        ...(o.workTree ? { GIT_WORK_TREE: o.workTree } : {}),
        ...(o.index ? { GIT_INDEX_FILE: o.index } : {}),
      },
    });
  }

  async out(args: string[], o: { workTree?: string; index?: string; input?: string } = {}): Promise<string> {
    return (await this.exec(args, o)).stdout.trim();
  }
}

/** A checkout's repository and the index it was checked out with (checkoutInto). */
export interface CheckoutIndex {
  own: OwnRepo;
  index: string;
}

/**
 * Writes `commit`'s files into `dir` (emptied first). For an agent's workspace (`branch` given) the
 * folder gets a .git of its own: HEAD on the branch, the objects borrowed read-only from
 * `borrowed` (forkflush's store, or a round's view of it), the index that matches the files. The judge's copy gets no .git: through the
 * objects it could read any blob ever stored (a sibling's file, a context), not just the commit's.
 * The index is also written to `index`, outside the folder, for the snapshot.
 */
export async function checkoutInto(
  own: OwnRepo,
  commit: string,
  dir: string,
  index: string,
  branch?: string,
  borrowed = own.objects,
): Promise<void> {
  // Emptied, not removed: the folder may be a job's working directory (GITHUB_WORKSPACE).
  await mkdir(dir, { recursive: true });
  await emptyFolder(dir);
  await rm(index, { force: true });
  await mkdir(dirname(index), { recursive: true });
  await own.asIs();
  // Parallel checkout (one worker per core) makes forking a large repository several times faster.
  await own.exec(['-c', 'checkout.workers=0', 'read-tree', '--reset', '-u', commit], { workTree: dir, index });
  if (!branch) return;
  const dotGit = join(dir, '.git');
  await new Git(dir).exec(['init', '--quiet', '--template=']);
  await writeFile(join(dotGit, 'objects', 'info', 'alternates'), `${borrowed}\n`);
  await mkdir(join(dotGit, 'refs', 'heads', dirname(branch)), { recursive: true });
  await writeFile(join(dotGit, 'refs', 'heads', branch), `${commit}\n`);
  await writeFile(join(dotGit, 'HEAD'), `ref: refs/heads/${branch}\n`);
  await appendFile(join(dotGit, 'config'), AGENT_IDENTITY);
  await copyIndex(index, join(dotGit, 'index'));
}

/**
 * Copies an index with its modification time: git re-reads a file whose recorded time is not
 * older than the index's own ("racily clean"), which is what catches an edit made in the same
 * second as the checkout. A copy stamped later would hide such an edit from the snapshot.
 */
export async function copyIndex(from: string, to: string): Promise<void> {
  await copyFile(from, to);
  const s = await stat(from);
  await utimes(to, s.atime, s.mtime);
}

/**
 * The text of a regular file in an index: empty when there is none (missing, a link, a folder),
 * null when it is larger than `maxBytes` (its text must not be written over).
 */
export async function indexedText(own: OwnRepo, index: string, path: string, maxBytes: number): Promise<string | null> {
  const entries = (await own.out(['ls-files', '-z', '--stage', '--', `:(literal)${path}`], { index }))
    .split('\0')
    .filter((e) => e !== '');
  if (entries.length === 0) return '';
  // One entry at the path itself: a folder there lists the files in it.
  const m = entries.length === 1 ? /^(100644|100755) ([0-9a-f]{40,64}) 0\t(.*)$/s.exec(entries[0] ?? '') : null;
  if (!m || m[3] !== path) return '';
  const size = Number(await own.out(['cat-file', '-s', m[2] as string]));
  if (size > maxBytes) return null;
  return (await own.exec(['cat-file', 'blob', m[2] as string])).stdout;
}

/** Puts a regular file with `text` at `path` in the index (replacing whatever was there). */
export async function writeIndexed(own: OwnRepo, index: string, path: string, text: string): Promise<string> {
  const blob = await own.out(['hash-object', '-w', '--no-filters', '--stdin'], { input: text });
  await own.exec(['update-index', '--add', '--replace', '--cacheinfo', `100644,${blob},${path}`], { index });
  return own.out(['write-tree'], { index });
}

/** A commit of `tree` on `parent` (the episode's base: a result never carries the agent's commits). */
export async function commitTree(own: OwnRepo, tree: string, parent: string, message: string): Promise<string> {
  return own.out(['commit-tree', tree, '-p', parent, '-F', '-'], { input: message });
}

/** `git diff --shortstat` of an index against a commit. */
export async function diffStat(own: OwnRepo, index: string, base: string): Promise<string> {
  return own.out(['diff', '--cached', '--shortstat', base], { index });
}

/**
 * Puts back the tracked files a command changed in a checkout (`index` is the checkout's): those
 * it modified, deleted or replaced are written again from the index, whatever is in their way.
 * What it added that git does not track stays. Returns the paths put back.
 */
export async function restoreTracked(own: OwnRepo, dir: string, index: string): Promise<string[]> {
  await own.asIs();
  // Files whose status changed but not their content (the sandbox's hand-over changes their
  // owner) are not changes: the index is refreshed first, hashing those again.
  await own.exec(['update-index', '-q', '--refresh'], { workTree: dir, index, check: false });
  // -z output, untrimmed: a name may begin or end with a space.
  const changed = (await own.exec(['diff-files', '--name-only', '-z'], { workTree: dir, index })).stdout
    .split('\0')
    .filter(Boolean);
  if (changed.length > 0) {
    await own.exec(['checkout-index', '--force', '-u', '-z', '--stdin'], {
      workTree: dir,
      index,
      input: `${changed.join('\0')}\0`,
    });
  }
  return changed;
}

/**
 * What a checkout holds that its commit does not track, ignored or not (what setup made): whole
 * folders as `dir/`, the paths relative to the checkout.
 */
export async function untrackedPaths(
  own: OwnRepo,
  dir: string,
  index: string,
  o: { folders?: boolean } = {},
): Promise<string[]> {
  // With folders (the default), a folder of untracked files is named once, as `dir/`.
  const args = ['ls-files', '--others', ...(o.folders === false ? [] : ['--directory']), '-z'];
  const listed = await own.exec(args, { workTree: dir, index });
  return listed.stdout.split('\0').filter(Boolean);
}

/**
 * Writes these tracked files of `dir` afresh from the index: removed first, so each is a new
 * file, and a hard link made to the old one no longer reaches it.
 */
export async function rewriteFiles(own: OwnRepo, dir: string, index: string, files: string[]): Promise<void> {
  if (files.length === 0) return;
  for (const f of files) await rm(join(dir, f), { recursive: true, force: true });
  await own.exec(['checkout-index', '--force', '-z', '--stdin'], { workTree: dir, index, input: files.join('\0') });
}

/**
 * Ignore patterns that match exactly these paths (anchored at the top; a folder as `dir/`), for
 * `snapshot`'s `excludes`. A name with a newline cannot be written as a pattern and is left out.
 */
export function excludePatterns(paths: string[]): string {
  const lines = paths
    .filter((p) => !p.includes('\n'))
    .map((p) => `/${p.replace(/[\\*?[]/g, (c) => `\\${c}`).replace(/ +$/, (spaces) => spaces.replace(/ /g, '\\ '))}`);
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

/**
 * Writes `text` at `path` in a checkout and its index (a file forkflush adds before the agent
 * runs: core/losers.ts), and returns the index's tree, what the episode starts from. Refused
 * (null) where a link or a non-folder stands on the way, or the path is not a regular file:
 * forkflush never writes through a link into a place setup or an earlier agent chose.
 */
export async function writeTracked(
  own: OwnRepo,
  dir: string,
  index: string,
  path: string,
  text: string,
): Promise<string | null> {
  const parts = path.split('/');
  for (let i = 1; i < parts.length; i++) {
    const s = await lstat(join(dir, ...parts.slice(0, i))).catch(() => null);
    if (s && !s.isDirectory()) return null;
  }
  const s = await lstat(join(dir, path)).catch(() => null);
  if (s && !s.isFile()) return null;
  const tree = await writeIndexed(own, index, path, text);
  await own.exec(['checkout-index', '--force', '-z', '--stdin'], { workTree: dir, index, input: `${path}\0` });
  return tree;
}
