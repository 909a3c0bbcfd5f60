// Shared pieces of the attack suite: task repositories for hostile command agents, a local run of
// them, a clean regrade of a result commit, and the Action run as a job on a realistic runner
// layout (file commands under RUNNER_TEMP, the checkout under the runner's work root, a home of
// its own). Everything lives under /var/tmp, not /tmp: inside the sandbox /tmp is private, so a
// test under /tmp would be hidden for free and prove nothing about the boundary.

import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { BuildOptions } from 'esbuild';
import { describe } from 'vitest';
import BUNDLE_OPTIONS from '../../scripts/bundle-options.json' with { type: 'json' };
import { allEpisodes, type EpisodeResult, type RunState } from '../../src/core/state.js';
import { drive } from '../../src/local/runner.js';
import { type OpenRun, startRun } from '../../src/local/start.js';
import { isolationFor } from '../../src/worker/boundary.js';
import { ACTION, ActionRepo, parseOutputs, TOKEN } from '../integration/action-repo.js';

export { TOKEN };
// Made up at run time, as TOKEN is, so that no file of the suite holds them.
export const RUNTIME_TOKEN = `runtime-token-value-${randomBytes(6).toString('hex')}`;
export const ID_TOKEN = `id-token-request-value-${randomBytes(6).toString('hex')}`;
/** The job's FORKFLUSH_CONTEXT_KEY (hex), which only forkflush may hold. */
export const CONTEXT_KEY = '5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7';

const iso = await isolationFor('auto');
if (!iso.sandbox) {
  console.warn(
    `\n!!!!!!!! ATTACK SUITE SKIPPED: no sandbox here (${iso.label}). These tests only mean something with bubblewrap. !!!!!!!!\n`,
  );
}
/** `describe`, or a loud `describe.skip` where bubblewrap cannot sandbox. */
export const describeSandboxed: typeof describe = iso.sandbox ? describe : (describe.skip as typeof describe);

// One per user: a folder root made (a run of the suite as root) is not an ordinary user's to write.
const uid = process.getuid?.() ?? 0;
const ROOT = `/var/tmp/forkflush-attacks${uid === 0 ? '' : `-${uid}`}`;

const made: string[] = [];

/** A fresh folder outside /tmp, world-traversable (the non-root case needs that). */
export function attackTemp(prefix: string): string {
  mkdirSync(ROOT, { recursive: true, mode: 0o755 });
  chmodSync(ROOT, 0o755);
  const dir = mkdtempSync(join(ROOT, `${prefix}-`));
  chmodSync(dir, 0o755);
  made.push(dir);
  return dir;
}

/** A HOME of its own (an attackTemp), with a ~/.gitconfig naming the user, and `config` after it. */
export function homeWith(config = ''): string {
  const home = attackTemp('home');
  writeFileSync(join(home, '.gitconfig'), `[user]\n\tname = Night User\n\temail = user@example.invalid\n${config}`);
  return home;
}

/** A user's shell environment, as forkflush would be started from it: PATH, HOME and a locale, and `more`. */
export const userEnv = (home: string, more: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  HOME: home,
  LANG: 'C.UTF-8',
  ...more,
});

/** C0 controls but tab and newline, DEL, and the C1 controls (CSI, OSC, ... as single code points). */
function isControl(code: number): boolean {
  return (code < 0x20 && code !== 0x09 && code !== 0x0a) || (code >= 0x7f && code <= 0x9f);
}

/** Whether text holds a control character a terminal would act on. */
export const hasControl = (s: string) => [...s].some((c) => isControl(c.codePointAt(0) ?? 0));

/** The first line of text that holds one, as JSON (its escapes seen). */
export const firstControlLine = (s: string) => JSON.stringify(s.split('\n').find(hasControl));

/**
 * The hostile scripts, copied out of the checkout into a folder the sandbox shows (read-only, as
 * the rest of the machine): a checkout under /tmp, as a CI job or a new contributor clones it, is
 * hidden inside the sandbox, whose /tmp is its own, and every agent would "crash" on a missing script.
 */
