// git-http.ts against real git: a node:http server on 127.0.0.1 serving bare repositories through
// `git http-backend`, and git clients authenticating the way forkflush does (an extra
// AUTHORIZATION header on the command line, no credential helper, no prompt).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type GitHttpOptions, type GitRepoName, handleGitRequest } from './git-http.js';

const RW = 'rw-token';
const RO = 'ro-token';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  status?: number;
}

let root: string;
let projectRoot: string;
let server: Server;
let base: string;
let seen: Seen[] = [];
let calls: string[] = [];
/** What the current test plugs into the server's options. */
let extra: Partial<GitHttpOptions> = {};

const env: NodeJS.ProcessEnv = (() => {
  const e: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('GIT_') && !/proxy|askpass/i.test(k)) e[k] = v;
  }
  return {
    ...e,
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 'Test',
    GIT_AUTHOR_EMAIL: 'test@example.com',
    GIT_COMMITTER_NAME: 'Test',
    GIT_COMMITTER_EMAIL: 'test@example.com',
    LC_ALL: 'C',
  };
})();

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function git(cwd: string, args: string[]): Promise<Run> {
  return new Promise((done, fail) => {
    const child = spawn('git', args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

async function ok(cwd: string, args: string[]): Promise<string> {
  const r = await git(cwd, args);
  if (r.code !== 0) throw new Error(`git ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout.trim();
}

const basic = (token: string) => Buffer.from(`x-access-token:${token}`).toString('base64');
/** As src/action/remote.ts authenticates: the header on the command line, no helper to fall back on. */
const auth = (token: string | null) => [
  '-c',
  'credential.helper=',
  ...(token ? ['-c', `http.extraheader=AUTHORIZATION: basic ${basic(token)}`] : []),
];

const bare = (owner: string, repo: string) => join(projectRoot, owner, `${repo}.git`);
const url = (owner = 'octo', repo = 'widgets') => `${base}/${owner}/${repo}.git`;
const serverRef = async (ref: string) => {
  const r = await git(root, ['--git-dir', bare('octo', 'widgets'), 'rev-parse', '--verify', '--quiet', ref]);
  return r.code === 0 ? r.stdout.trim() : null;
};

/** The token in a basic Authorization header (any user name, the token as password, as GitHub takes it). */
function tokenOf(header: string | undefined): string | null {
  const m = /^basic\s+(\S+)$/i.exec(header ?? '');
  if (!m) return null;
  const decoded = Buffer.from(m[1] as string, 'base64').toString('utf8');
  return decoded.slice(decoded.indexOf(':') + 1);
}

const options: GitHttpOptions = {
  get projectRoot() {
    return projectRoot;
  },
  authorize(header, _repo, push) {
    const token = tokenOf(header);
    return token === RW || (token === RO && !push);
  },
  async beforeRequest(repo, push) {
    calls.push(`before ${repo.owner}/${repo.repo} ${push ? 'push' : 'read'}`);
    await extra.beforeRequest?.(repo, push);
  },
  async afterPush(repo) {
    calls.push(`after ${repo.owner}/${repo.repo}`);
    await extra.afterPush?.(repo);
  },
  /** Only while a test sets one: with it, every push runs the pre-receive hook (bash, plus git log in changedPaths). */
  get refusePush() {
    return extra.refusePush;
  },
};

let work: string;
let counter = 0;

/** A fresh clone of octo/widgets, straight from the bare repo: quicker than over HTTP (about 0.5 s here). */
async function clone(): Promise<string> {
  const dir = join(root, `clone-${++counter}`);
  await ok(root, ['clone', '--quiet', '--no-hardlinks', bare('octo', 'widgets'), dir]);
  return dir;
}

async function commit(dir: string, file: string, content: string): Promise<string> {
  await mkdir(join(dir, file, '..'), { recursive: true });
  await writeFile(join(dir, file), content);
  await ok(dir, ['add', '-A']);
  await ok(dir, ['commit', '--quiet', '-m', `${file}: ${content.slice(0, 20)}`]);
  return ok(dir, ['rev-parse', 'HEAD']);
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'git-http-test-'));
  projectRoot = join(root, 'repos');
  await mkdir(join(projectRoot, 'octo'), { recursive: true });
  await ok(root, ['init', '--quiet', '--bare', '-b', 'main', bare('octo', 'widgets')]);
  work = join(root, 'work');
  await ok(root, ['init', '--quiet', '-b', 'main', work]);
  await commit(work, 'README.md', 'hello\n');
  await commit(work, 'README.md', 'hello again\n');
  await ok(work, ['push', '--quiet', bare('octo', 'widgets'), 'main']);

  server = createServer(async (req, res) => {
    const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers };
    seen.push(entry);
    res.on('finish', () => {
      entry.status = res.statusCode;
    });
    if (!(await handleGitRequest(req, res, options))) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('not a git path\n');
    }
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((done) => server?.close(done));
  if (root) await rm(root, { recursive: true, force: true });
});

beforeEach(() => {
  seen = [];
  calls = [];
  extra = {};
});

describe('git over smart HTTP', () => {
  it('clones and fetches, calling beforeRequest for reads and never afterPush', async () => {
    const dir = join(root, 'http-clone');
    await ok(root, [...auth(RW), 'clone', '--quiet', url(), dir]);
    expect(await ok(dir, ['rev-parse', 'HEAD'])).toBe(await serverRef('main'));
    // Protocol v2: the advertisement, ls-refs, fetch.
    expect(calls).toEqual(Array(3).fill('before octo/widgets read'));

    const next = await commit(work, 'a.txt', 'a\n');
    await ok(work, ['push', '--quiet', bare('octo', 'widgets'), 'main']);
    await ok(dir, [...auth(RW), 'fetch', '--quiet', url(), 'main']);
    expect(await ok(dir, ['rev-parse', 'FETCH_HEAD'])).toBe(next);
    expect(calls.every((c) => c.endsWith('read'))).toBe(true);
    expect(seen.every((s) => s.status === 200)).toBe(true);
  });

  it('pushes a new branch and calls afterPush before git push returns', async () => {
    const dir = await clone();
    const sha = await commit(dir, 'feature.txt', 'feature\n');
    let atAfterPush: string | null = 'unset';
    extra.afterPush = async () => {
      atAfterPush = await serverRef('refs/heads/feature');
    };
    await ok(dir, [...auth(RW), 'push', '--quiet', url(), 'HEAD:refs/heads/feature']);
    expect(await serverRef('refs/heads/feature')).toBe(sha);
    expect(atAfterPush).toBe(sha);
    expect(calls).toEqual(['before octo/widgets push', 'before octo/widgets push', 'after octo/widgets']);
  });

  it('lets beforeRequest write refs into the bare repo before the backend reads them', async () => {
    const main = (await serverRef('main')) as string;
    extra.beforeRequest = async () => {
      await ok(root, ['--git-dir', bare('octo', 'widgets'), 'update-ref', 'refs/heads/from-state', main]);
    };
    const out = await ok(root, [...auth(RW), 'ls-remote', url(), 'refs/heads/from-state']);
    expect(out).toBe(`${main}\trefs/heads/from-state`);
    await ok(root, ['--git-dir', bare('octo', 'widgets'), 'update-ref', '-d', 'refs/heads/from-state']);
  });

  it('rejects a non-fast-forward push and leaves the ref alone', async () => {
    const dir = await clone();
    const before = await serverRef('main');
    await ok(dir, ['reset', '--quiet', '--hard', 'HEAD~1']);
    await commit(dir, 'diverged.txt', 'x\n');
    const r = await git(dir, [...auth(RW), 'push', '--porcelain', url(), 'HEAD:refs/heads/main']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^!\tHEAD:refs\/heads\/main\t\[rejected\] \(non-fast-forward\)$/m);
    expect(await serverRef('main')).toBe(before);
  });

  it('applies an atomic push of two refs all or nothing', async () => {
    const dir = await clone();
    const before = (await serverRef('main')) as string;
    const tip = await commit(dir, 'atomic.txt', 'one\n');

    // main moves forward and a new ref appears, together.
    const good = await git(dir, [
      ...auth(RW),
      'push',
      '--porcelain',
      '--atomic',
      url(),
      'HEAD:refs/heads/main',
      'HEAD:refs/heads/atomic-a',
    ]);
    expect(good.code, good.stderr).toBe(0);
    expect(await serverRef('main')).toBe(tip);
    expect(await serverRef('refs/heads/atomic-a')).toBe(tip);

    // One ref would not fast-forward: neither moves.
    const r = await git(dir, [
      ...auth(RW),
      'push',
      '--porcelain',
      '--atomic',
      url(),
      `${before}:refs/heads/main`,
      'HEAD:refs/heads/atomic-b',
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^!\t\S+:refs\/heads\/main\t\[rejected\] \(non-fast-forward\)$/m);
    expect(r.stdout).toMatch(/^!\tHEAD:refs\/heads\/atomic-b\t\[rejected\] \(atomic push failed\)$/m);
    expect(await serverRef('main')).toBe(tip);
    expect(await serverRef('refs/heads/atomic-b')).toBeNull();
  });

  it('answers 401 with a Basic challenge without credentials, and git fails without changing anything', async () => {
    const dir = await clone();
    await commit(dir, 'anon.txt', 'anon\n');
    const r = await git(dir, [...auth(null), 'push', url(), 'HEAD:refs/heads/anon']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/terminal prompts disabled|Authentication failed/);
    expect(await serverRef('refs/heads/anon')).toBeNull();
    expect(seen.at(-1)?.status).toBe(401);
    expect(calls).toEqual([]);

    const res = await fetch(`${url()}/info/refs?service=git-upload-pack`);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Basic realm="GitHub"');
    const wrong = await fetch(`${url()}/info/refs?service=git-upload-pack`, {
      headers: { Authorization: `basic ${basic('nope')}` },
    });
    expect(wrong.status).toBe(401);
  });

  it('lets a read-only token read but not push (403)', async () => {
    expect(await ok(root, [...auth(RO), 'ls-remote', url(), 'refs/heads/main'])).toBe(
      `${await serverRef('main')}\trefs/heads/main`,
    );
    const dir = await clone();
    await commit(dir, 'ro.txt', 'ro\n');
    const r = await git(dir, [...auth(RO), 'push', url(), 'HEAD:refs/heads/ro']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('Permission to octo/widgets.git denied');
    expect(r.stderr).toContain('403');
    expect(await serverRef('refs/heads/ro')).toBeNull();
    expect(calls.some((c) => c.endsWith('push'))).toBe(false);
  });

  it('speaks protocol v2 when asked and v0 otherwise', async () => {
    const main = await serverRef('main');
    const v2 = await ok(root, [...auth(RW), '-c', 'protocol.version=2', 'ls-remote', url(), 'refs/heads/main']);
    expect(v2).toBe(`${main}\trefs/heads/main`);
    expect(seen.map((s) => s.headers['git-protocol'])).toEqual(['version=2', 'version=2']);

    seen = [];
    const v0 = await ok(root, [...auth(RW), '-c', 'protocol.version=0', 'ls-remote', url(), 'refs/heads/main']);
    expect(v0).toBe(v2);
    expect(seen.map((s) => s.headers['git-protocol'])).toEqual([undefined]);

    const headers = { Authorization: `basic ${basic(RW)}` };
    const adv2 = await fetch(`${url()}/info/refs?service=git-upload-pack`, {
      headers: { ...headers, 'Git-Protocol': 'version=2' },
    });
    expect(adv2.headers.get('content-type')).toBe('application/x-git-upload-pack-advertisement');
    expect(await adv2.text()).toContain('version 2');
    const adv0 = await fetch(`${url()}/info/refs?service=git-upload-pack`, { headers });
    expect(await adv0.text()).toContain(`${main} refs/heads/main`);
  });

  it('serves a reachable commit by id, as GitHub does, under both protocols', async () => {
    const old = (await serverRef('main~1')) as string;
    for (const version of ['0', '2']) {
      const empty = join(root, `by-id-${version}`);
      await ok(root, ['init', '--quiet', empty]);
      await ok(empty, [...auth(RW), '-c', `protocol.version=${version}`, 'fetch', '--quiet', url(), old]);
      expect(await ok(empty, ['rev-parse', 'FETCH_HEAD'])).toBe(old);
    }
  });

  it('handles gzip request bodies (a fetch wanting many refs, protocol v2)', async () => {
    const gitDir = bare('octo', 'widgets');
    const main = (await serverRef('main')) as string;
    // 40 branches, each its own commit: 40 "want" lines make an upload-pack request over 1 KiB, which git gzips.
    const stream = Array.from(
      { length: 40 },
      (_, i) =>
        `commit refs/heads/many/${i}\ncommitter T <t@example.com> 0 +0000\ndata 7\nmany ${String(i).padStart(2)}\nfrom ${main}\n\n`,
    ).join('');
    await new Promise<void>((done, fail) => {
      const child = spawn('git', ['--git-dir', gitDir, 'fast-import', '--quiet'], {
        env,
        stdio: ['pipe', 'ignore', 'inherit'],
      });
      child.on('close', (code) => (code === 0 ? done() : fail(new Error(`fast-import exited ${code}`))));
      child.stdin.end(stream);
    });

    const dir = join(root, 'many');
    await ok(root, ['init', '--quiet', dir]);
    seen = [];
    await ok(dir, [...auth(RW), 'fetch', '--quiet', url(), 'refs/heads/many/*:refs/remotes/origin/many/*']);
    expect((await ok(dir, ['for-each-ref', 'refs/remotes/origin/many'])).split('\n')).toHaveLength(40);
    expect(seen.some((s) => s.method === 'POST' && s.headers['content-encoding'] === 'gzip')).toBe(true);
  });

  it('handles chunked request bodies (a push larger than http.postBuffer)', async () => {
    const dir = await clone();
    const sha = await commit(dir, 'big.bin', randomBytes(200_000).toString('base64'));
    await ok(dir, [...auth(RW), '-c', 'http.postBuffer=65536', 'push', '--quiet', url(), 'HEAD:refs/heads/big']);
    expect(await serverRef('refs/heads/big')).toBe(sha);
    const posts = seen.filter((s) => s.method === 'POST');
    // git first probes with a 4-byte POST ("0000"), then sends the pack chunked, without a length.
    expect(posts.map((s) => [s.headers['content-length'], s.headers['transfer-encoding']])).toEqual([
      ['4', undefined],
      [undefined, 'chunked'],
    ]);
    // Both are receive-pack requests, so afterPush runs twice.
    expect(calls).toEqual([
      'before octo/widgets push',
      'before octo/widgets push',
      'after octo/widgets',
      'before octo/widgets push',
      'after octo/widgets',
    ]);
  });

  it('refuses a push in pre-receive, e.g. one touching .github/workflows/', async () => {
    const checked: { updates: unknown; paths: string[] }[] = [];
    extra.refusePush = async (_repo: GitRepoName, push) => {
      const paths = await push.changedPaths();
      checked.push({ updates: push.updates, paths });
      const workflow = paths.find((p) => p.startsWith('.github/workflows/'));
      return workflow
        ? `refusing to allow a GitHub App to create or update workflow \`${workflow}\` without \`workflows\` permission`
        : null;
    };
    const dir = await clone();
    const before = await serverRef('main');
    await commit(dir, 'src/ok.txt', 'fine\n');
    const sha = await commit(dir, '.github/workflows/ci.yml', 'on: push\n');
    const r = await git(dir, [
      ...auth(RW),
      'push',
      '--porcelain',
      '--atomic',
      url(),
      'HEAD:main',
      'HEAD:refs/heads/wf',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('remote: refusing to allow a GitHub App to create or update workflow');
    expect(r.stdout).toMatch(/^!\tHEAD:refs\/heads\/main\t\[remote rejected\] \(pre-receive hook declined\)$/m);
    expect(await serverRef('main')).toBe(before);
    expect(await serverRef('refs/heads/wf')).toBeNull();
    expect(checked).toEqual([
      {
        updates: [
          { ref: 'refs/heads/main', oldSha: before, newSha: sha },
          { ref: 'refs/heads/wf', oldSha: '0'.repeat(40), newSha: sha },
        ],
        paths: ['.github/workflows/ci.yml', 'src/ok.txt'],
      },
    ]);
    expect(calls.at(-1)).toBe('after octo/widgets');

    // Without the workflow commit the same push goes through.
    await ok(dir, ['reset', '--quiet', '--hard', 'HEAD~1']);
    const fine = await ok(dir, ['rev-parse', 'HEAD']);
    await ok(dir, [...auth(RW), 'push', '--quiet', url(), 'HEAD:main']);
    expect(await serverRef('main')).toBe(fine);
    expect(checked.at(-1)?.paths).toEqual(['src/ok.txt']);
  });

  it('answers 404 for a missing repository and leaves other paths to the caller', async () => {
    const r = await git(root, [...auth(RW), 'ls-remote', url('octo', 'missing')]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('remote: Repository not found.');
    expect(r.stderr).toMatch(/not found/);
    expect(seen.at(-1)?.status).toBe(404);
    // beforeRequest comes before the 404 check: it could create the repository.
    expect(calls).toEqual(['before octo/missing read']);

    const other = await fetch(`${base}/octo/widgets`);
    expect(other.status).toBe(404);
    expect(await other.text()).toBe('not a git path\n');
    const dumb = await fetch(`${url()}/info/refs`, { headers: { Authorization: `basic ${basic(RW)}` } });
    expect(dumb.status).toBe(403);
    const traversal = await fetch(`${base}/%2e%2e/widgets.git/info/refs?service=git-upload-pack`);
    expect(traversal.status).toBe(404);
  });
});
