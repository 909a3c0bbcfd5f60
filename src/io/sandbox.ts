// The one door to confinement: a command and everything it starts run in a bubblewrap sandbox
// (Linux) with their own PID namespace, a fresh /proc, no capabilities, no_new_privs, a session
// of their own, and a filesystem that is read-only but for the paths named. When the command
// exits, the kernel kills whatever it left in its PID namespace; when forkflush dies, bwrap dies
// with it (--die-with-parent) and takes the namespace along. Each sandbox runs under an account
// of its own (io/accounts.ts), whose process limit no other sandbox counts against.

import { spawn } from 'node:child_process';
import { lstatSync, realpathSync } from 'node:fs';
import { release } from 'node:os';
import { dirname, sep } from 'node:path';
import { countsPerNamespace, machineProcesses, processLimit, rangeConflict, readIdFiles, UidPool } from './accounts.js';
import { withoutRelativePaths } from './executables.js';
import { type FilterProfile, seccompFilter, withFilterAtFd3 } from './seccomp.js';

export type SandboxMode = 'auto' | 'required' | 'off';

/** What one confined command may touch. Paths that do not exist are left out (hidden, readable). */
export interface Confinement {
  /** The command's own folders, bound read-write at the same path (they must exist). */
  writable: string[];
  /** Folders the user shares with every episode (sandbox.write): bound read-write, never handed over. */
  shared?: string[];
  /** Bound read-only at the same path: re-exposes paths inside hidden ones. */
  readable: string[];
  /** Replaced by an empty folder, or an empty file. */
  hidden: string[];
  /** The private temporary folder, bound at /tmp. */
  tmp: string;
  /** false: a network namespace of its own, with only loopback. */
  network: boolean;
  /**
   * A grader's (or setup's): it runs the agent's code beside forkflush's grader, so it gets the
   * grader's syscall filter (io/seccomp.ts; others get the agent's) and a read-only /proc.
   */
  grader?: boolean;
  /**
   * Whose limits it counts against (Sandbox.account): an episode's agent and the gradings it asks
   * for share one; setup and the judge get their own.
   */
  account: SandboxAccount;
}

/** A confinement before its account is chosen (worker/boundary.ts makes these). */
export type Unaccounted = Omit<Confinement, 'account'>;

/** The account of a command that runs without a sandbox: nothing to change, nothing to release. */
export const NO_ACCOUNT: SandboxAccount = { user: null, release: () => {} };

/** How far apart the sandboxes' limits are kept. */
export type Accounts =
  /** Under root: a uid of its own per account. */
  | 'uid'
  /** An ordinary user: a user namespace of its own per sandbox, counted apart by the kernel. */
  | 'user-namespace'
  /** One limit for every sandbox (the name says why). */
  | 'shared';

/** An account a sandbox runs under: lease one per sandbox (Sandbox.account), release it when its commands are done. */
export interface SandboxAccount {
  /**
   * The user its commands run as when forkflush runs as root (a uid of its own, or nobody): root,
   * even without capabilities, owns every root-owned file (/etc/shadow, a host key). null:
   * forkflush's own user, in a user namespace.
   */
  readonly user: { uid: number; gid: number } | null;
  /** Ends the lease: a later sandbox may get its uid. Its commands must have ended. */
  release(): void;
}

export interface Sandbox {
  /** e.g. "bubblewrap 0.8.0". */
  readonly name: string;
  readonly accounts: Accounts;
  /** The most processes and threads of one account (RLIMIT_NPROC); null when prlimit is missing. */
  readonly processLimit: number | null;
  /** A fresh account, shared with no sandbox running now. */
  account(): SandboxAccount;
  /** The command line that runs `file args` in `cwd` under `c`, and what to write to its fd 3. */
  wrap(c: Confinement, cwd: string, file: string, args: string[]): Wrapped;
  /** Gives the confinement's own folders to its account's user, so it can write them (no-op without one, or again). */
  handOver(c: Confinement): Promise<void>;
}

/** A confined command line. */
export interface Wrapped {
  file: string;
  args: string[];
  /** Bytes to write to the command's fd 3, then close it: the syscall filter bwrap reads (--seccomp 3). */
  fd3?: Buffer;
}

/** Who every sandbox runs as under root where no uid of its own can be had: nobody. */
const NOBODY = { uid: 65534, gid: 65534 };

export type SandboxProbe = { sandbox: Sandbox } | { unavailable: string; fix: string };

const BWRAP = 'bwrap';
let probed: Promise<SandboxProbe> | undefined;

/** Whether bubblewrap works here: found, and able to make namespaces. Probed once per process. */
export function probeSandbox(): Promise<SandboxProbe> {
  probed ??= probe();
  return probed;
}