export const FX = attackTemp('fixtures');
cpSync(join(import.meta.dirname, '..', 'fixtures', 'attacks'), FX, { recursive: true });

/** Removes the folders this file made (FORKFLUSH_ATTACKS_KEEP=1 keeps them, to look at). */
export function cleanupAttackTemps(): void {
  if (process.env.FORKFLUSH_ATTACKS_KEEP) return;
  for (const dir of made.splice(0)) {
    rmSync(dir, { recursive: true, force: true });
    rmSync(`${dir}.index`, { force: true });
  }
}

/** A unique string no file on the machine holds by chance. */
export function unique(label: string): string {
  return `${label}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

export interface AttackRepo {
  /** The task repository (the user's repository, outside the sandbox). */
  dir: string;
  /** The sandbox.write folder the agent may write (its log and loot go there). */
  logs: string;
  grader: string;
  git(...args: string[]): string;
}

export interface AttackRepoOptions {
  /** The agent's shell command; {fx} is the fixtures folder, {logs} the logs folder, {repo} the task folder. */
  agent: string;
  grader?: string;
  protected?: string[];
  budget?: string;
  strategy?: string;
  agentTimeout?: number;
  graderTimeout?: number;
  extra?: string;
  files?: Record<string, string>;
  /** Where to make it (default: a fresh attackTemp). */
  dir?: string;
}

export const ONE_EPISODE = 'total: 6\n  unit: tokens\n  episode: 6';
/** The honest grader: the number in value.txt. */
export const CAT_GRADER = "sh -c 'cat value.txt 2>/dev/null || echo 0'";

export function makeAttackRepo(o: AttackRepoOptions): AttackRepo {
  const root = o.dir ?? attackTemp('task');
  const dir = join(root, 'repo');
  const logs = join(root, 'logs');
  mkdirSync(join(dir, '.github'), { recursive: true });
  mkdirSync(logs, { recursive: true });
  // The agent runs as nobody when forkflush runs as root: its log folder must be writable by it.
  chmodSync(logs, 0o777);
  const grader = o.grader ?? 'sh grade.sh';
  const files: Record<string, string> = {
    'TASK.md': 'Make the number in value.txt as large as you can.\n',
    'grade.sh': '# The honest grader: the number in value.txt.\ncat value.txt 2>/dev/null || echo 0\n',
    'value.txt': '1\n',
    'NOTES.md': '# Notes\n',
    ...o.files,
  };
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const fill = (s: string) => s.replaceAll('{fx}', FX).replaceAll('{logs}', logs).replaceAll('{repo}', dir);
  writeFileSync(
    join(dir, '.github', 'autoresearch.yml'),
    `grader:
  command: ${JSON.stringify(fill(grader))}
  protected: ${JSON.stringify(o.protected ?? ['grade.sh'])}
  timeout: ${o.graderTimeout ?? 5}
agent:
  command: ${JSON.stringify(fill(o.agent))}
  timeout: ${o.agentTimeout ?? 20}
budget:
  ${o.budget ?? ONE_EPISODE}
strategy: ${o.strategy ?? 'single-run'}
sandbox:
  mode: required
  write: [${JSON.stringify(logs)}]
${o.extra ?? ''}
`,
  );
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, encoding: 'utf8' }).trim();
  git('init', '-q', '--initial-branch=main');
  git('add', '-A');
  git('commit', '-qm', 'task');
  return { dir, logs, grader: fill(grader), git };
}

export interface LocalRun {
  run: OpenRun;
  state: RunState;
  results: EpisodeResult[];
  /** The first episode's result. */
  result: EpisodeResult;
  ms: number;
}

/** A whole local run, in this process, as `forkflush run` does it. */
export async function runLocal(
  repo: AttackRepo,
  o: { concurrency?: number; seed?: number; now?: Date } = {},
): Promise<LocalRun> {
  const started = Date.now();
  const run = await startRun({
    dir: repo.dir,
    seed: o.seed ?? 1,
    now: o.now ?? new Date('2026-11-30T10:00:00Z'),
    ...(o.concurrency ? { concurrency: o.concurrency } : {}),
  });
  const { state } = await drive(run.state, run);
  const results = allEpisodes(state)
    .map((e) => e.result)
    .filter((r): r is EpisodeResult => r !== undefined);
  const result = results[0];
  if (!result) throw new Error(`the run recorded no result (status ${state.status})`);
  return { run, state, results, result, ms: Date.now() - started };
}

/**
 * Grades a commit the way anyone could reproduce it: its tree checked out with plain git into a
 * fresh folder with no .git (no history, no object store), the grader run there, unconfined.
 */
export function cleanRegrade(gitDir: string, commit: string, grader: string): number | null {
  const dir = attackTemp('regrade');
  const index = join(dir, 'regrade.index');
  const tree = join(dir, 'tree');
  mkdirSync(tree);
  execFileSync('git', [`--git-dir=${gitDir}`, `--work-tree=${tree}`, 'read-tree', '--reset', '-u', commit], {
    env: { ...process.env, GIT_INDEX_FILE: index },
  });
  const r = spawnSync('/bin/sh', ['-c', grader], {
    cwd: tree,
    encoding: 'utf8',
    timeout: 20_000,
    env: { PATH: process.env.PATH, HOME: dir },
  });
  if (r.status !== 0) return null;
  const last = r.stdout.trim().split('\n').at(-1)?.trim() ?? '';
  const n = Number(last);
  return last !== '' && Number.isFinite(n) ? n : null;
}

/** A file of a commit (null when the commit has none). */
export function showFile(gitDir: string, commit: string, path: string): string | null {
  const r = spawnSync('git', [`--git-dir=${gitDir}`, 'show', `${commit}:${path}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout : null;
}

