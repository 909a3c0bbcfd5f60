// The pre-flight's look from inside the sandbox: the programs the agent's, the grader's and setup's
// commands start, and every path outside the repository they name, checked as an episode will
// see them, through the same confinement (worker/boundary.ts) with one tiny probe each. A path
// there outside and hidden inside (under /tmp, which is the sandbox's own; in the home folder; the
// repository itself by its absolute path) would fail every episode with "not found" or "Cannot
// find module": the run refuses to start, naming the path and the sandbox.read line that shows it.
// That is for what a command runs (its program, a script an interpreter runs); a path it only
// names (a data file, or a secret a hostile test agent tries to read) may be meant to be out of
// reach, and is a note.
import { realpathSync } from 'node:fs';
import { mkdir, mkdtemp, readlink, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { agentFor, cliOf } from '../agents/specs.js';
import { LINKS_PROBED_MAX, SANDBOX_PROBE_TIMEOUT_MS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { findExecutable } from '../io/executables.js';
import { Git } from '../io/git.js';
import { runProcess } from '../io/process.js';
import { type Confinement, isInside, type Sandbox, type Unaccounted } from '../io/sandbox.js';
import {
  agentConfinement,
  expandHome,
  graderConfinement,
  hiddenPlaces,
  setupConfinement,
  withAccount,
} from '../worker/boundary.js';
import { allowedEnv } from '../worker/env.js';

export interface SandboxViewInput {
  repo: string;
  config: Config;
  env: NodeJS.ProcessEnv;
  sandbox: Sandbox;
  /** forkflush's own places, hidden from every sandbox: the repository, the run folders. */
  private: string[];
}

/** Something a command needs: a program it starts by name, or a path it names. */
interface Needed {
  /** The config key whose command needs it. */
  key: string;
  /** A program name (looked up on PATH), or an absolute path. */
  name: string;
  program: boolean;
  /** Where it is outside the sandbox. */
  outside: string;
  folder: boolean;
  /** The command runs it (its program, an interpreter's script): without it nothing can work. */
  runs: boolean;
}

/** What the pre-flight says of them: problems stop the run; notes are said, and it goes on. */
export interface SandboxView {
  problems: string[];
  notes: string[];
}

/** One problem per program or script the sandbox hides from the command that runs it; a note per path it only names. */
export async function hiddenInSandbox(v: SandboxViewInput): Promise<SandboxView> {
  const c = v.config;
  const adapter = agentFor(c);
  const agentEnv = allowedEnv(v.env, [...adapter.passEnv, ...c.agent.env]);
  const graderEnv = allowedEnv(v.env, c.grader.env);
  const setupEnv = allowedEnv(v.env, c.setup.env);
  const agentCommand = c.agent.command ?? cliOf(c.agent.kind)?.executable ?? '';
  const roles = [
    { key: 'agent.command', commands: [agentCommand], env: agentEnv, confine: 'agent' as const },
    { key: 'grader.command', commands: [c.grader.command], env: graderEnv, confine: 'grader' as const },
    { key: 'setup.commands', commands: c.setup.commands, env: setupEnv, confine: 'setup' as const },
  ];
  const dir = await mkdtemp(join(tmpdir(), 'forkflush-preflight-'));
  try {
    const places = {
      workspace: join(dir, 'workspace'),
      context: join(dir, 'context'),
      box: join(dir, 'box'),
      objects: [],
      private: v.private,
    };
    for (const p of [places.workspace, places.context, join(places.box, 'tmp')]) await mkdir(p, { recursive: true });
    const problems: string[] = [];
    const notes: string[] = [];
    for (const role of roles) {
      const needed: Needed[] = role.confine === 'grader' ? await linkedOut(v.repo) : [];
      for (const command of role.commands) needed.push(...(await neededBy(command, role.key, role.env.PATH ?? '')));
      if (needed.length === 0) continue;
      const confinement: Unaccounted =
        role.confine === 'agent'
          ? agentConfinement(places, c, v.env)
          : role.confine === 'grader'
            ? graderConfinement(places.workspace, join(places.box, 'tmp'), places, c, v.env)
            : setupConfinement(places.workspace, join(places.box, 'tmp'), places, c, v.env);
      const seen = await withAccount(v.sandbox, (account) =>
        probe(v.sandbox, { ...confinement, account }, places.workspace, role.env.PATH ?? '', needed),
      );
      for (const [i, n] of needed.entries()) {
        if (seen[i] === false) (n.runs ? problems : notes).push(await problemOf(n, v));
      }
    }
    problems.push(...(await closedPlaces(v)));
    return { problems: [...new Set(problems)], notes: [...new Set(notes)] };
  } finally {
    await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

/** How to give every episode a file git ignores. */
export const IGNORED_FIX = 'commit it (git add -f), or make it in setup.commands';

/** Whether git ignores a path of the repository (a .venv, node_modules): no checkout has it. */
export const ignoredByGit = async (repo: string, file: string) =>
  (await new Git(repo).exec(['check-ignore', '-q', '--', file], { check: false })).exitCode === 0;

/** Runs the probe in the sandbox: for each needed thing, whether it is there inside. */
async function probe(
  sandbox: Sandbox,
  confinement: Confinement,
  cwd: string,
  path: string,
  needed: Needed[],
): Promise<(boolean | null)[]> {
  // Pairs of arguments: `p PATH` (is it there?) or `c NAME` (does PATH find it?); a line each, 1 or 0.
  const script =
    'while [ $# -gt 1 ]; do kind=$1; x=$2; shift 2; ' +
    'if [ "$kind" = p ]; then [ -e "$x" ] && echo 1 || echo 0; ' +
    'else command -v "$x" >/dev/null 2>&1 && echo 1 || echo 0; fi; done';
  const args = needed.flatMap((n) => [n.program ? 'c' : 'p', n.name]);
  const r = await runProcess('/bin/sh', ['-c', script, 'forkflush-probe', ...args], {
    cwd,
    env: { PATH: path },
    timeoutMs: SANDBOX_PROBE_TIMEOUT_MS,
    confine: { sandbox, confinement },
  });
  const lines = r.stdout.trim().split('\n');
  // A probe that did not run says nothing (the episode will say what it finds).
  if (r.exitCode !== 0 || lines.length !== needed.length) return needed.map(() => null);
  return lines.map((l) => l === '1');
}

/**
 * What a command needs from outside the repository: the program it starts (its first word, a
 * name on PATH or an absolute path) and every absolute or `~/` path it names, each only when it
 * is there outside (a path the command makes is not needed).
 */
export async function neededBy(command: string, key: string, path: string): Promise<Needed[]> {
  const out: Needed[] = [];
  const first = command
    .trim()
    .split(/\s+/)
    .find((w) => !/^\w+=/.test(w));
  if (first && /^[\w.+-]+$/.test(first) && !SHELL_WORDS.has(first)) {
    const found = await findExecutable(first, path);
    if (found) out.push({ key, name: first, program: true, outside: found, folder: false, runs: true });
  }
  const run = new Set([...command.matchAll(RUN_BY_INTERPRETER)].map((m) => m[1] as string));
  if (first && /^(?:~\/|\/)/.test(first)) run.add(first);
  for (const m of command.matchAll(/(?:^|[\s=:'"])((?:~\/|\/)[^\s'"`;|&<>()$]*)/g)) {
    const raw = (m[1] as string).replace(/[,.]+$/, '');
    const abs = raw.startsWith('~/') ? expandHome(raw) : raw;
    if (abs === '/' || /^\/(?:dev|proc|sys)(?:\/|$)/.test(abs) || !isAbsolute(abs)) continue;
    const s = await stat(abs).catch(() => null);
    if (s) out.push({ key, name: abs, program: false, outside: abs, folder: s.isDirectory(), runs: run.has(raw) });
  }
  // (The repository's own files by a relative name are the workspace's: the pre-flight checks they are committed.)
  return out;
}

/**
 * The places outside the repository its committed links lead to, where they are there outside (a
 * dataset linked from the home folder): the user committed each for something to read through it,
 * so one the grader cannot follow is a problem, not a note.
 */
async function linkedOut(repo: string): Promise<Needed[]> {
  const listed = await new Git(repo).exec(['ls-files', '--stage', '-z'], { check: false });
  const links = listed.stdout
    .split('\0')
    .filter((l) => l.startsWith('120000 '))
    .map((l) => l.slice(l.indexOf('\t') + 1));
  const out: Needed[] = [];
  for (const link of links) {
    if (out.length >= LINKS_PROBED_MAX) break;
    const target = await readlink(join(repo, link)).catch(() => null);
    if (target === null) continue;
    const abs = resolve(dirname(join(repo, link)), target);
    // One into the repository by its absolute path is as hidden: episodes run in a checkout.
    if (isInside(abs, repo) && !isAbsolute(target)) continue;
    const s = await stat(abs).catch(() => null);
    if (s)
      out.push({
        key: `the repository's link ${link}`,
        name: abs,
        program: false,
        outside: abs,
        folder: s.isDirectory(),
        runs: true,
      });
  }
  return out;
}

/** The problem of a program or path the sandbox hides, with the config line that shows it. */
function hiddenProblem(n: Needed, repo: string): string {
  const what = n.program ? `\`${n.name}\` (${n.outside})` : n.outside;
  if (isInside(n.outside, repo)) {
    return (
      `${n.key} names ${what}, in the repository by its absolute path, which the sandbox hides (episodes run in a ` +
      `checkout of it): name it relative to the repository (${relative(repo, n.outside) || '.'})`
    );
  }
  const folder = n.folder ? n.outside : dirname(n.outside);
  return (
    `${n.key} ${n.runs ? 'needs' : 'names'} ${what}, which the sandbox hides from it (the sandbox has a /tmp of its own, and hides your home folder): ` +
    `add its folder to the config, sandbox: {read: [${JSON.stringify(folder)}]}, or move it into the repository`
  );
}

/**
 * Why a program or path is not there inside: a place the sandbox hides (its own /tmp, the home
 * folder, the repository, forkflush's), or, elsewhere, modes that keep the sandbox's user out
 * (under root it is nobody). A hidden folder shown by sandbox.read must be open to that user too.
 */
async function problemOf(n: Needed, v: SandboxViewInput): Promise<string> {
  const rel = relative(v.repo, n.outside);
  if (isInside(n.outside, v.repo) && rel && (await ignoredByGit(v.repo, rel)))
    return `${n.key} ${n.runs ? 'needs' : 'names'} ${n.program ? `\`${n.name}\` (${n.outside})` : n.outside}, in the repository's ${rel}, which git ignores, so no episode's checkout has it: ${IGNORED_FIX}`;
  const folder = n.folder ? n.outside : dirname(n.outside);
  const hidden = hiddenRoots(v).some((r) => isInside(n.outside, r));
  const user = sandboxUser(v.sandbox);
  if (!hidden) {
    const closed = user ? await closedTo(n.outside, user, '/') : null;
    return closed && user ? closedProblem(n, closed, user) : hiddenProblem(n, v.repo);
  }
  const closed = user && !isInside(n.outside, v.repo) ? await closedTo(n.outside, user, folder) : null;
  return (
    hiddenProblem(n, v.repo) +
    (closed && user ? `; and open ${closed} to the sandbox's user, ${userName(user)} (chmod o+rX ${closed})` : '')
  );
}

/**
 * The places the sandbox's user must pass through: under root every episode's workspace and
 * context are in the run folder, and a folder above it closed to others (a `mktemp -d` task
 * folder, 0700) failed every episode with "Cannot find module", blamed on the agent; a
 * sandbox.write folder the same way. What the sandbox hides is made there afresh (0755 folders
 * down to a bind), so only the folders above the outermost hidden place that holds each count.
 */
async function closedPlaces(v: SandboxViewInput): Promise<string[]> {
  const user = sandboxUser(v.sandbox);
  if (!user) return [];
  const hidden = hiddenRoots(v);
  const who = `the sandbox's user (${userName(user)}: forkflush runs as root)`;
  const places = [
    ...v.private.map((p) => ({ path: p, what: `every episode works under ${p}` })),
    ...v.config.sandbox.write.map((w) => ({
      path: expandHome(w),
      what: `sandbox.write: ${w} is shared with the agent`,
    })),
  ];
  const said = new Map<string, string>();
  for (const { path, what } of places) {
    const outermost = hidden.filter((r) => isInside(path, r)).sort((a, b) => a.length - b.length)[0] ?? path;
    const closed = await closedTo(dirname(outermost), user, '/');
    if (closed && !said.has(closed))
      said.set(
        closed,
        `${what}, and ${who} may not pass through ${closed}, which is closed to others: open it (chmod o+x ${closed}), or run forkflush as an ordinary user`,
      );
  }
  return [...said.values()];
}

/** The places every sandbox hides: its own /tmp, the home folder, the repository, forkflush's. */
function hiddenRoots(v: SandboxViewInput): string[] {
  // The sandbox's own list (its home folders: $HOME's and the account's): what it hides is made afresh inside.
  return [realpathSync('/tmp'), ...hiddenPlaces(v.env), v.repo, ...v.private].filter((r) => r && r !== '/');
}

/**
 * The first folder from `from` down to `path` (or the path itself) that `user` may not pass or
 * read by its mode bits, or null.
 */
async function closedTo(path: string, user: { uid: number; gid: number }, from: string): Promise<string | null> {
  const parts = path.split('/').filter(Boolean);
  const start = from.split('/').filter(Boolean).length;
  for (let i = start; i <= parts.length; i++) {
    const p = `/${parts.slice(0, i).join('/')}`;
    const s = await stat(p).catch(() => null);
    if (!s) return null;
    const bits = s.uid === user.uid ? (s.mode >> 6) & 7 : s.gid === user.gid ? (s.mode >> 3) & 7 : s.mode & 7;
    const need = i < parts.length || s.isDirectory() ? 1 : 4;
    if ((bits & need) === 0) return p;
  }
  return null;
}

/** Whom the sandbox runs commands as under root (a uid of its own per sandbox, or nobody); null as an ordinary user. */
function sandboxUser(s: Sandbox): { uid: number; gid: number } | null {
  const account = s.account();
  account.release();
  return account.user;
}

function userName(user: { uid: number }): string {
  return user.uid === 65534 ? 'nobody' : 'a uid of its own, no account of this machine';
}

/** The problem of a path the sandbox's user may not read (its mode, not the sandbox, keeps it out). */
function closedProblem(n: Needed, closed: string, user: { uid: number }): string {
  const what = n.program ? `\`${n.name}\` (${n.outside})` : n.outside;
  return (
    `${n.key} ${n.runs ? 'needs' : 'names'} ${what}, which the sandbox's user (${userName(user)}: forkflush runs as root) may not read: ` +
    `${closed} is closed to others; open it (chmod o+rX ${closed}) or move it into the repository`
  );
}

/** A path an interpreter runs: `node /x/agent.mjs`, `python3 -u /x/a.py`, `sh ~/bin/x.sh`. */
const RUN_BY_INTERPRETER =
  /\b(?:node|nodejs|python[\d.]*|sh|bash|dash|zsh|deno|bun|tsx|ruby|perl|php|Rscript|julia)(?:\s+-\S+)*\s+((?:~\/|\/)[^\s'"`;|&<>()$]+)/g;

/** Words a shell runs itself: no program to look for. */
export const SHELL_WORDS = new Set([
  'cd',
  'exec',
  'export',
  'source',
  '.',
  'set',
  'if',
  'for',
  'while',
  'until',
  'case',
  'time',
  'env',
  'nice',
  'timeout',
  'nohup',
  'command',
  'builtin',
  'eval',
  'true',
  'false',
  ':',
  'test',
  '[',
  '!',
  '{',
  // The other built-ins a POSIX shell runs itself.
  ...['exit', 'return', 'unset', 'read', 'shift', 'trap', 'wait', 'ulimit', 'umask', 'readonly', 'local'],
  ...['echo', 'printf', 'pwd', 'kill', 'type', 'alias', 'hash', 'break', 'continue', 'times', 'getopts'],
]);