/** Probes again (after the Action changed the machine, say). */
export function reprobeSandbox(): Promise<SandboxProbe> {
  probed = undefined;
  return probeSandbox();
}

async function probe(): Promise<SandboxProbe> {
  if (process.platform !== 'linux') {
    return {
      unavailable: `${process.platform === 'darwin' ? 'macOS' : process.platform} has no bubblewrap`,
      fix: 'forkflush sandboxes episodes on Linux only; run it in a Linux VM or container to confine agents',
    };
  }
  const version = await exec(BWRAP, ['--version']);
  if (version.code !== 0) {
    return {
      unavailable: 'bubblewrap (bwrap) is not installed',
      fix: 'install it: sudo apt-get install bubblewrap (Debian, Ubuntu), sudo dnf install bubblewrap (Fedora)',
    };
  }
  const bwrapName = version.stdout.trim() || 'bubblewrap';
  // A trial run with the namespaces a real run uses: AppArmor on Ubuntu 24.04, or a container
  // without user namespaces, lets `bwrap --version` work and then refuses to sandbox. Under root,
  // bwrap sets the sandbox up as root and setpriv then runs the command as a uid of its own (or
  // nobody); without setpriv the command runs as root without capabilities, and the name says so.
  const root = process.getuid?.() === 0;
  const limits = machineProcesses();
  const nproc =
    (await exec('prlimit', ['--version'])).code === 0
      ? processLimit({ ...limits, ...(root ? { ownLimit: null } : {}) })
      : null;
  const modes = root ? await rootModes() : [{ as: 'user' as const, shared: userShared() }];
  // A grader's sandbox, the strictest (its syscall filter and read-only /proc).
  const trial = async (s: Sandbox) => {
    const account = s.account();
    try {
      const t = s.wrap(
        { writable: [], readable: [], hidden: [], tmp: '/tmp', network: false, grader: true, account },
        '/',
        'true',
        [],
      );
      return await exec(t.file, t.args, t.fd3);
    } finally {
      account.release();
    }
  };
  // The filter where bwrap takes it; where it does not (an odd kernel or container), the sandbox
  // without it, said in its name, rather than no sandbox at all.
  const [agent, grader] = [seccompFilter('agent'), seccompFilter('grader')];
  const known = agent && grader ? { agent, grader } : null;
  const tries: { filter: Filters | null; name: string }[] = [
    ...(known ? [{ filter: known, name: bwrapName }] : []),
    { filter: null, name: `${bwrapName}, no syscall filter (${known ? 'bwrap refused it' : process.arch})` },
  ];
  let sandbox: Sandbox | null = null;
  let run = { code: 1, stdout: '', stderr: '' };
  for (const t of tries) {
    for (const mode of modes) {
      const limit = nproc ? (mode.shared ? `, one process limit for every sandbox (${mode.shared})` : '') : '';
      sandbox = bubblewrap(
        `${t.name}${nproc ? limit : ', no process limit (prlimit is missing)'}`,
        mode.as,
        nproc,
        t.filter,
      );
      run = await trial(sandbox);
      if (run.code === 0) break;
    }
    if (run.code !== 0 && root) {
      const asRoot = bubblewrap(
        `${t.name}, as root without capabilities (no setpriv to run as nobody)`,
        'root',
        null,
        t.filter,
      );
      const second = await trial(asRoot);
      if (second.code === 0) {
        sandbox = asRoot;
        run = second;
      }
    }
    if (run.code === 0) break;
  }
  if (run.code !== 0 || !sandbox) {
    return {
      unavailable: `${bwrapName} cannot make namespaces here (${run.stderr.trim().split('\n').at(-1) || `exit ${run.code}`})`,
      fix:
        'allow unprivileged user namespaces (Ubuntu 24.04: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0), ' +
        'or run forkflush as root, or in a container started with --privileged',
    };
  }
  return { sandbox };
}

type As = 'user' | 'uid' | 'nobody' | 'root';

/** Under root: a uid per sandbox where the range is free (then nobody, if those uids fail), else nobody. */
async function rootModes(): Promise<{ as: As; shared: string | null }[]> {
  // NSS may know users /etc/passwd does not (LDAP, SSSD): getent lists them too.
  const passwd = (await exec('getent', ['passwd'])).stdout;
  const group = (await exec('getent', ['group'])).stdout;
  const conflict = rangeConflict(readIdFiles({ passwd, group }));
  return conflict
    ? [{ as: 'nobody', shared: `as nobody: ${conflict}` }]
    : [
        { as: 'uid', shared: null },
        { as: 'nobody', shared: 'as nobody: setpriv refused the uids of its range' },
      ];
}

