// The private records repository: a bare repository in the runner's temp folder, outside the
// agent's checkout. The run's state and the contexts are fetched into it, and the episode's
// result and context are pushed from it, so the agent never sees the records, and no git command
// that carries the token reads a config or hook the agent could have written.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Git } from '../io/git.js';
import type { Remote } from './remote.js';

export class RecordsRepo {
  readonly git: Git;

  private constructor(readonly dir: string) {
    this.git = new Git(dir);
  }

  /** A new, empty records repository. */
  static async create(dir: string): Promise<RecordsRepo> {
    await mkdir(dirname(dir), { recursive: true });
    await new Git(dirname(dir)).exec(['init', '--quiet', '--bare', dir]);
    return new RecordsRepo(dir);
  }

  /** Fetches the refs under the same names. */
  async fetch(remote: Remote, refs: string[]): Promise<void> {
    if (refs.length > 0)
      await remote.fetch(
        this.git,
        refs.map((r) => `+${r}:${r}`),
      );
  }

  /** A file of a ref's tree, or null when the tree has no such file. */
  async read(ref: string, path: string): Promise<string | null> {
    const r = await this.git.exec(['show', `${ref}:${path}`], { check: false });
    return r.exitCode === 0 ? r.stdout : null;
  }

  /** Writes the tree of a ref into a folder (which should be empty). */
  async extract(ref: string, dir: string): Promise<void> {
    await mkdir(dir, { recursive: true });
    await this.withIndex(async (env) => {
      await this.git.exec(['--work-tree', dir, 'read-tree', ref], { env });
      await this.git.exec(['--work-tree', dir, 'checkout-index', '--all'], { env });
    });
  }

  /**
   * Commits a folder as it is (ignore files inside it count for nothing) and returns the commit,
   * or null when the folder holds no files.
   */
  async commitFolder(dir: string, message: string): Promise<string | null> {
    const entries = await readdir(dir).catch(() => []);
    if (entries.length === 0) return null;
    return this.withIndex(async (env) => {
      await this.git.exec(['--work-tree', dir, 'add', '--all', '--force'], { env });
      if ((await this.git.exec(['ls-files'], { env })).stdout.trim() === '') return null;
      const tree = (await this.git.exec(['write-tree'], { env })).stdout.trim();
      return (await this.git.exec(['commit-tree', tree, '-F', '-'], { input: message })).stdout.trim();
    });
  }

  /**
   * Lets this repository read the objects of another one (git's alternates), so a commit made in
   * the workspace can be pushed from here without copying the repository or running git there.
   */
  async borrowObjects(gitDir: string): Promise<void> {
    await writeFile(join(this.dir, 'objects', 'info', 'alternates'), `${join(gitDir, 'objects')}\n`);
  }

  /** A throwaway index, so nothing is staged in the records repository itself. */
  private async withIndex<T>(fn: (env: NodeJS.ProcessEnv) => Promise<T>): Promise<T> {
    const index = join(this.dir, `forkflush-index-${process.pid}-${Date.now()}`);
    try {
      return await fn({ GIT_INDEX_FILE: index });
    } finally {
      await rm(index, { force: true });
    }
  }
}