export function commitMessage(gitDir: string, commit: string): string {
  return execFileSync('git', [`--git-dir=${gitDir}`, 'log', '-1', '--format=%B', commit], { encoding: 'utf8' });
}

/** The mode of a path in a commit's tree ('100644', '120000', ...), null when it has none. */
export function treeMode(gitDir: string, commit: string, path: string): string | null {
  const out = execFileSync('git', [`--git-dir=${gitDir}`, 'ls-tree', commit, '--', path], { encoding: 'utf8' });
  return out.trim() === '' ? null : (out.split(' ')[0] ?? null);
}

/**
 * Whether any file of the commit (under `paths`, by default all but the config, which holds the
 * agent's command line), or its message, holds `needle`.
 */
export function commitHolds(
  gitDir: string,
  commit: string,
  needle: string,
  paths = [':!.github/autoresearch.yml'],
): boolean {
  const grep = spawnSync('git', [`--git-dir=${gitDir}`, 'grep', '-q', '-F', '-a', needle, commit, '--', ...paths], {
    encoding: 'utf8',
  });
  return grep.status === 0 || commitMessage(gitDir, commit).includes(needle);
}

/** Every file under a folder, concatenated (what the agent managed to write there). */
export function folderText(dir: string): string {
  let out = '';
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    try {
      out += readFileSync(join(e.parentPath, e.name), 'latin1');
    } catch {}
  }
  return out;
}