/** Why an ordinary user's sandboxes share one limit here, or null. */
function userShared(): string | null {
  const kernel = release();
  return countsPerNamespace(kernel)
    ? null
    : `Linux ${kernel} counts a user's processes in every namespace together; 5.14 and later count each sandbox's apart`;
}

/** Each profile's syscall filter (io/seccomp.ts). */
type Filters = Record<FilterProfile, Buffer>;

// `as` user: forkflush's own unprivileged user, a user namespace per sandbox; uid: forkflush is root, each account
// a uid of its own (setpriv, after bwrap set the mounts up as root); nobody: root, every account as nobody; root: as
// root without capabilities, the last resort.
function bubblewrap(name: string, as: As, nproc: number | null, filters: Filters | null): Sandbox {
  // bwrap is started by a shell that first makes it, and all it starts, the OOM killer's first
  // choice (nothing bounds a sandbox's memory but the machine: when it runs out, the largest
  // sandboxed process goes, never forkflush, which would take every episode with it), and under
  // root sets umask 002: each account is a uid of its own, all of one group, and files made in a
  // folder every episode shares (sandbox.write) stay writable by the others. One shell, outside
  // the sandbox (a grader's /proc inside is read-only).
  const prelude = `echo 1000 2>/dev/null > /proc/self/oom_score_adj; ${as === 'uid' ? 'umask 002; ' : ''}exec "$0" "$@"`;
  const pool = as === 'uid' ? new UidPool(process.pid) : null;
  const free = () => {};
  return {
    name,
    accounts: as === 'uid' ? 'uid' : as === 'user' && userShared() === null ? 'user-namespace' : 'shared',
    processLimit: nproc,
    account() {
      if (pool) {
        const lease = pool.lease();
        return { user: { uid: lease.uid, gid: lease.gid }, release: lease.release };
      }
      return { user: as === 'nobody' ? NOBODY : null, release: free };
    },
    async handOver(c) {
      const user = c.account.user;
      if (!user || c.writable.length === 0) return;
      // Only what is not the user's yet: handed over again, no change time moves (worker/judge.ts).
      const [uid, gid] = [String(user.uid), String(user.gid)];
      const chown = ['-exec', 'chown', '--no-dereference', `${uid}:${gid}`, '{}', '+'];
      await exec('find', [...c.writable, c.tmp, '(', '!', '-user', uid, '-o', '!', '-group', gid, ')', ...chown]);
    },
    wrap(c, cwd, file, args) {
      const mounts = mountArgs(c);
      // A grader's sandbox runs the agent's code beside the grader, as the same user in the same
      // PID namespace: no reaching into the grader (io/seccomp.ts), and no writing its memory
      // through /proc. An agent's sandbox holds nothing of forkflush's: its debuggers work there.
      // Neither reaches the kernel's keyrings, which no namespace separates.
      const strict = c.grader === true;
      const seccomp = filters ? filters[strict ? 'grader' : 'agent'] : null;
      return {
        file: '/bin/sh',
        args: [
          '-c',
          prelude,
          BWRAP,
          '--die-with-parent',
          // A session of its own: no TIOCSTI into forkflush's terminal.
          '--new-session',
          ...(seccomp ? ['--seccomp', '3'] : []),
          '--unshare-pid',
          '--unshare-ipc',
          '--unshare-uts',
          '--unshare-cgroup-try',
          ...(c.network ? [] : ['--unshare-net']),
          // Root keeps its capabilities in bwrap unless told (setpriv needs them to change user,
          // and loses them all doing it); an unprivileged user has only the user namespace's,
          // dropped too. no_new_privs is always on: sudo and setuid programs give nothing.
          ...(as === 'uid' || as === 'nobody' ? [] : ['--cap-drop', 'ALL']),
          ...(as === 'user' ? ['--unshare-user'] : []),
          '--ro-bind',
          '/',
          '/',
          '--dev',
          '/dev',
          '--proc',
          '/proc',
          // Read-only in a grader's: /proc/<pid>/mem of the grader is not the graded code's to
          // write. /dev/stdout and /proc/self/fd/N still open: they lead to other mounts.
          ...(strict ? ['--remount-ro', '/proc'] : []),
          // The kernel's settings are the host's: never writable from inside (a core_pattern
          // pointing into the workspace would run agent code outside every namespace).
          '--ro-bind-try',
          '/proc/sys',
          '/proc/sys',
          '--ro-bind-try',
          '/proc/sysrq-trigger',
          '/proc/sysrq-trigger',
          ...mounts,
          '--chdir',
          cwd,
          '--',
          ...dropTo(as, c.account, nproc),
          file,
          ...args,
        ],
        ...(seccomp ? { fd3: seccomp } : {}),
      };
    },
  };
}

