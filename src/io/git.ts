// The one door to git. Every call goes through `exec`; identity is passed per command, never
// written to a global or repository config. Every call is bounded in time (GIT_TIMEOUT_MS) and
// stops with the signal it is given: git opens some files of a work tree by name with a blocking
// open() (.gitignore, .gitattributes, a nested .git's HEAD), and a FIFO there would hold it for good.

import { lstat, readdir, realpath } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { GIT_OUTPUT_MAX_CHARS, GIT_TIMEOUT_MS } from '../core/bounds.js';
import { runProcess } from './process.js';

export class GitError extends Error {
  override name = 'GitError';
  constructor(
    readonly args: string[],
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(`git ${args.join(' ')} failed (exit ${exitCode}): ${stderr.trim().split('\n').slice(-3).join(' ')}`);
  }
}

/**
 * A git command that did not answer within its bound (it was stopped): what it was, and the path
 * it was waiting to open when Linux tells (a FIFO, a device).
 */
export class GitStalledError extends GitError {
  override name = 'GitStalledError';
  constructor(
    args: string[],
    readonly ms: number,
    readonly blockedOn: string | null,
  ) {
    super(args, null, '');
    const waiting = blockedOn === null ? '' : ` (it was waiting to open ${JSON.stringify(blockedOn)})`;
    this.message = `forkflush's git stalled: \`git ${shownArgs(args)}\` did not answer in ${ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`}${waiting}`;
  }
}

/** A git command whose output passed GIT_OUTPUT_MAX_CHARS: never half a listing (what was cut could be anything). */
export class GitOutputTooLongError extends GitError {
  override name = 'GitOutputTooLongError';
  constructor(args: string[], exitCode: number | null) {
    super(args, exitCode, `its output passed ${GIT_OUTPUT_MAX_CHARS / 1_000_000} MB`);
  }
}

/** A git command stopped by the signal it was given (Ctrl-C): no answer at all. */
export class GitStoppedError extends GitError {
  override name = 'GitStoppedError';
  constructor(args: string[], reason: string) {
    super(args, null, `stopped (${reason})`);
  }
}

/** The command without forkflush's -c settings, shortened: what a message names. */
function shownArgs(args: string[]): string {
  const rest = [...args];
  while (rest[0] === '-c') rest.splice(0, 2);
  const text = rest.join(' ');
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

// Identity per command; and no hooks or fsmonitor: forkflush's own git commands run in checkouts
// whose files (and possibly config) an agent just had in its hands. Nor what the user's own config
// asks of their commits: a signing program that waits for a passphrase would hold the run at
// night, and a split index leaves its shared part where a workspace's git cannot find it.
const IDENTITY = [
  '-c',
  'user.name=forkflush',
  '-c',
  'user.email=forkflush@users.noreply.localhost',
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.fsmonitor=false',
  '-c',
  'commit.gpgSign=false',
  '-c',
  'tag.gpgSign=false',
  '-c',
  'core.splitIndex=false',
];

export interface GitResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

export interface GitOptions {
  /** Stops every command (GitStoppedError) when this aborts: the run's Ctrl-C or SIGTERM. */
  signal?: AbortSignal;
  /** The bound of every command, in milliseconds (GIT_TIMEOUT_MS). */
  timeoutMs?: number;
}

/**
 * What git reads to find a repository and its objects (`git rev-parse --local-env-vars`, git 2.39,
 * but for the config it passes on, which is the user's as ~/.gitconfig is: a `safe.directory`
 * given that way must hold): forkflush names its repositories itself, so a caller's (an alias or
 * hook in a linked worktree, a shell that exports GIT_DIR for its dotfiles) never reaches its git.
 * And how git reads a pathspec: with GIT_LITERAL_PATHSPECS=1 forkflush's `:(glob)` protected paths
 * matched nothing, and the grader the agent rewrote was committed and run by the judge.
 */
const REPOSITORY_ENV =
  /^GIT_(ALTERNATE_OBJECT_DIRECTORIES|OBJECT_DIRECTORY|DIR|WORK_TREE|IMPLICIT_WORK_TREE|GRAFT_FILE|INDEX_FILE|NO_REPLACE_OBJECTS|REPLACE_REF_BASE|PREFIX|INTERNAL_SUPER_PREFIX|SHALLOW_FILE|COMMON_DIR|NAMESPACE|(LITERAL|GLOB|NOGLOB|ICASE)_PATHSPECS)$/;

function withoutRepositoryEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !REPOSITORY_ENV.test(name)));
}

export class Git {
  constructor(
    readonly cwd: string,
    readonly options: GitOptions = {},
  ) {}

  /**
   * Runs git; `check: false` returns a failing result instead of throwing. A command that passes
   * its bound throws GitStalledError, one stopped by the signal GitStoppedError, checked or not.
   */
  async exec(
    args: string[],
    options: { check?: boolean; input?: string; env?: NodeJS.ProcessEnv } = {},
  ): Promise<GitResult> {
    const env = { ...withoutRepositoryEnv(process.env), ...options.env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' };
    const { signal, timeoutMs = GIT_TIMEOUT_MS } = this.options;
    const r = await runProcess('git', [...IDENTITY, ...args], {
      cwd: this.cwd,
      env,
      ...(options.input !== undefined ? { input: options.input } : {}),
      maxOutput: GIT_OUTPUT_MAX_CHARS,
      timeoutMs,
      ...(signal ? { signal } : {}),
    });
    if (r.stopped === 'timeout') throw new GitStalledError(args, timeoutMs, r.blockedOn ?? null);
    if (r.stopped !== null) throw new GitStoppedError(args, r.stopped);
    // Never half a listing: what was cut off could be anything (the one oversized file, say).
    if (r.outputCut) throw new GitOutputTooLongError(args, r.exitCode);
    const result = { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr || r.spawnError || '' };
    if (options.check !== false && r.exitCode !== 0) throw new GitError(args, r.exitCode, result.stderr);
    return result;
  }

  async out(args: string[]): Promise<string> {
    return (await this.exec(args)).stdout.trim();
  }

  at(cwd: string): Git {
    return new Git(cwd, this.options);
  }

  async revParse(rev: string): Promise<string | null> {
    const r = await this.exec(['rev-parse', '--verify', '--quiet', `${rev}^{commit}`], { check: false });
    return r.exitCode === 0 ? r.stdout.trim() : null;
  }

  /** Compare-and-swap of a ref: moves `ref` to `next` only if it is at `expected` (null: must not exist). */
  async casRef(ref: string, next: string, expected: string | null, reason: string): Promise<boolean> {
    const old = expected ?? '0'.repeat(40);
    const args = ['update-ref', '-m', reason, ref, next, old];
    const r = await this.exec(args, { check: false });
    if (r.exitCode === 0) return true;
    // Refused because the ref is elsewhere: false. Failed with the ref where it was expected (a
    // full disk, a stale lock): that is no answer, and must not read as "someone moved it".
    const now = await this.exec(['rev-parse', '--verify', '--quiet', ref], { check: false });
    const at = now.exitCode === 0 ? now.stdout.trim() : null;
    if (at === expected) throw new GitError(args, r.exitCode, r.stderr);
    return false;
  }

  async setRef(ref: string, next: string, reason: string): Promise<void> {
    await this.exec(['update-ref', '-m', reason, ref, next]);
  }

  async deleteRef(ref: string): Promise<void> {
    await this.exec(['update-ref', '-d', ref], { check: false });
  }

  async isAncestor(ancestor: string, descendant: string): Promise<boolean> {
    return (await this.exec(['merge-base', '--is-ancestor', ancestor, descendant], { check: false })).exitCode === 0;
  }
}

/**
 * What of the work tree the user's own git runs, as globs: the hooks folder core.hooksPath names
 * in it (husky's; with its parent where nothing in it is tracked: husky 9's `.husky/_` runs
 * `.husky/<hook>`), a hook of the repository's hooks folder that is a link into it, and a config
 * file an include names in it (its core.fsmonitor runs on `git status`). A branch that changes one
 * runs code on the user's machine once checked out. (forkflush's own commands override all of
 * them.)
 */
export async function gitRunsFromTree(repo: string): Promise<string[]> {
  const git = new Git(repo);
  const top = (await git.out(['rev-parse', '--show-toplevel'])).trim();
  const inTree = (path: string) => {
    const rel = relative(top, resolve(top, path));
    return rel === '' || rel.startsWith('..') || isAbsolute(rel) ? null : rel.split(sep).join('/');
  };
  const tracked = async (glob: string) =>
    (await git.exec(['ls-files', '-z', '--', `:(glob)${glob}`], { check: false })).stdout !== '';
  const settings = async (pattern: string) =>
    (await git.exec(['config', '--show-scope', '--get-regexp', pattern], { check: false })).stdout
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('command\t'))
      .map((l) => l.slice(l.indexOf(' ') + 1).trim());
  const globs: string[] = [];
  const hooksPath = (await settings('^core\\.hookspath$')).at(-1);
  const hooks = hooksPath && !hooksPath.startsWith('~') ? inTree(hooksPath) : null;
  if (hooks) {
    globs.push(`${hooks}/**`);
    const parent = hooks.split('/').slice(0, -1).join('/');
    if (parent && !(await tracked(`${hooks}/**`))) globs.push(`${parent}/**`);
  }
  // The repository's own hooks folder (--git-path would name forkflush's override of it).
  const hooksDir = join(resolve(top, (await git.out(['rev-parse', '--git-common-dir'])).trim()), 'hooks');
  for (const name of await readdir(hooksDir).catch(() => [] as string[])) {
    const target = await realpath(join(hooksDir, name)).catch(() => null);
    const path = target && (await lstat(join(hooksDir, name))).isSymbolicLink() ? inTree(target) : null;
    if (path) globs.push(path);
  }
  for (const file of await settings('^include(if\\..*)?\\.path$')) {
    const path = file.startsWith('~') ? null : inTree(resolve(top, '.git', file));
    if (path && !path.startsWith('.git/')) globs.push(path);
  }
  return [...new Set(globs)];
}
