// Git's smart HTTP protocol for the fake GitHub: clone, fetch and push against bare repositories
// on disk, served by `git http-backend` (the CGI program shipped with git) behind a node:http
// server. The fake decides who may read or push; git itself does the protocol, packs, ref updates
// and fast-forward checks, so clients see what they would see from a real git server.
//
// Refusing a push before it lands (GitHub's "refusing to allow a GitHub App to create or update
// workflow" rule) goes through a pre-receive hook: while a push runs, the backend is given
// core.hooksPath pointing at a small bash hook (<projectRoot>/.hooks/pre-receive) that hands the
// ref updates back to this process over a loopback socket and prints the answer, so `refusePush`
// runs here with the pushed (still quarantined) objects in reach.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import type http from 'node:http';
import { createServer, type Server } from 'node:net';
import { join, resolve } from 'node:path';

export interface GitRepoName {
  owner: string;
  repo: string;
}

/** One ref a push wants to change; a sha of forty zeros means "does not exist" (create or delete). */
export interface RefUpdate {
  ref: string;
  oldSha: string;
  newSha: string;
}

/** A push that git has received but not applied yet (its objects are still quarantined). */
export interface PendingPush {
  updates: RefUpdate[];
  /** Runs git in the bare repository, seeing the pushed objects; resolves to stdout, rejects on failure. */
  git(args: string[]): Promise<string>;
  /**
   * Paths changed by the commits the push brings in (commits no existing ref reaches), each merge
   * compared with its first parent; sorted, without duplicates.
   */
  changedPaths(): Promise<string[]>;
}

export interface GitHttpOptions {
  /** Folder holding bare repositories as <owner>/<repo>.git */
  projectRoot: string;
  /**
   * Returns true if this Authorization header value may read (push=false) or push (push=true) the
   * repo; called for every request (a denied push is asked again with push=false, to tell 403 from 401).
   */
  authorize(header: string | undefined, repo: GitRepoName, push: boolean): boolean;
  /**
   * Called for every authorized request before the backend runs (e.g. to write refs into the bare
   * repo, or to create it: the 404 check comes after). May be async.
   */
  beforeRequest?(repo: GitRepoName, push: boolean): void | Promise<void>;
  /**
   * Called after each POST .../git-receive-pack ran (whether refs moved or not), before the response
   * ends: git push has not returned yet, so state read back here is in place when it does. May be async.
   */
  afterPush?(repo: GitRepoName): void | Promise<void>;
  /**
   * Checks a push before any ref moves (pre-receive): a message refuses the whole push (git prints
   * each line as "remote: ..." and every ref as "[remote rejected] (pre-receive hook declined)"),
   * null lets it through. Setting it replaces the repositories' own hooks (core.hooksPath).
   */
  refusePush?(repo: GitRepoName, push: PendingPush): string | null | Promise<string | null>;
}

const NAME = /^[A-Za-z0-9_.-]+$/;
const GIT_PATH = /^\/([^/]+)\/([^/]+)\.git\/(.*)$/;
const SERVICES = new Set(['git-upload-pack', 'git-receive-pack']);