/** Live processes whose command line holds `text` (a zombie waiting to be reaped is not live). */
export function processesWith(text: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)
    .filter((p) => {
      try {
        const cmdline = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        return cmdline.includes(text) && !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${p}/stat`, 'utf8'));
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Content and modification time: what "left untouched" means for a sentinel file. */
export function fingerprint(path: string): string {
  try {
    return `${statSync(path).mtimeMs}:${readFileSync(path, 'latin1')}`;
  } catch {
    return 'missing';
  }
}

// ---- The Action, as a job on a runner ----

/**
 * An ActionRepo (test/integration/action-repo.ts) made under /var/tmp instead of /tmp, with its
 * own grader command if given.
 */
export function makeActionRepo(
  agent: string,
  o: { grader?: string; config?: (text: string, logs: string) => string } = {},
): ActionRepo {
  class AttackActionRepo extends ActionRepo {
    override configText(): string {
      const text = super.configText();
      const graded = o.grader
        ? text.replace('  command: sh grade.sh\n', `  command: ${JSON.stringify(o.grader)}\n`)
        : text;
      return o.config ? o.config(graded, this.logs) : graded;
    }
  }
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = attackTemp('action');
  try {
    return new AttackActionRepo(agent.replaceAll('{fx}', FX));
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
}

export interface JobRun {
  exitCode: number | null;
  stdout: string;
  outputs: Record<string, string>;
  summary: string;
  ms: number;
  /** The runner's paths. */
  paths: {
    job: string;
    home: string;
    temp: string;
    workspace: string;
    output: string;
    summary: string;
    env: string;
    path: string;
    state: string;
  };
}

let jobs = 0;

/**
 * Runs dist/index.js as a GitHub-hosted runner runs a step: HOME the runner's home, the checkout
 * at <work>/<repo>/<repo>, file commands in RUNNER_TEMP/_runner_file_commands, the token input,
 * GITHUB_TOKEN and the runtime tokens in the environment. Asynchronous, so that a server in this
 * process can answer the job's git.
 */
export async function runJob(
  repo: ActionRepo,
  episode: string,
  o: {
    serverUrl?: string;
    prepare?: (paths: JobRun['paths']) => void;
    /** The job's FORKFLUSH_CONTEXT_KEY (default CONTEXT_KEY; null: none). */
    contextKey?: string | null;
    /** Whether the event says the repository is private (default: the event says nothing). */
    privateRepository?: boolean;
    /** The Action to run (default dist/index.js; buildActionFromSource makes one of the sources). */
    action?: string;
    /** More of the runner's environment. */
    env?: NodeJS.ProcessEnv;
    /** Sees the job's process once it is started. */
    onStart?: (child: ReturnType<typeof spawn>) => void;
  } = {},
): Promise<JobRun> {
  const job = join(repo.root, `runner-${++jobs}`);
  const home = join(job, 'home');
  const work = join(job, 'work');
  const temp = join(work, '_temp');
  const commands = join(temp, '_runner_file_commands');
  const paths = {
    job,
    home,
    temp,
    workspace: join(work, 'repo', 'repo'),
    output: join(commands, 'set_output_0b4d'),
    summary: join(commands, 'step_summary_0b4d'),
    env: join(commands, 'set_env_0b4d'),
    path: join(commands, 'add_path_0b4d'),
    state: join(commands, 'save_state_0b4d'),
  };
  mkdirSync(home, { recursive: true });
  mkdirSync(commands, { recursive: true });
  mkdirSync(paths.workspace, { recursive: true });
  for (const f of [paths.output, paths.summary, paths.env, paths.path, paths.state]) writeFileSync(f, '');
  writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = runner\n\temail = runner@example.invalid\n');
  const event = join(job, 'event.json');
  writeFileSync(
    event,
    JSON.stringify(o.privateRepository === undefined ? {} : { repository: { private: o.privateRepository } }),
  );
  o.prepare?.(paths);
  const contextKey = o.contextKey === undefined ? CONTEXT_KEY : o.contextKey;
  const started = Date.now();
  const child = spawn(process.execPath, [o.action ?? ACTION], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH,
      HOME: home,
      CI: 'true',
      GITHUB_ACTIONS: 'true',
      INPUT_RUN: 'issue-42',
      INPUT_EPISODE: episode,
      INPUT_TOKEN: TOKEN,
      GITHUB_TOKEN: TOKEN,
      ACTIONS_RUNTIME_TOKEN: RUNTIME_TOKEN,
      ACTIONS_ID_TOKEN_REQUEST_TOKEN: ID_TOKEN,
      ACTIONS_ID_TOKEN_REQUEST_URL: 'http://127.0.0.1:9/oidc',
      ...(contextKey ? { FORKFLUSH_CONTEXT_KEY: contextKey } : {}),
      GITHUB_EVENT_PATH: event,
      GITHUB_SERVER_URL: o.serverUrl ?? `file://${join(repo.root, 'server')}`,
      GITHUB_REPOSITORY: 'owner/repo',
      GITHUB_WORKSPACE: paths.workspace,
      RUNNER_WORKSPACE: join(work, 'repo'),
      RUNNER_TEMP: temp,
      GITHUB_OUTPUT: paths.output,
      GITHUB_STEP_SUMMARY: paths.summary,
      GITHUB_ENV: paths.env,
      GITHUB_PATH: paths.path,
      GITHUB_STATE: paths.state,
      ...o.env,
    },
  });
  o.onStart?.(child);
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 40_000);
  const exitCode = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  clearTimeout(killer);
  return {
    exitCode,
    stdout,
    outputs: parseOutputs(readFileSync(paths.output, 'utf8')),
    summary: readFileSync(paths.summary, 'utf8'),
    ms: Date.now() - started,
    paths,
  };
}

