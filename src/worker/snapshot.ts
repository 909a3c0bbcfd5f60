// The snapshot: an episode's workspace as forkflush's own git records it (its .gitignore applies,
// with setup's outputs, what running code writes and the runs folder's name left out), protected
// paths put back as they are at the base, and what could not be recorded (a file over GitHub's
// size limit) refused.
import { lstat, mkdir, rm, writeFile } from 'node:fs/promises';
import {
  RECORDED_CHANGES_MAX_BYTES,
  RECORDED_CHANGES_MAX_FILES,
  RECORDED_FILE_MAX_BYTES,
  RECORDED_TREE_LISTING_MAX_BYTES,
} from '../core/bounds.js';
import { matchesAny } from '../core/globs.js';
import { RUNS_FOLDER } from '../core/names.js';
import { type Cleaned, NOTHING_CLEANED, sweepTree } from '../io/agent-files.js';
import { GitOutputTooLongError, GitStoppedError } from '../io/git.js';
import { runProcess } from '../io/process.js';
import { type CheckoutIndex, copyIndex, type OwnRepo } from './cleanroom.js';

/**
 * What running the code writes beside it, never the agent's work: Python's bytecode and pytest's
 * cache. Grading in the workspace ("$FORKFLUSH_GRADE") writes them into a protected tests/ folder,
 * which would void every score; the judge's checkout never has them (a stale .pyc can stand in
 * for its source). Tracked files are recorded whatever these say.
 */
export const RUNTIME_CACHES = '__pycache__/\n*.py[co]\n.pytest_cache/\n';

/**
 * What a snapshot never records: RUNTIME_CACHES, and an entry named as the runs folder at the top
 * of the tree (also taken out of the index after `git add`, whatever a .gitignore says). The take-home (`git merge` of the best branch, or its archive unpacked) writes the
 * result over the user's checkout, where the runs folder is ignored and so, to git, expendable:
 * an agent's `.forkflush` file would replace every run's records and seal key.
 */
export const NEVER_RECORDED = `${RUNTIME_CACHES}/${RUNS_FOLDER}\n`;

export interface Snapshot {
  /** The workspace's files, with protected paths as they are at the base. */
  tree: string;
  /** Protected paths the agent changed (restored in the snapshot). */
  protectedChanged: string[];
  /** The snapshot's index (forkflush's, outside the workspace). */
  index: string;
  /** What was swept out of the workspace first (sweepTree): git would have blocked on it. */
  cleaned: Cleaned;
  /** The ignore file applied beside the workspace's .gitignore: setup's (its outputs and RUNTIME_CACHES), else its own. */
  ignoreFile: string;
}

/** The ignore file of a snapshot without setup's: NEVER_RECORDED. */
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
  // Read by git only (bounded), never by forkflush itself: a file there that is not regular stalls git, not the run.
  const ignoreFile = excludes ?? ignoreFileOf(index);
  if (!excludes) await writeFile(ignoreFile, NEVER_RECORDED);
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
  // Ignored or not: the workspace's own .gitignore outranks NEVER_RECORDED (`!/.forkflush`).
  await own.exec(['rm', '--cached', '-r', '-q', '--ignore-unmatch', '--', `:(literal)${RUNS_FOLDER}`], {
    workTree: workspace,
    index,
  });
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
  return { tree, protectedChanged, index, cleaned, ignoreFile };
}

/**
 * Files in the workspace that its own .gitignore leaves out (not setup's outputs or RUNTIME_CACHES),
 * after `snapshot`: for an episode that recorded no change, what it may have written where no
 * commit takes it. At most `max` paths (a folder ignored whole as one).
 */
export async function ignoredFiles(own: OwnRepo, workspace: string, snap: Snapshot, max = 5): Promise<string[]> {
  // Said in a note only: a listing too long (an agent's 270,000 ignored files) or stalled says nothing.
  return ignoredIn(own, workspace, snap, max).catch((e: unknown) => {
    if (e instanceof GitStoppedError) throw e;
    return [];
  });
}

async function ignoredIn(own: OwnRepo, workspace: string, { index, ignoreFile }: Snapshot, max: number) {
  const ignore = ['-c', `core.excludesFile=${ignoreFile}`];
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
 * Why what a checkout holds beyond its commit could not be recorded, or null: the initial grade
 * asks it of what the grader left, as every grading in a workspace would.
 */
export async function unrecordable({ own, index }: CheckoutIndex, dir: string): Promise<string | null> {
  const ignoreFile = ignoreFileOf(index);
  await writeFile(ignoreFile, NEVER_RECORDED);
  return refuseOversized(own, dir, index, ['-c', `core.excludesFile=${ignoreFile}`]).then(
    () => null,
    (e: unknown) => (e as Error).message,
  );
}

/** A path of what RUNTIME_CACHES covers. */
const RUNTIME_CACHE_PATH = /(^|\/)(__pycache__|\.pytest_cache)\/|\.py[co]$/;

/**
 * The files of a checkout at protected paths that are not its commit's: made (ignored ones too:
 * the judge's protected folders are read-only whatever .gitignore says), changed or removed;
 * RUNTIME_CACHES aside. Null when git's listing passes its bound.
 */
export async function offCommitAtProtectedPaths(
  { own, index }: CheckoutIndex,
  dir: string,
  globs: readonly string[],
): Promise<string[] | null> {
  if (globs.length === 0) return [];
  const listed = await own.exec(['ls-files', '--others', '--modified', '-z'], { workTree: dir, index }).catch((e) => {
    if (e instanceof GitOutputTooLongError) return null;
    throw e;
  });
  if (listed === null) return null;
  const paths = new Set(listed.stdout.split('\0').filter(Boolean));
  return [...paths].filter((p) => matchesAny(p, globs) && !RUNTIME_CACHE_PATH.test(p));
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
    ignoreFile: '/dev/null',
  };
}