/** Returns true if it handled the request (URL path /<owner>/<repo>.git/...), false if the path is not a git path. */
export async function handleGitRequest(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  options: GitHttpOptions,
): Promise<boolean> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const match = GIT_PATH.exec(url.pathname);
  if (!match) return false;
  const owner = decode(match[1]);
  const repoName = decode(match[2]);
  const rest = decode(match[3]);
  if (owner === null || repoName === null || rest === null) {
    await reply(res, 400, 'Bad request');
    return true;
  }
  if (![owner, repoName].every((n) => NAME.test(n) && !n.startsWith('.'))) {
    await reply(res, 404, 'Repository not found.');
    return true;
  }
  const repo = { owner, repo: repoName };

  // Smart HTTP only, as on GitHub: the advertisement names its service, and the two RPC endpoints.
  const service = rest === 'info/refs' ? url.searchParams.get('service') : rest;
  if (service === null && rest === 'info/refs') {
    await reply(res, 403, 'Please upgrade your git client.\nGitHub.com no longer supports git over dumb-http.');
    return true;
  }
  if (!service || !SERVICES.has(service)) {
    await reply(res, 404, 'Not Found');
    return true;
  }
  const push = service === 'git-receive-pack';

  const header = req.headers.authorization;
  if (!options.authorize(header, repo, push)) {
    if (push && header !== undefined && options.authorize(header, repo, false)) {
      await reply(res, 403, `Permission to ${owner}/${repoName}.git denied.`);
    } else {
      res.setHeader('WWW-Authenticate', 'Basic realm="GitHub"');
      await reply(res, 401, 'Unauthorized');
    }
    return true;
  }

  try {
    await options.beforeRequest?.(repo, push);
  } catch (err) {
    await reply(res, 500, `beforeRequest failed: ${String(err)}`);
    return true;
  }
  const repoDir = resolve(options.projectRoot, owner, `${repoName}.git`);
  if (!(await isDirectory(repoDir))) {
    await reply(res, 404, 'Repository not found.');
    return true;
  }

  const rpcPush = push && rest === 'git-receive-pack' && req.method === 'POST';
  const check =
    rpcPush && options.refusePush ? await pushCheck(options.projectRoot, repo, repoDir, options.refusePush) : undefined;
  try {
    const config: [string, string][] = [
      ['http.uploadpack', 'true'],
      ['http.receivepack', String(push)],
      // GitHub serves any reachable commit by id (actions/checkout fetches one), also over protocol v0.
      ['uploadpack.allowReachableSHA1InWant', 'true'],
      ...(check ? ([['core.hooksPath', check.hooksPath]] as [string, string][]) : []),
    ];
    const env: NodeJS.ProcessEnv = {
      ...cleanEnv(),
      ...configEnv(config),
      ...check?.env,
      GATEWAY_INTERFACE: 'CGI/1.1',
      SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
      REQUEST_METHOD: req.method ?? 'GET',
      PATH_INFO: `/${owner}/${repoName}.git/${rest}`,
      QUERY_STRING: url.search.slice(1),
      REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
      GIT_PROJECT_ROOT: resolve(options.projectRoot),
      GIT_HTTP_EXPORT_ALL: '1',
    };
    if (push) env.REMOTE_USER = 'x-access-token';
    const contentType = req.headers['content-type'];
    if (contentType) env.CONTENT_TYPE = contentType;
    // Without a length (chunked bodies: git pushes more than http.postBuffer that way), the backend
    // reads its stdin to EOF; node has already undone the chunking.
    const contentLength = req.headers['content-length'];
    if (contentLength) env.CONTENT_LENGTH = contentLength;
    // git gzips larger upload-pack requests; the backend inflates them itself when told.
    const encoding = req.headers['content-encoding'];
    if (encoding) env.HTTP_CONTENT_ENCODING = encoding;
    // Protocol v2 is asked for in this header; the backend only looks at GIT_PROTOCOL.
    const protocol = req.headers['git-protocol'];
    if (typeof protocol === 'string') {
      env.HTTP_GIT_PROTOCOL = protocol;
      env.GIT_PROTOCOL = protocol;
    }
    await runBackend(await backendPath(), req, res, env, rpcPush ? () => options.afterPush?.(repo) : undefined);
  } finally {
    check?.close();
  }
  return true;
}

