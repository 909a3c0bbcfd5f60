// The fake GitHub's repository: a real bare git repository, so that clones and pushes over smart
// HTTP (git-http.ts) see what the REST API made, and the REST API sees what jobs pushed.
//
// Objects the API creates are hashed in JS as git does and kept in memory, with the trees' entries,
// so that a state save or a trees API call costs no process: the bare repository is made, and the
// objects written into it as loose objects, only when something reads it (a git request, git, the
// gitDir). Most tests and every chaos run never do, and so run no git at all. Refs live in memory
// (the REST API changes them hundreds of times a run) and are written to the bare repository
// before a git request reaches it (`exportRefs`) and read back after a push (`importRefs`).
// Commits pushed by jobs are read with git on first use and cached.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';

export interface FakeCommit {
  sha: string;
  tree: string;
  message: string;
  parents: string[];
  /** Path -> content of every file in the commit's tree. */
  files: Record<string, string>;
}

/** Who the fake's own commits are by: the app's bot, at a fixed time (so equal commits are equal). */
const BOT_SIGNATURE = 'forkflush[bot] <41898282+forkflush[bot]@users.noreply.github.com> 1796040000 +0000';

/** A tree's entry as `git ls-tree --long` lists it (a blob's size; a tree's mode 040000). */
interface TreeEntry {
  path: string;
  mode: string;
  type: string;
  sha: string;
  size?: number;
}

export class GitStore {
  readonly commits = new Map<string, FakeCommit>();
  readonly refs = new Map<string, string>();
  /** What the bare repository's refs were when last exported or imported. */
  private exported = new Map<string, string>();
  private readonly dir: string;
  /** Whether the bare repository exists on disk yet. */
  private made = false;
  /** Objects made in memory and not yet written into the repository: id -> git's raw object. */
  private readonly pending = new Map<string, Buffer>();
  /** Every object made here (pending or written), so that none is made twice. */
  private readonly known = new Set<string>();
  /** The entries of the trees made here, by id. */
  private readonly trees = new Map<string, TreeEntry[]>();

  constructor(
    readonly root: string,
    owner: string,
    repo: string,
  ) {
    this.dir = join(root, owner, `${repo}.git`);
  }

  /** The bare repository: <root>/<owner>/<repo>.git, as git-http.ts serves it, with every object made so far. */
  get gitDir(): string {
    this.materialize();
    return this.dir;
  }

  /** Makes the bare repository if it is not there yet, and writes the objects made since. */
  private materialize(): void {
    if (!this.made) {
      mkdirSync(this.dir, { recursive: true });
      this.made = true;
      this.run('init', '-q', '--bare', '--initial-branch=main');
      // Pushes from jobs (authorized by the server) and no background work that races the tests.
      this.run('config', 'http.receivepack', 'true');
      this.run('config', 'gc.auto', '0');
      this.run('config', 'receive.unpackLimit', '1000');
    }
    for (const [sha, raw] of this.pending) {
      const path = join(this.dir, 'objects', sha.slice(0, 2), sha.slice(2));
      if (existsSync(path)) continue;
      mkdirSync(join(this.dir, 'objects', sha.slice(0, 2)), { recursive: true });
      writeFileSync(path, deflateSync(raw));
    }
    this.pending.clear();
  }

  static temp(owner: string, repo: string): GitStore {
    return new GitStore(mkdtempSync(join(tmpdir(), 'forkflush-fake-github-')), owner, repo);
  }

  remove(): void {
    rmSync(this.root, { recursive: true, force: true });
  }

  git(...args: string[]): string {
    this.materialize();
    return this.run(...args);
  }