/** The job's log without the runner's mask commands (which name the secrets to mask, by design). */
export function logWithoutMasks(stdout: string): string {
  return stdout
    .split('\n')
    .filter((l) => !l.startsWith('::add-mask::'))
    .join('\n');
}

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** An HTTP listener that records whatever reaches it, and answers 401 (what a thief would see). */
export async function startListener(): Promise<{ url: string; seen: SeenRequest[]; close(): Promise<void> }> {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('latin1').on('data', (d: string) => (body += d));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      res.writeHead(401, { 'www-authenticate': 'Basic realm="x"' }).end();
    });
  });
  return { url: await listen(server), seen, close: () => close(server) };
}

/**
 * The forge's git over HTTP on loopback: `git http-backend` on the bare repositories under
 * `projectRoot`, pushes only with the token (as GitHub), every request recorded.
 */
export async function startGitServer(
  projectRoot: string,
  token: string,
): Promise<{ url: string; seen: SeenRequest[]; close(): Promise<void> }> {
  const seen: SeenRequest[] = [];
  const expected = `basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: '' });
    const authed = (req.headers.authorization ?? '').toLowerCase() === expected.toLowerCase();
    const pushing = u.pathname.endsWith('/git-receive-pack') || u.searchParams.get('service') === 'git-receive-pack';
    if (pushing && !authed) {
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="forge"' }).end();
      return;
    }
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: u.pathname,
      QUERY_STRING: u.search.slice(1),
      REQUEST_METHOD: req.method,
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
      ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
      ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      ...(authed ? { REMOTE_USER: 'x-access-token' } : {}),
    };
    const cgi = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'ignore'] });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let started = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (started) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      started = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', () => res.end());
  });
  return { url: await listen(server), seen, close: () => close(server) };
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** Whether a repository's object store holds an object. */
export function hasObject(gitDir: string, id: string): boolean {
  return spawnSync('git', [`--git-dir=${gitDir}`, 'cat-file', '-e', id]).status === 0;
}

// ---- Round 2: forkflush as a child process (the CLI built from the current sources) ----

let builtCli: Promise<string> | undefined;

/**
 * `src/cli/index.ts` bundled as scripts/bundle.mjs bundles it, into a folder of its own (not dist/,
 * which may lag the sources): a forkflush process a test can kill, time and measure.
 */
export function currentCli(): Promise<string> {
  builtCli ??= (async () => {
    const { build } = await import('esbuild');
    const out = join(ROOT, `cli-${process.pid}`);
    mkdirSync(out, { recursive: true, mode: 0o755 });
    made.push(out);
    await build({
      entryPoints: { cli: join(import.meta.dirname, '..', '..', 'src', 'cli', 'index.ts') },
      outdir: out,
      ...(BUNDLE_OPTIONS as BuildOptions),
      logLevel: 'error',
    });
    return join(out, 'cli.js');
  })();
  return builtCli;
}

export interface CliRun {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  ms: number;
  /** Killed at the deadline (it had not exited by then). */
  timedOut: boolean;
  /** The process's peak resident memory (VmHWM), in MB, as last sampled. */
  peakMb: number;
}

/** An onStart for runCli: once `file` exists (the agent made it), `act` runs, once. */
export function onceExists(file: string, act: (child: ReturnType<typeof spawn>) => void) {
  return (child: ReturnType<typeof spawn>) => {
    const poll = setInterval(() => {
      if (!existsSync(file)) return;
      clearInterval(poll);
      act(child);
    }, 50);
    child.on('exit', () => clearInterval(poll));
  };
}

/**
 * Runs `forkflush <args>` (currentCli) and waits for it to exit, at most `deadlineMs`: then it is
 * killed (SIGKILL, with whatever it started: see killProcessesUnder). `killAboveMb` kills it early
 * when its memory passes that (a safety valve for this machine). `onOutput` sees the output as it comes.
 */
export async function runCli(
  args: string[],
  o: {
    cwd: string;
    deadlineMs: number;
    env?: NodeJS.ProcessEnv;
    killAboveMb?: number;
    onOutput?: (out: string, child: ReturnType<typeof spawn>) => void;
    /** Run it as this user (and group), without supplementary groups: forkflush as an ordinary user. */
    uid?: number;
    /** Sees the process once it is started (to signal it before it prints anything). */
    onStart?: (child: ReturnType<typeof spawn>) => void;
  },
): Promise<CliRun> {
  const cli = await currentCli();
  const started = Date.now();
  const child = spawn(process.execPath, [cli, ...args], {
    cwd: o.cwd,
    env: o.env ?? { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8' },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(o.uid !== undefined ? { uid: o.uid, gid: o.uid } : {}),
  });
  o.onStart?.(child);
  let out = '';
  const onData = (d: string) => {
    out += d;
    o.onOutput?.(out, child);
  };
  child.stdout.setEncoding('utf8').on('data', onData);
  child.stderr.setEncoding('utf8').on('data', onData);
  let peakMb = 0;
  let timedOut = false;
  const sampler = setInterval(() => {
    try {
      const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      if (m) peakMb = Math.max(peakMb, Number(m[1]) / 1024);
      if (o.killAboveMb && peakMb > o.killAboveMb) child.kill('SIGKILL');
    } catch {}
  }, 50);
  const killer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, o.deadlineMs);
  const [exitCode, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.on('close', (code, sig) => resolve([code, sig])),
  );
  clearTimeout(killer);
  clearInterval(sampler);
  return { exitCode, signal, out, ms: Date.now() - started, timedOut, peakMb: Math.round(peakMb) };
}

/**
 * SIGKILLs every process whose working directory, command line or environment names `dir` (what
 * a killed forkflush left behind: its git commands run in their own process groups).
 */
export function killProcessesUnder(dir: string): number[] {
  const found = processesUnder(dir);
  for (const pid of found) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
  return found;
}

/** Live processes whose working directory, command line or environment names `dir`. */
export function processesUnder(dir: string): number[] {
  const found: number[] = [];
  for (const p of readdirSync('/proc').filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)) {
    try {
      if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${p}/stat`, 'utf8'))) continue;
      let cwd = '';
      try {
        cwd = readlinkSync(`/proc/${p}/cwd`);
      } catch {}
      const text = `${readFileSync(`/proc/${p}/cmdline`, 'latin1')}\0${readFileSync(`/proc/${p}/environ`, 'latin1')}`;
      if (cwd === dir || cwd.startsWith(`${dir}/`) || text.includes(`${dir}/`) || text.includes(`${dir}\0`)) {
        found.push(Number(p));
      }
    } catch {}
  }
  return found;
}

/** The state of the newest local run of a task repository (null before it has one). */
export function newestRunState(repoDir: string): RunState | null {
  const runs = join(repoDir, '.forkflush');
  let ids: string[] = [];
  try {
    ids = readdirSync(runs).filter((id) => /^\d{8}-\d{6}/.test(id));
  } catch {
    return null;
  }
  const id = ids.sort().at(-1);
  try {
    return id ? (JSON.parse(readFileSync(join(runs, id, 'state.json'), 'utf8')) as RunState) : null;
  } catch {
    return null;
  }
}