/** Runs `git http-backend` for one request: the body to its stdin, its CGI response to `res`. */
function runBackend(
  backend: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  env: NodeJS.ProcessEnv,
  after: (() => void | Promise<void>) | undefined,
): Promise<void> {
  return new Promise((done) => {
    const child = spawn(backend, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    let head: Buffer | null = Buffer.alloc(0);
    let failed: string | null = null;
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
    });
    // The backend may stop reading early (it answered with an error): its closed stdin is no failure of ours.
    child.stdin.on('error', () => {});
    req.pipe(child.stdin);
    res.on('close', () => {
      if (child.exitCode === null && child.signalCode === null) child.kill();
    });
    child.on('error', (err) => {
      failed = String(err);
    });
    const send = (chunk: Buffer) => {
      if (chunk.length > 0 && !res.write(chunk)) {
        child.stdout.pause();
        res.once('drain', () => child.stdout.resume());
      }
    };
    child.stdout.on('data', (chunk: Buffer) => {
      if (head === null) return send(chunk);
      head = Buffer.concat([head, chunk]);
      const end = headerEnd(head);
      if (!end) return;
      const headers = head.subarray(0, end.at).toString('latin1');
      const body = head.subarray(end.at + end.length);
      head = null;
      writeCgiHead(res, headers);
      send(body);
    });
    child.on('close', async (code, signal) => {
      if (head !== null) {
        const why = failed ?? (stderr.trim() || `git http-backend exited ${code ?? signal} without a response`);
        if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
        res.end(`${why}\n`);
        done();
        return;
      }
      try {
        await after?.();
      } catch (err) {
        res.destroy(err instanceof Error ? err : new Error(String(err)));
        done();
        return;
      }
      res.end(() => done());
      if (res.destroyed) done();
    });
  });
}

let backendFile: Promise<string> | undefined;

/** $(git --exec-path)/git-http-backend: run directly, it starts quicker than through `git http-backend`. */
function backendPath(): Promise<string> {
  backendFile ??= runGit(['--exec-path'], process.cwd(), cleanEnv()).then((out) =>
    join(out.trim(), 'git-http-backend'),
  );
  return backendFile;
}

/** Where the CGI header block ends: the blank line, \r\n\r\n as git writes it or bare \n\n. */
function headerEnd(buf: Buffer): { at: number; length: number } | null {
  const crlf = buf.indexOf('\r\n\r\n');
  const lf = buf.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { at: crlf, length: 4 };
  if (lf >= 0) return { at: lf, length: 2 };
  return null;
}

function writeCgiHead(res: http.ServerResponse, block: string): void {
  let status = 200;
  const headers = new Map<string, string[]>();
  for (const line of block.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') {
      status = Number.parseInt(value, 10) || 500;
      continue;
    }
    headers.set(name, [...(headers.get(name) ?? []), value]);
  }
  for (const [name, values] of headers) res.setHeader(name, values.length === 1 ? (values[0] as string) : values);
  res.writeHead(status);
}

function decode(segment: string | undefined): string | null {
  try {
    return decodeURIComponent(segment ?? '');
  } catch {
    return null;
  }
}

function reply(res: http.ServerResponse, status: number, message: string): Promise<void> {
  // A text/plain body on a failed info/refs is shown by git as "remote: <message>".
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  return new Promise((done) => res.end(`${message}\n`, () => done()));
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** The server's git sees neither the caller's GIT_* variables nor the user's or system's git config. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('GIT_')) env[key] = value;
  env.GIT_CONFIG_NOSYSTEM = '1';
  env.GIT_CONFIG_GLOBAL = '/dev/null';
  return env;
}

/** Config given to git through the environment (GIT_CONFIG_COUNT, git 2.31+), not written anywhere. */
function configEnv(pairs: [string, string][]): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { GIT_CONFIG_COUNT: String(pairs.length) };
  pairs.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

function runGit(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
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
    child.on('close', (code) => {
      if (code === 0) done(stdout);
      else fail(new Error(`git ${args.join(' ')} failed (exit ${code}): ${stderr.trim()}`));
    });
  });
}

// --- pre-receive ------------------------------------------------------------------------------

const ZERO = /^0+$/;

