// The clean room: forkflush's own view of a repository. Its git directory, index and config are
// forkflush's and the agent never had them, so nothing the agent does to a workspace's git (index
// flags, filters, attribute drivers, hooks, a planted .git) changes what forkflush records. A
// workspace is a plain checkout with a private .git that only borrows the objects; a result is
// the snapshot of the workspace's files, committed on the episode's base and graded in a fresh
// checkout of exactly that commit.
import { appendFile, copyFile, lstat, mkdir, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  RECORDED_CHANGES_MAX_BYTES,
  RECORDED_CHANGES_MAX_FILES,
  RECORDED_FILE_MAX_BYTES,
  RECORDED_TREE_LISTING_MAX_BYTES,
} from '../core/bounds.js';
import { type Cleaned, emptyFolder, NOTHING_CLEANED, sweepTree } from '../io/agent-files.js';
import { Git, type GitOptions, GitOutputTooLongError, type GitResult } from '../io/git.js';
import { runProcess } from '../io/process.js';

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
    await mkdir(join(this.gitDir, 'info'), { recursive: true });
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
async function copyIndex(from: string, to: string): Promise<void> {
  await copyFile(from, to);
  const s = await stat(from);
  await utimes(to, s.atime, s.mtime);
}

/**
 * What running the code writes beside it, never the agent's work: Python's bytecode and pytest's
 * cache. Grading in the workspace ("$FORKFLUSH_GRADE") writes them into a protected tests/ folder,
 * which would void every score; the judge's checkout never has them (a stale .pyc can stand in
 * for its source). Tracked files are recorded whatever these say.
 */
const RUNTIME_CACHES = '__pycache__/\n*.py[co]\n.pytest_cache/\n';

export interface Snapshot {
  /** The workspace's files, with protected paths as they are at the base. */
  tree: string;
  /** Protected paths the agent changed (restored in the snapshot). */
  protectedChanged: string[];
  /** The snapshot's index (forkflush's, outside the workspace). */
  index: string;
  /** What was swept out of the workspace first (sweepTree): git would have blocked on it. */
  cleaned: Cleaned;
}

/** The ignore file a snapshot applies beside the workspace's .gitignore (setup's outputs, RUNTIME_CACHES). */
const ignoreFileOf = (index: string) => `${index}.exclude`;

/**
 * Records the workspace's files as git would commit them (its .gitignore applies; its .git is
 * ignored), starting from the index made at checkout so unchanged files are not hashed again.
 * What could stall git is swept out first (sweepTree: special files, git's redirects).
 * Protected paths are then put back as they are at `base`. `excludes`: a file of ignore patterns
 * for what is not the agent's work (what setup made, `setupOutputs`), applied like a global
 * ignore file.
 */
export async function snapshot(
  own: OwnRepo,
  workspace: string,
  checkoutIndex: string,
  index: string,
  base: string,
  protectedGlobs: string[],
  excludes: string | null = null,
): Promise<Snapshot> {
  await own.asIs();
  const { cleaned } = await sweepTree(workspace, own.signal);
  await copyIndex(checkoutIndex, index);
  // The repository's ignore rules, setup's outputs and caches that running code writes, never the
  // user's own ignore file (as on GitHub).
  const ignoreFile = ignoreFileOf(index);
  await writeFile(ignoreFile, `${excludes ? await readFile(excludes, 'utf8') : ''}${RUNTIME_CACHES}`);
  const ignore = ['-c', `core.excludesFile=${ignoreFile}`];
  await refuseOversized(own, workspace, index, ignore);
  const add = () => own.exec([...ignore, 'add', '--all'], { workTree: workspace, index, check: false });
  let added = await add();
  if (added.exitCode !== 0) {
    // Files the agent made unreadable to itself are still its work: give them back to the owner.
    await runProcess('chmod', ['-R', 'u+rwX', workspace], {
      cwd: workspace,
      ...(own.signal ? { signal: own.signal } : {}),
    });
    added = await add();
    if (added.exitCode !== 0) throw new Error(`the workspace could not be recorded: ${added.stderr.trim()}`);
  }
  const specs = protectedGlobs.map((g) => `:(glob)${g}`);
  let protectedChanged: string[] = [];
  if (specs.length > 0) {
    const diff = await own.out(['diff', '--cached', '--name-only', '--no-renames', base, '--', ...specs], {
      workTree: workspace,
      index,
    });
    protectedChanged = diff === '' ? [] : diff.split('\n');
    if (protectedChanged.length > 0) {
      await own.exec(['reset', '--quiet', base, '--', ...specs], { workTree: workspace, index });
    }
  }
  const tree = await own.out(['write-tree'], { index });
  await refuseLongListing(own, tree);
  return { tree, protectedChanged, index, cleaned };
}

/**
 * Files in the workspace that its own .gitignore leaves out (not setup's outputs or RUNTIME_CACHES),
 * after `snapshot`: for an episode that recorded no change, what it may have written where no
 * commit takes it. At most `max` paths (a folder ignored whole as one).
 */