  private run(...args: string[]): string {
    return execFileSync('git', ['--git-dir', this.dir, ...args], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' },
    }).trimEnd();
  }

  /** A commit with these files (nested paths allowed), written as real git objects. */
  commit(c: Omit<FakeCommit, 'sha' | 'tree'>): string {
    const tree = this.writeTree(c.files);
    const lines = [`tree ${tree}`, ...c.parents.map((p) => `parent ${p}`)];
    lines.push(`author ${BOT_SIGNATURE}`, `committer ${BOT_SIGNATURE}`, '', c.message);
    const sha = this.writeObject('commit', Buffer.from(lines.join('\n')));
    this.commits.set(sha, { ...c, sha, tree });
    return sha;
  }

  /** The tree id git gives these files. */
  writeTree(files: Record<string, string>): string {
    type Dir = Map<string, string | Dir>;
    const top: Dir = new Map();
    for (const [path, content] of Object.entries(files)) {
      const parts = path.split('/');
      let dir = top;
      for (const part of parts.slice(0, -1)) {
        let next = dir.get(part);
        if (typeof next !== 'object') {
          next = new Map();
          dir.set(part, next);
        }
        dir = next;
      }
      dir.set(parts.at(-1) as string, content);
    }
    const write = (dir: Dir): string => {
      const entries = [...dir].map(([name, v]) => {
        if (typeof v !== 'string') return { name, mode: '40000', sha: write(v), sortKey: `${name}/`, size: undefined };
        const blob = Buffer.from(v);
        return { name, mode: '100644', sha: this.writeObject('blob', blob), sortKey: name, size: blob.length };
      });
      // git orders a tree's entries by name, a subtree's name as if it ended in '/'.
      entries.sort((a, b) => Buffer.compare(Buffer.from(a.sortKey), Buffer.from(b.sortKey)));
      const body = Buffer.concat(
        entries.map((e) => Buffer.concat([Buffer.from(`${e.mode} ${e.name}\0`), Buffer.from(e.sha, 'hex')])),
      );
      const sha = this.writeObject('tree', body);
      this.trees.set(
        sha,
        entries.map((e) =>
          e.size === undefined
            ? { path: e.name, mode: '040000', type: 'tree', sha: e.sha }
            : { path: e.name, mode: e.mode, type: 'blob', sha: e.sha, size: e.size },
        ),
      );
      return sha;
    };
    return write(top);
  }

  /** Makes an object (written into the repository when it is next read); returns its id. */
  writeObject(type: 'blob' | 'tree' | 'commit', body: Buffer): string {
    const raw = Buffer.concat([Buffer.from(`${type} ${body.length}\0`), body]);
    const sha = createHash('sha1').update(raw).digest('hex');
    if (!this.known.has(sha)) {
      this.known.add(sha);
      this.pending.set(sha, raw);
    }
    return sha;
  }

  /** The commit, read from the repository on first use; undefined if there is none. */
  get(sha: string): FakeCommit | undefined {
    const cached = this.commits.get(sha);
    // Without a repository on disk, nothing was pushed: every commit there is is in memory.
    if (cached || !this.made || !/^[0-9a-f]{40}$/.test(sha)) return cached;
    let raw: string;
    try {
      raw = execFileSync('git', ['--git-dir', this.gitDir, 'cat-file', 'commit', sha], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      });
    } catch {
      return undefined;
    }
    const split = raw.indexOf('\n\n');
    const header = raw.slice(0, split).split('\n');
    const parents = header.filter((l) => l.startsWith('parent ')).map((l) => l.slice(7));
    const tree = (header.find((l) => l.startsWith('tree ')) ?? '').slice(5);
    // GitHub gives a message as stored, without the newline git ends it with.
    const message = raw.slice(split + 2).replace(/\n$/, '');
    const commit: FakeCommit = { sha, tree, message, parents, files: this.readFiles(sha) };
    this.commits.set(sha, commit);
    return commit;
  }

  private readFiles(sha: string): Record<string, string> {
    const listing = this.git('ls-tree', '-r', '-z', '--full-tree', sha);
    const blobs = listing
      .split('\0')
      .filter(Boolean)
      .map((entry) => {
        const [meta, path] = entry.split('\t') as [string, string];
        return { path, sha: meta.split(' ')[2] as string };
      });
    if (blobs.length === 0) return {};
    const out = execFileSync('git', ['--git-dir', this.gitDir, 'cat-file', '--batch'], {
      input: blobs.map((b) => b.sha).join('\n'),
      maxBuffer: 256 * 1024 * 1024,
    });
    const files: Record<string, string> = {};
    let at = 0;
    for (const blob of blobs) {
      const eol = out.indexOf(10, at);
      const size = Number(out.subarray(at, eol).toString().split(' ')[2]);
      files[blob.path] = out.subarray(eol + 1, eol + 1 + size).toString('utf8');
      at = eol + 1 + size + 1;
    }
    return files;
  }

  /**
   * The entries of a tree as GitHub's trees API lists them, every level with `recursive` (folders
   * too, before what they hold); undefined when there is no such tree.
   */
  treeEntries(sha: string, recursive: boolean): TreeEntry[] | undefined {
    if (!/^[0-9a-f]{40}$/.test(sha)) return undefined;
    if (this.trees.has(sha)) return this.listTree(sha, recursive, '');
    if (!this.made) return undefined;
    let listing: string;
    try {
      listing = execFileSync(
        'git',
        ['--git-dir', this.gitDir, 'ls-tree', '-z', '--long', ...(recursive ? ['-r', '-t'] : []), sha],
        {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
          maxBuffer: 256 * 1024 * 1024,
        },
      );
    } catch {
      return undefined;
    }
    return listing
      .split('\0')
      .filter(Boolean)
      .map((entry) => {
        const [meta, path] = entry.split('\t') as [string, string];
        const [mode, type, object, size] = meta.trim().split(/\s+/) as [string, string, string, string];
        return { path, mode, type, sha: object, ...(type === 'blob' ? { size: Number(size) } : {}) };
      });
  }

  /** A tree made here, listed as `git ls-tree [-r -t]` lists it: each subtree before what it holds. */
  private listTree(sha: string, recursive: boolean, prefix: string): TreeEntry[] {
    return (this.trees.get(sha) ?? []).flatMap((e) => {
      const entry = { ...e, path: prefix + e.path };
      return recursive && e.type === 'tree' ? [entry, ...this.listTree(e.sha, true, `${entry.path}/`)] : [entry];
    });
  }

  isAncestor(a: string, b: string): boolean {
    const seen = new Set<string>();
    const stack = [b];
    while (stack.length > 0) {
      const s = stack.pop() as string;
      if (s === a) return true;
      if (seen.has(s)) continue;
      seen.add(s);
      stack.push(...(this.get(s)?.parents ?? []));
    }
    return false;
  }

  /** Makes the bare repository's refs what the API says they are (before git serves a request). */
  exportRefs(): void {
    this.materialize();
    const lines: string[] = [];
    for (const [ref, sha] of this.exported) if (!this.refs.has(ref)) lines.push(`delete ${ref} ${sha}`);
    for (const [ref, sha] of this.refs) if (this.exported.get(ref) !== sha) lines.push(`update ${ref} ${sha}`);
    if (lines.length > 0) {
      execFileSync('git', ['--git-dir', this.gitDir, 'update-ref', '--stdin'], { input: `${lines.join('\n')}\n` });
    }
    this.exported = new Map(this.refs);
  }

  /** Takes the bare repository's refs as the API's (after a push). */
  importRefs(): void {
    const listing = this.git('for-each-ref', '--format=%(objectname) %(refname)');
    const now = new Map<string, string>();
    for (const line of listing.split('\n').filter(Boolean)) {
      const [sha, ref] = line.split(' ') as [string, string];
      now.set(ref, sha);
    }
    for (const [ref, sha] of now) if (this.exported.get(ref) !== sha) this.refs.set(ref, sha);
    for (const ref of this.exported.keys()) if (!now.has(ref)) this.refs.delete(ref);
    this.exported = now;
  }
}