/** What runs between bwrap and the command: the change of user (under root) and the process limit. */
function dropTo(as: As, account: SandboxAccount, nproc: number | null): string[] {
  const user = account.user;
  if ((as === 'uid' || as === 'nobody') && !user) throw new Error('a sandbox account without its user');
  return [
    ...(user && (as === 'uid' || as === 'nobody')
      ? [
          'setpriv',
          `--reuid=${user.uid}`,
          `--regid=${user.gid}`,
          '--clear-groups',
          '--inh-caps=-all',
          '--bounding-set=-all',
          '--',
        ]
      : []),
    // A fork bomb must not take the machine's process ids: RLIMIT_NPROC counts the processes of
    // the account's user (its own uid under root; per user namespace as an ordinary user).
    ...(nproc ? ['prlimit', `--nproc=${nproc}:${nproc}`, '--'] : []),
  ];
}

type Mount = { path: string; args: string[] };

/**
 * The mounts, parents before children: a path is hidden by an empty tmpfs (a file: by /dev/null)
 * and paths inside it can then be bound again. Sockets are files too (a Docker socket, say).
 */
export function mountArgs(c: Confinement): string[] {
  const mounts: Mount[] = [];
  const seen = new Set<string>();
  const add = (path: string, args: string[]) => {
    if (!seen.has(path)) mounts.push({ path, args });
    seen.add(path);
  };
  add('/tmp', ['--bind', real(c.tmp) ?? c.tmp, '/tmp']);
  const tmp = real('/tmp') ?? '/tmp';
  const shown = [...c.readable, ...(c.shared ?? [])].map(real).filter((p): p is string => p !== null);
  for (const p of c.hidden) {
    const path = real(p);
    // Under /tmp it is hidden already (/tmp is the private one), unless a bind from the real /tmp holds it.
    const reshown = path !== null && shown.some((b) => b !== path && isInside(path, b));
    if (!path || path === '/' || (isInside(path, tmp) && !reshown)) continue;
    add(path, isDirectory(path) ? ['--tmpfs', path] : ['--ro-bind', '/dev/null', path]);
  }
  const binds: string[] = [];
  for (const p of c.readable) {
    const path = real(p);
    if (path) add(`${path}\0ro`, ['--ro-bind', path, path]);
    if (path) binds.push(path);
  }
  for (const p of [...c.writable, ...(c.shared ?? [])]) {
    const path = real(p);
    if (!path) throw new Error(`the sandbox cannot bind ${p}: it does not exist`);
    add(`${path}\0rw`, ['--bind', path, path]);
    binds.push(path);
  }
  // A bind inside an emptied place (a hidden folder, /tmp) needs the folders above it made there;
  // bwrap would copy their modes from the real ones (a 0700 temp folder, say), which the
  // command, as nobody, could not pass through. They are made traversable, and nothing more.
  const fresh = [tmp, ...mounts.filter((m) => m.args[0] === '--tmpfs').map((m) => m.path)];
  for (const path of binds) {
    const root = fresh.filter((f) => path !== f && isInside(path, f)).sort((a, b) => b.length - a.length)[0];
    if (!root) continue;
    for (let dir = dirname(path); dir !== root && isInside(dir, root); dir = dirname(dir)) {
      if (binds.some((b) => b !== path && isInside(dir, b))) break;
      add(`${dir}\0dir`, ['--perms', '0755', '--dir', dir]);
    }
  }
  // Stable sort by depth: a parent's mount comes first; at equal depth, hiding before binding.
  const depth = (m: Mount) => m.path.split('\0')[0]?.split(sep).length ?? 0;
  return mounts
    .map((m, i) => ({ m, i }))
    .sort((a, b) => depth(a.m) - depth(b.m) || a.i - b.i)
    .flatMap(({ m }) => m.args);
}

function real(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Whether `path` is `root` or inside it (both real paths). */
export function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** The folder above a bin folder (a toolchain's prefix), or the folder itself. */
export function prefixOf(dir: string): string {
  const base = dir.split(sep).at(-1);
  return base === 'bin' || base === 'shims' ? dirname(dir) : dir;
}

function exec(file: string, args: string[], fd3?: Buffer): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = withFilterAtFd3(fd3, (extra) =>
      spawn(file, args, {
        env: withoutRelativePaths(process.env),
        timeout: 10_000,
        killSignal: 'SIGKILL',
        stdio: ['ignore', 'pipe', 'pipe', ...extra],
      }),
    );
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (e) => resolve({ code: 127, stdout, stderr: e.message }));
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}