export async function ignoredFiles(own: OwnRepo, workspace: string, index: string, max = 5): Promise<string[]> {
  const ignore = ['-c', `core.excludesFile=${ignoreFileOf(index)}`];
  const status = await own.exec([...ignore, 'status', '--porcelain', '-z', '--ignored'], {
    workTree: workspace,
    index,
    check: false,
  });
  const ignored = status.stdout.split('\0').flatMap((x) => (x.startsWith('!! ') ? [x.slice(3)] : []));
  if (status.exitCode !== 0 || ignored.length === 0) return [];
  // Those forkflush's own file leaves out, matched where no .gitignore is (an empty folder).
  const empty = `${index}.empty`;
  await mkdir(empty, { recursive: true });
  const ours = await own.exec([...ignore, 'check-ignore', '--no-index', '-z', '--stdin'], {
    workTree: empty,
    input: ignored.join('\0'),
    check: false,
  });
  const forkflush = new Set(ours.stdout.split('\0'));
  return ignored.filter((p) => !forkflush.has(p)).slice(0, max);
}

/** Throws when the tree's paths, listed, pass what forkflush lists of a tree (RECORDED_TREE_LISTING_MAX_BYTES). */
async function refuseLongListing(own: OwnRepo, tree: string): Promise<void> {
  const listed = await own
    .exec(['ls-tree', '-r', '-z', '--name-only', tree])
    .then((r) => r.stdout.length)
    .catch((e: unknown) => {
      if (e instanceof GitOutputTooLongError) return Number.POSITIVE_INFINITY;
      throw e;
    });
  if (listed > RECORDED_TREE_LISTING_MAX_BYTES)
    throw new Error(
      `the workspace's paths, listed, pass ${megabytes(RECORDED_TREE_LISTING_MAX_BYTES)} (fewer files, or shorter names); keep generated files out with .gitignore`,
    );
}

/**
 * Throws when the files the agent added or changed (those git would record: its ignore rules
 * apply) are too large to record, before git reads a byte of them: a sparse file of a terabyte
 * costs the agent nothing to make and would take git hours to hash.
 */
async function refuseOversized(own: OwnRepo, workspace: string, index: string, ignore: string[]): Promise<void> {
  // Quoted names are ASCII (octal escapes for other bytes): exact, whatever the agent named its files.
  const listed = await own.out(
    [...ignore, '-c', 'core.quotePath=true', 'ls-files', '--others', '--modified', '--exclude-standard'],
    {
      workTree: workspace,
      index,
    },
  );
  let total = 0;
  let files = 0;
  for (const line of listed.split('\n').filter(Boolean)) {
    const name = unquoteGitPath(line);
    // A deleted file is listed as modified: it costs nothing.
    const s = await lstat(Buffer.concat([Buffer.from(`${workspace}/`), name])).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT' || e.code === 'ENOTDIR') return null;
      // Unseen is not small: a path too long with the workspace before it (ENAMETOOLONG) is not recorded.
      throw new Error(`${JSON.stringify(name.toString('utf8').slice(0, 80))}... cannot be examined (${e.code})`);
    });
    if (!s) continue;
    if (++files > RECORDED_CHANGES_MAX_FILES)
      throw new Error(
        `more than ${RECORDED_CHANGES_MAX_FILES.toLocaleString('en-US')} files were added or changed; keep generated files (node_modules, build output) out with .gitignore`,
      );
    if (!s.isFile()) continue;
    const shown = JSON.stringify(name.toString('utf8'));
    if (s.size > RECORDED_FILE_MAX_BYTES)
      throw new Error(
        `${shown} is ${megabytes(s.size)}, more than a file may be (${megabytes(RECORDED_FILE_MAX_BYTES)}, GitHub's own limit); keep it out with .gitignore`,
      );
    total += s.size;
    if (total > RECORDED_CHANGES_MAX_BYTES)
      throw new Error(
        `the files added or changed pass ${megabytes(RECORDED_CHANGES_MAX_BYTES)}; keep large outputs out with .gitignore`,
      );
  }
}

/** MB with a decimal where a whole number would hide that it passes a bound (105,000,000 bytes: 100.1 MB). */
const megabytes = (n: number) => `${Number((n / (1024 * 1024)).toFixed(1)).toLocaleString('en-US')} MB`;

/** A path as git prints it with core.quotePath: as is, or in C quotes with octal escapes. */
export function unquoteGitPath(line: string): Buffer {
  if (!line.startsWith('"') || !line.endsWith('"')) return Buffer.from(line);
  const simple: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };
  const bytes: number[] = [];
  for (let i = 1; i < line.length - 1; i++) {
    const c = line[i] as string;
    if (c !== '\\') {
      bytes.push(...Buffer.from(c));
      continue;
    }
    const next = line[i + 1] as string;
    if (/[0-7]/.test(next)) {
      bytes.push(Number.parseInt(line.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(simple[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return Buffer.from(bytes);
}

/** The base itself as a snapshot: what an episode records when its workspace cannot be recorded. */
export async function baseSnapshot(own: OwnRepo, index: string, base: string): Promise<Snapshot> {
  await rm(index, { force: true });
  await own.exec(['read-tree', base], { index });
  return {
    tree: await own.out(['write-tree'], { index }),
    protectedChanged: [],
    index,
    cleaned: { ...NOTHING_CLEANED },
  };
}

/** The text of a regular file in an index (empty when it is missing, a link or too large). */
export async function indexedText(own: OwnRepo, index: string, path: string, maxBytes: number): Promise<string> {
  const entry = await own.out(['ls-files', '--stage', '--', `:(literal)${path}`], { index });
  const m = /^(100644|100755) ([0-9a-f]{40,64}) 0\t/.exec(entry);
  if (!m) return '';
  const size = Number(await own.out(['cat-file', '-s', m[2] as string]));
  if (size > maxBytes) return '';
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