// The hook, in bash for its quick start (/dev/tcp): sends the token, the quarantine's object
// directories and its stdin (one "<old> <new> <ref>" line per ref), then "end", to the port it was
// given; the answer is "ok" or "refuse" and the message. No answer refuses the push.
const HOOK = `#!/usr/bin/env bash
exec 3<>"/dev/tcp/127.0.0.1/$FAKE_GITHUB_HOOK_PORT" || { echo "push check unreachable" >&2; exit 1; }
{
  printf '%s\\n' "$FAKE_GITHUB_HOOK_TOKEN" "$GIT_OBJECT_DIRECTORY" "$GIT_ALTERNATE_OBJECT_DIRECTORIES" "$GIT_QUARANTINE_PATH"
  cat
  printf 'end\\n'
} >&3
IFS= read -r verdict <&3
[ "$verdict" = ok ] && exit 0
cat <&3 >&2
exit 1
`;

/**
 * The hooks folder, <projectRoot>/.hooks (no owner name starts with a dot), holding only the hook
 * above; written when missing, through a rename so that a concurrent push never runs half a file.
 */
async function hooks(projectRoot: string): Promise<string> {
  const dir = resolve(projectRoot, '.hooks');
  const file = join(dir, 'pre-receive');
  if ((await readFile(file, 'utf8').catch(() => null)) === HOOK) return dir;
  await mkdir(dir, { recursive: true });
  const temp = `${file}.${randomBytes(4).toString('hex')}`;
  await writeFile(temp, HOOK, { mode: 0o755 });
  await rename(temp, file);
  return dir;
}

/** A loopback listener for one push's pre-receive hook, and what the backend needs to reach it. */
async function pushCheck(
  projectRoot: string,
  repo: GitRepoName,
  repoDir: string,
  refuse: NonNullable<GitHttpOptions['refusePush']>,
): Promise<{ hooksPath: string; env: NodeJS.ProcessEnv; close(): void }> {
  const hooksPath = await hooks(projectRoot);
  const token = randomBytes(16).toString('hex');
  const server: Server = createServer((socket) => {
    let data = '';
    let answered = false;
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    socket.on('data', async (chunk: string) => {
      data += chunk;
      const lines = data.split('\n');
      const stop = lines.indexOf('end', 4);
      if (stop < 0 || answered) return;
      answered = true;
      const [sentToken, objects, alternates, quarantine] = lines;
      let message: string | null;
      try {
        if (sentToken !== token) throw new Error('bad hook token');
        const env: NodeJS.ProcessEnv = { ...cleanEnv(), GIT_DIR: repoDir };
        if (objects) env.GIT_OBJECT_DIRECTORY = objects;
        if (alternates) env.GIT_ALTERNATE_OBJECT_DIRECTORIES = alternates;
        if (quarantine) env.GIT_QUARANTINE_PATH = quarantine;
        const git = (args: string[]) => runGit(args, repoDir, env);
        const updates = lines
          .slice(4, stop)
          .filter(Boolean)
          .map((line) => {
            const [oldSha = '', newSha = '', ref = ''] = line.split(' ');
            return { ref, oldSha, newSha };
          });
        message = await refuse(repo, { updates, git, changedPaths: () => changedPaths(git, updates) });
      } catch (err) {
        message = `push check failed: ${err instanceof Error ? err.message : String(err)}`;
      }
      socket.end(message === null ? 'ok\n' : `refuse\n${message.endsWith('\n') ? message : `${message}\n`}`);
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    hooksPath,
    env: { FAKE_GITHUB_HOOK_PORT: String(port), FAKE_GITHUB_HOOK_TOKEN: token },
    close: () => server.close(),
  };
}

async function changedPaths(git: (args: string[]) => Promise<string>, updates: RefUpdate[]): Promise<string[]> {
  const tips = updates.map((u) => u.newSha).filter((sha) => !ZERO.test(sha));
  if (tips.length === 0) return [];
  const out = await git([
    'log',
    '--format=',
    '--name-only',
    '--no-renames',
    '--diff-merges=first-parent',
    '--root',
    ...tips,
    '--not',
    '--all',
  ]);
  return [...new Set(out.split('\n').filter(Boolean))].sort();
}
