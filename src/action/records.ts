// The private records repository: a bare repository in the runner's temp folder, outside every
// sandbox. The run's state, the episode's branch and the contexts are fetched into it; it is the
// clean room's git (the workspace's .git only borrows its objects, read-only); the result and
// the context are pushed from it. So the agent never sees the records, and no git command that
// carries the token reads a config or hook the agent could have written.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Git } from '../io/git.js';
import { OwnRepo } from '../worker/cleanroom.js';

/** The whole config of the records repository, written again before every command with the token. */
const CONFIG = '[core]\n\trepositoryformatversion = 0\n\tbare = true\n';

export class RecordsRepo {
  readonly git: Git;

  private constructor(
    readonly dir: string,
    readonly own: OwnRepo,
  ) {
    this.git = new Git(dir);
  }

  /** A new, empty records repository. */
  static async create(dir: string): Promise<RecordsRepo> {
    await rm(dir, { recursive: true, force: true });
    const own = await OwnRepo.open(dir, join(dir, 'objects'));
    return new RecordsRepo(dir, own);
  }

  get objects(): string {
    return this.own.objects;
  }

  /** Puts back the repository's own config (nothing else may redirect or intercept its remote). */
  async resetConfig(): Promise<void> {
    await writeFile(join(this.dir, 'config'), CONFIG);
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

  /** Commits one file with these bytes (an encrypted context) and returns the commit. */
  async commitFile(name: string, data: Buffer, message: string): Promise<string> {
    const file = join(this.dir, `forkflush-blob-${process.pid}-${Date.now()}`);
    await writeFile(file, data);
    try {
      const blob = (await this.git.exec(['hash-object', '-w', '--no-filters', file])).stdout.trim();
      return await this.withIndex(async (env) => {
        await this.git.exec(['update-index', '--add', '--cacheinfo', `100644,${blob},${name}`], { env });
        const tree = (await this.git.exec(['write-tree'], { env })).stdout.trim();
        return (await this.git.exec(['commit-tree', tree, '-F', '-'], { input: message })).stdout.trim();
      });
    } finally {
      await rm(file, { force: true });
    }
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
