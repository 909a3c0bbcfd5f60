// The trust boundary of an episode: what the agent, and every grader run on its code, may touch.
// Inside: the agent and all it starts, and the graders. Outside: forkflush, its git directory and
// index, the run's records, the keys, every forge credential. The inside sees the machine
// read-only, minus the places below, and writes only its workspace, its context and its box.
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { basename, delimiter, dirname, isAbsolute, join } from 'node:path';
import { CONTRACT_VARS } from '../agents/agent.js';
import { PINNED_PROTECTED_MAX_FILES } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { matchesAny, normalGlob } from '../core/globs.js';
import { isForgeSecret } from '../core/secrets.js';
import { addCleaned, type Cleaned, CONTEXT_LIMITS, cleanAgentFolder } from '../io/agent-files.js';
import { type RunOptions, runProcess, type Spawner } from '../io/process.js';
import {
  type Confinement,
  isInside,
  NO_ACCOUNT,
  prefixOf,
  probeSandbox,
  type Sandbox,
  type SandboxAccount,
  type SandboxMode,
  type Unaccounted,
} from '../io/sandbox.js';

/** How a run's episodes are isolated, decided once from `sandbox:` and the machine. */
export interface Isolation {
  sandbox: Sandbox | null;
  /** For the progress line, the report and the commit: "bubblewrap 0.8.0", or "off (why)". */
  label: string;
  /** Said loudly when the sandbox is off. */
  warning?: string;
}

export async function isolationFor(mode: SandboxMode): Promise<Isolation> {
  const unconfined =
    'agents run with your user rights: they can read your files and tokens, start processes that outlive the episode and change what the grader sees';
  if (mode === 'off') {
    return { sandbox: null, label: 'off (sandbox: off)', warning: `the sandbox is off (sandbox: off): ${unconfined}` };
  }
  const probe = await probeSandbox();
  if ('sandbox' in probe) {
    // Setup shares the machine's network namespace (it installs; so does a grader with
    // grader.network): its abstract Unix sockets are open to it, with whatever they let a local
    // user do. The agent's sandbox has a network namespace of its own.
    const open = abstractSockets(readFileSafe('/proc/net/unix'));
    return {
      sandbox: probe.sandbox,
      label: probe.sandbox.name,
      ...(open.length > 0
        ? {
            warning:
              `setup commands can reach ${open.length} abstract Unix socket(s) of this machine (${open.slice(0, 3).join(', ')}), ` +
              'since they share the network (setup.network, grader.network): a desktop session (an X server, a session bus) may let them act outside the sandbox; ' +
              'run agents you do not trust where no desktop session runs (README, "Safety")',
          }
        : {}),
    };
  }
  if (mode === 'required') {
    throw new UserError(`sandbox: required, but ${probe.unavailable}: ${probe.fix}; nothing ran`);
  }
  return {
    sandbox: null,
    label: `off (${probe.unavailable})`,
    warning: `the sandbox is off: ${probe.unavailable}, so ${unconfined}. To confine them, ${probe.fix}; set sandbox: required to refuse to run without it`,
  };
}

/** A file's text, or '' (a /proc file that is not there on this kernel). */
function readFileSafe(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/**
 * The names of the abstract Unix sockets listening in /proc/net/unix's text (its last column,
 * "@name"; each name once).
 */
export function abstractSockets(procNetUnix: string): string[] {
  const names = procNetUnix
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    // Num RefCount Protocol Flags Type St Inode Path: flags 00010000 is __SO_ACCEPTCON (listening).
    .filter((f) => f.length >= 8 && f[7]?.startsWith('@') && (Number.parseInt(f[3] ?? '0', 16) & 0x10000) !== 0)
    .map((f) => f[7] as string);
  return [...new Set(names)];
}

/**
 * The spawner an agent session gets: its processes run confined (or, without a sandbox, tracked so
 * that what they detach is killed with them), never with a forge credential in their environment
 * whatever the adapter passed, and when one ends the folders the agent could write are cleared of
 * links, special files, names that are not UTF-8 and too-deep folders before the adapter reads them.
 */
export function sessionSpawner(
  sandbox: Sandbox | null,
  confinement: Confinement,
  /** The folders the agent writes, swept after each of its processes (the context within its limits). */
  writtenByAgent: { context: string; box: string } | null,
  removed?: Cleaned,
  /** The command line behind what it needs in the sandbox (the egress forwarder: worker/egress.ts). */
  wrap?: (file: string, args: string[]) => { file: string; args: string[] },
): Spawner {
  return async (given: string, givenArgs: string[], options: RunOptions) => {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(options.env ?? {}))
      if (!isForgeSecret(k) || CONTRACT_VARS.includes(k)) env[k] = v;
    const { file, args } = wrap ? wrap(given, givenArgs) : { file: given, args: givenArgs };
    const r = await runProcess(file, args, {
      ...options,
      env,
      ...(sandbox ? { confine: { sandbox, confinement } } : { track: true }),
    });
    const written = writtenByAgent
      ? ([
          [writtenByAgent.context, CONTEXT_LIMITS],
          [writtenByAgent.box, null],
        ] as const)
      : [];
    for (const [dir, limits] of written) {
      const c = await cleanAgentFolder(dir, limits);
      if (removed) addCleaned(removed, c);
    }
    return r;
  };
}

