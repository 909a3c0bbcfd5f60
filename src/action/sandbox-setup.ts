// Making the sandbox work on a runner, before the episode starts. A GitHub-hosted Ubuntu runner
// may lack bubblewrap, and Ubuntu 24.04's AppArmor refuses unprivileged user namespaces: the job
// user has passwordless sudo, so the Action installs bubblewrap and lifts that restriction. Then
// it checks that sudo gives nothing inside the sandbox (no_new_privs): whatever the job user may
// do, the agent may not.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { SANDBOX_SETUP_TIMEOUT_MS } from '../core/bounds.js';
import { withoutRelativePaths } from '../io/executables.js';
import { probeSandbox, reprobeSandbox, type SandboxMode } from '../io/sandbox.js';
import { withFilterAtFd3 } from '../io/seccomp.js';
import { type Isolation, isolationFor } from '../worker/boundary.js';

export interface Machine {
  platform: NodeJS.Platform;
  isRoot: boolean;
  /** Runs a command (with bytes for its fd 3, a wrapped command's filter); its exit code (127 when it cannot start). */
  run(file: string, args: string[], fd3?: Buffer): Promise<number>;
  /** A file's text, or null. */
  read(path: string): string | null;
  probe(): Promise<boolean>;
}

const APPARMOR_USERNS = '/proc/sys/kernel/apparmor_restrict_unprivileged_userns';
const USERNS_CLONE = '/proc/sys/kernel/unprivileged_userns_clone';

/** The commands that would let bubblewrap work here, in order; empty when nothing can be done. */
export async function repairSteps(m: Machine): Promise<string[][]> {
  if (m.platform !== 'linux') return [];
  const sudo = m.isRoot ? [] : (await m.run('sudo', ['-n', 'true'])) === 0 ? ['sudo', '-n'] : null;
  if (sudo === null) return [];
  const steps: string[][] = [];
  if ((await m.run('bwrap', ['--version'])) !== 0) {
    steps.push([...sudo, 'apt-get', 'update', '-q']);
    steps.push([...sudo, 'apt-get', 'install', '-y', '-q', '--no-install-recommends', 'bubblewrap']);
  }
  if (m.read(APPARMOR_USERNS)?.trim() === '1') {
    steps.push([...sudo, 'sysctl', '-q', '-w', 'kernel.apparmor_restrict_unprivileged_userns=0']);
  }
  if (m.read(USERNS_CLONE)?.trim() === '0')
    steps.push([...sudo, 'sysctl', '-q', '-w', 'kernel.unprivileged_userns_clone=1']);
  return steps;
}

/**
 * The run's isolation on this runner: the sandbox, made to work with the runner's sudo where it
 * does not yet, and checked to refuse sudo inside. Throws when `required` cannot be met.
 */
export async function prepareIsolation(
  mode: SandboxMode,
  log: (line: string) => void,
  m = realMachine(),
): Promise<Isolation> {
  if (mode !== 'off' && !(await m.probe())) {
    for (const step of await repairSteps(m)) {
      log(`sandbox: ${step.join(' ')}`);
      const code = await m.run(step[0] as string, step.slice(1));
      if (code !== 0) log(`sandbox: that failed (exit ${code})`);
    }
    await reprobeSandbox();
  }
  const isolation = await isolationFor(mode);
  if (isolation.sandbox && !m.isRoot && (await m.run('sudo', ['-n', 'true'])) === 0) {
    const account = isolation.sandbox.account();
    const inside = isolation.sandbox.wrap(
      { writable: [], readable: [], hidden: [], tmp: '/tmp', network: false, account },
      '/',
      'sudo',
      ['-n', 'true'],
    );
    const code = await m.run(inside.file, inside.args, inside.fd3).finally(account.release);
    if (code === 0) {
      throw new Error('sudo works inside the sandbox, so the agent could act as root: refusing to run the episode');
    }
    log('sandbox: sudo is refused inside it (no_new_privs)');
  }
  return isolation;
}

function realMachine(): Machine {
  return {
    platform: process.platform,
    isRoot: process.getuid?.() === 0,
    run: (file, args, fd3) =>
      new Promise((resolve) => {
        const child = withFilterAtFd3(fd3, (extra) =>
          spawn(file, args, {
            env: withoutRelativePaths(process.env),
            stdio: ['ignore', 'ignore', 'ignore', ...extra],
            timeout: SANDBOX_SETUP_TIMEOUT_MS,
          }),
        );
        child.on('error', () => resolve(127));
        child.on('close', (code) => resolve(code ?? 1));
      }),
    read: (path) => (existsSync(path) ? readFileSync(path, 'utf8') : null),
    probe: async () => 'sandbox' in (await probeSandbox()),
  };
}