/**
 * The logs an episode leaves in its scratch folder (forkflush's, outside every sandbox): what the
 * agent printed, the grader's run (after the judge's setup), and setup's in the workspace.
 */
export function episodeLogs(scratchDir: string): { agent: string; grader: string; setup: string } {
  return {
    agent: join(scratchDir, 'agent.log'),
    grader: join(scratchDir, 'grader.log'),
    setup: join(scratchDir, 'setup.log'),
  };
}

/**
 * Runs `use` under a fresh account of the sandbox, released when it is done: which sandboxes
 * share one is the caller's choice. An episode's agent and the gradings it asks for share one
 * (they write the same workspace); setup gets its own, and so does the judge (its setup and its
 * grader), never an agent's. No other sandbox counts against an account's process limit.
 */
export async function withAccount<T>(
  sandbox: Sandbox | null,
  use: (account: SandboxAccount) => Promise<T>,
): Promise<T> {
  const account = sandbox?.account() ?? NO_ACCOUNT;
  try {
    return await use(account);
  } finally {
    account.release();
  }
}

/** Where one episode's files are. */
export interface EpisodePlaces {
  workspace: string;
  context: string;
  /** The agent's scratch: the prompt, the usage file, the grade client, its home and its /tmp. */
  box: string;
  /** The git objects the workspace's own .git borrows, and where they borrow from (read-only inside). */
  objects: string[];
  /** forkflush's own places (the run folder, the repository, the records): never visible inside. */
  private: string[];
}

/**
 * The agent's confinement: its workspace, context and box, and no network of its own (loopback
 * only): it reaches its model and the hosts it may through forkflush's proxy (worker/egress.ts),
 * whose folder the caller binds.
 */
export function agentConfinement(p: EpisodePlaces, config: Config, env: NodeJS.ProcessEnv): Unaccounted {
  const hidden = [...hiddenPlaces(env), ...p.private];
  return {
    writable: [p.workspace, p.context, p.box],
    shared: userFolders(config.sandbox.write, p.private, env),
    readable: [
      ...p.objects,
      ...exposedInside(hidden, p.private, env),
      ...userFolders(config.sandbox.read, p.private, env),
    ],
    hidden: [...hidden, ...credentialFiles(exposedInside(hidden, p.private, env))],
    tmp: join(p.box, 'tmp'),
    network: false,
  };
}

/**
 * What of the judge's checkout the grader may not change while it runs the agent's code: the
 * protected paths (`files` are the checkout's, relative). A folder a glob covers whole (`tests`,
 * `data/**`) is read-only, so nothing can be added to it either; any other protected file is
 * read-only, and the folders above it are pinned (bound onto themselves: a mount point cannot be
 * renamed, so no folder holding a protected file can be swapped for one the solver made).
 */
export function judgeFixedPaths(
  files: readonly string[],
  globs: readonly string[],
): { readOnly: string[]; pinned: string[] } {
  const covered = new Set<string>();
  for (const g of globs) {
    // `x/**` and `x/**/*` both cover everything under x.
    const folder = normalGlob(g).replace(/\/\*\*(\/\*)?$/, '');
    if (folder !== '' && !/[*?[]/.test(folder) && files.some((f) => f.startsWith(`${folder}/`))) covered.add(folder);
  }
  // A folder inside another read-only one is read-only already; bound again (or pinned, writable)
  // it would make its parent's files writable: of two binds of one path the later wins.
  const under = (f: string, folders: Iterable<string>) => [...folders].some((d) => f.startsWith(`${d}/`));
  const wholeFolders = new Set([...covered].filter((d) => !under(d, covered)));
  const single = files.filter((f) => !under(f, wholeFolders) && matchesAny(f, globs));
  if (single.length > PINNED_PROTECTED_MAX_FILES) {
    const tops = new Set([...wholeFolders, ...single].map((f) => f.split('/')[0] as string));
    return { readOnly: [...tops].sort(), pinned: [] };
  }
  const readOnly = new Set([...wholeFolders, ...single]);
  const pinned = new Set<string>();
  for (const f of readOnly) {
    const parts = f.split('/');
    for (let i = 1; i < parts.length; i++) pinned.add(parts.slice(0, i).join('/'));
  }
  // Never pin what is read-only itself (a protected file's folder may be a protected folder too).
  for (const p of [...pinned]) if (readOnly.has(p) || under(p, wholeFolders)) pinned.delete(p);
  return { readOnly: [...readOnly].sort(), pinned: [...pinned].sort() };
}

/**
 * A grader's confinement: `dir` (the workspace while the agent runs; a clean copy for the judge)
 * and a /tmp of its own; no network unless grader.network. `alsoHidden` are the agent's places
 * the judge must not see (its workspace, context and box); `fixed` what of `dir` it may not
 * change (the judge's protected paths: judgeFixedPaths, relative to `dir`).
 */
export function graderConfinement(
  dir: string,
  tmp: string,
  p: Pick<EpisodePlaces, 'objects' | 'private'>,
  config: Config,
  env: NodeJS.ProcessEnv,
  alsoHidden: string[] = [],
  fixed: { readOnly: string[]; pinned: string[] } = { readOnly: [], pinned: [] },
): Unaccounted {
  const hidden = [...hiddenPlaces(env), ...p.private, ...alsoHidden];
  const exposed = exposedInside(hidden, [...p.private, ...alsoHidden], env);
  return {
    writable: [dir, ...fixed.pinned.map((f) => join(dir, f))],
    readable: [
      ...p.objects,
      ...exposed,
      ...userFolders(config.sandbox.read, p.private, env),
      ...fixed.readOnly.map((f) => join(dir, f)),
    ],
    hidden: [...hidden, ...credentialFiles(exposed)],
    tmp,
    network: config.grader.network,
    grader: true,
  };
}

/**
 * Setup's confinement (setup: in the config): a grader's, in the folder it prepares (the
 * workspace before the agent, the judge's checkout before grading), with the network unless
 * setup.network is false. Setup runs the checkout's code (`npm ci` runs install scripts an agent
 * may have written), so it gets no more than the grader does: no forge credential, no record, no
 * other episode's folder, nothing of sandbox.write; only the network, which installing needs.
 */
export function setupConfinement(...args: SetupPlaces): Unaccounted {
  const config = args[3];
  return { ...graderConfinement(...args), network: config.setup.network };
}

/** graderConfinement's arguments without `fixed`: setup runs before anything of the folder is pinned. */
type SetupPlaces = Parameters<typeof graderConfinement> extends [...infer Places, fixed?: unknown] ? Places : never;

/**
 * Hidden from everything inside: the home folder (credentials, shell history, browser profiles),
 * the session's runtime folder (agent and keyring sockets), the system bus and systemd's sockets
 * (systemd-run starts commands outside any sandbox), container engines' sockets, and on an
 * Actions runner its temp folder (file commands, forkflush's records), its work root (other jobs'
 * checkouts) and the runner's own installation (its credentials).
 */
export function hiddenPlaces(env: NodeJS.ProcessEnv): string[] {
  const places = [
    env.HOME || homedir(),
    // The account's own home (its passwd entry), where ssh and gpg look whatever HOME says: a
    // script's `HOME=$(mktemp -d)`, `sudo -u` keeping the caller's HOME, a container's HOME=/.
    accountHome(),
    '/run/user',
    '/run/dbus',
    '/run/systemd',
    '/run/docker.sock',
    '/run/containerd',
    '/run/podman',
    '/run/snapd.socket',
  ];
  if (env.RUNNER_TEMP) places.push(env.RUNNER_TEMP);
  if (env.RUNNER_WORKSPACE) places.push(dirname(env.RUNNER_WORKSPACE));
  const runner = runnerInstallation();
  if (runner) places.push(runner);
  return places.filter((p) => p && p !== '/');
}

function accountHome(): string {
  try {
    return userInfo().homedir;
  } catch {
    // No passwd entry for this uid (a container's): HOME is all there is.
    return '';
  }
}

/** Visible whatever is hidden around them: the DNS resolver's files (/etc/resolv.conf points there). */
const ALWAYS_READABLE = ['/run/systemd/resolve'];

/**
 * What stays visible inside the hidden places: the toolchains on PATH (a Node, Python or Rust
 * installed under the home folder), forkflush's own Node, and the runner's tool cache. A folder
 * on PATH exposes its toolchain (the folder above a bin folder), but never a hidden place itself
 * (`~` or `~/bin` on PATH expose only that folder), and from ~/.local only bin and lib (not the
 * keyrings and histories in share and state). Never anything inside forkflush's private places.
 */
function exposedInside(hidden: string[], never: string[], env: NodeJS.ProcessEnv): string[] {
  const hiddenReal = hidden.map(realOrNull).filter((p): p is string => p !== null);
  const neverReal = never.map(realOrNull).filter((p): p is string => p !== null);
  const dirs = [...(env.PATH ?? '').split(delimiter), dirname(process.execPath), env.RUNNER_TOOL_CACHE ?? ''];
  const out = new Set<string>(ALWAYS_READABLE);
  for (const d of dirs) {
    const dir = d && isAbsolute(d) ? realOrNull(d) : null;
    if (!dir || neverReal.some((n) => isInside(dir, n))) continue;
    // Strictly inside a hidden place: a hidden place itself on PATH is not exposed.
    const inside = hiddenReal.filter((h) => dir !== h && isInside(dir, h));
    if (inside.length === 0) continue;
    const prefix = prefixOf(dir);
    if (prefix === dir || hiddenReal.some((h) => isInside(h, prefix))) out.add(dir);
    else if (basename(prefix) === '.local') for (const sub of ['bin', 'lib', 'lib64']) out.add(join(prefix, sub));
    else out.add(prefix);
  }
  return [...out];
}

/**
 * Credential-looking files at the top of exposed toolchains and in their etc folder
 * (~/.cargo/credentials.toml, a Node prefix's etc/npmrc).
 */
function credentialFiles(exposed: string[]): string[] {
  const out: string[] = [];
  const look = (dir: string) => {
    try {
      for (const name of readdirSync(dir)) {
        if (/credential|token|secret|auth|\.pem$|\.key$|netrc|npmrc|pypirc/i.test(name)) out.push(join(dir, name));
      }
    } catch {
      // Unreadable or gone: nothing to hide.
    }
  };
  for (const dir of exposed) {
    look(dir);
    look(join(dir, 'etc'));
  }
  return out;
}

/**
 * The install folder of the Actions runner running this job, found from the process tree
 * (Runner.Worker starts the step's node): a self-hosted runner keeps its credentials there.
 */
function runnerInstallation(): string | null {
  if (process.platform !== 'linux' || !process.env.GITHUB_ACTIONS) return null;
  let pid = process.ppid;
  for (let i = 0; i < 4 && pid > 1; i++) {
    const exe = realOrNull(`/proc/${pid}/exe`);
    if (exe && /\/Runner\.(Worker|Listener)$/.test(exe)) return dirname(dirname(exe));
    const parent = parentOf(pid);
    if (parent === null) return null;
    pid = parent;
  }
  return null;
}

function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/**
 * HOME and TMPDIR in a grader's own temporary folder (made with a `home` inside): inside the
 * sandbox that folder is /tmp.
 */
export function privateTmp(tmp: string, sandboxed: boolean): { HOME: string; TMPDIR: string } {
  const inside = sandboxed ? '/tmp' : tmp;
  return { HOME: join(inside, 'home'), TMPDIR: inside };
}

/**
 * The folders of sandbox.read or sandbox.write a sandbox may bind: none that is, by its real path,
 * one of forkflush's own places or inside one (a bind comes after the hiding and would show it);
 * inside a place that holds others of them, the repository, a folder may be shown (its data), not
 * its .git or the runs folder. The pre-flight refuses such a config; this holds each time a sandbox is
 * made, after links that appeared since (a sandbox.read path an agent made a link in a folder it
 * may write).
 */
function userFolders(paths: readonly string[], forkflushOwn: readonly string[], env: NodeJS.ProcessEnv): string[] {
  // On a runner its temp folder too: file commands, forkflush's records.
  const own = [...forkflushOwn, ...(env.RUNNER_TEMP ? [env.RUNNER_TEMP] : [])];
  const real = (path: string) => {
    try {
      return realpathSync(path);
    } catch {
      return path;
    }
  };
  const ownReal = own.map(real);
  const innermost = ownReal.filter((o) => !ownReal.some((x) => x !== o && isInside(x, o)));
  return paths
    .map(expandHome)
    .filter((path) => !ownReal.includes(real(path)) && !innermost.some((o) => isInside(real(path), o)));
}

/** `~/x` in sandbox.read and sandbox.write means the user's home folder. */
export function expandHome(path: string): string {
  return path === '~' || path.startsWith('~/') ? join(process.env.HOME || homedir(), path.slice(1)) : path;
}
