// What the Action does with the runner's sudo when the sandbox does not work yet: the commands it
// would run, on machines described by what they answer.
import { describe, expect, it } from 'vitest';
import { type Machine, prepareIsolation, repairSteps } from '../../src/action/sandbox-setup.js';
import { probeSandbox } from '../../src/io/sandbox.js';

const hasSandbox = 'sandbox' in (await probeSandbox());
if (!hasSandbox) console.warn('\n*** sandbox-setup: no working bubblewrap here: the sudo checks are SKIPPED ***\n');

function machine(o: {
  sudo?: boolean;
  bwrap?: boolean;
  apparmor?: string;
  clone?: string;
  root?: boolean;
  platform?: NodeJS.Platform;
}): Machine {
  return {
    platform: o.platform ?? 'linux',
    isRoot: o.root ?? false,
    run: async (file) => (file === 'sudo' ? (o.sudo ? 0 : 1) : file === 'bwrap' ? (o.bwrap === false ? 127 : 0) : 0),
    read: (path) =>
      path.endsWith('apparmor_restrict_unprivileged_userns')
        ? (o.apparmor ?? null)
        : path.endsWith('unprivileged_userns_clone')
          ? (o.clone ?? null)
          : null,
    probe: async () => false,
  };
}

describe('making the sandbox work on a runner', () => {
  it('an Ubuntu 24.04 runner (AppArmor restricts user namespaces) lifts the restriction with sudo', async () => {
    expect(await repairSteps(machine({ sudo: true, apparmor: '1\n' }))).toEqual([
      ['sudo', '-n', 'sysctl', '-q', '-w', 'kernel.apparmor_restrict_unprivileged_userns=0'],
    ]);
  });

  it('a runner without bubblewrap installs it first', async () => {
    expect(await repairSteps(machine({ sudo: true, bwrap: false, apparmor: '1' }))).toEqual([
      ['sudo', '-n', 'apt-get', 'update', '-q'],
      ['sudo', '-n', 'apt-get', 'install', '-y', '-q', '--no-install-recommends', 'bubblewrap'],
      ['sudo', '-n', 'sysctl', '-q', '-w', 'kernel.apparmor_restrict_unprivileged_userns=0'],
    ]);
  });

  it('an older Debian kernel with user namespaces off turns them on; root needs no sudo', async () => {
    expect(await repairSteps(machine({ root: true, clone: '0' }))).toEqual([
      ['sysctl', '-q', '-w', 'kernel.unprivileged_userns_clone=1'],
    ]);
  });

  it('without sudo, or off Linux, nothing is tried', async () => {
    expect(await repairSteps(machine({ sudo: false, bwrap: false, apparmor: '1' }))).toEqual([]);
    expect(await repairSteps(machine({ sudo: true, platform: 'darwin' }))).toEqual([]);
  });
});

describe.skipIf(!hasSandbox)('sudo inside the sandbox', () => {
  const sudoer = (insideAnswers: number): Machine => ({
    ...machine({ sudo: true }),
    probe: async () => true,
    // Outside the sandbox the job user has sudo; `sh -c PRELUDE bwrap ... sudo -n true` answers `insideAnswers`.
    run: async (file, args) => (file === 'bwrap' || args.includes('bwrap') ? insideAnswers : 0),
  });

  it('is checked to give nothing, and the job log says so', async () => {
    const log: string[] = [];
    const isolation = await prepareIsolation('auto', (l) => log.push(l), sudoer(1));
    expect(isolation.sandbox).not.toBeNull();
    expect(log).toContain('sandbox: sudo is refused inside it (no_new_privs)');
  });

  it('stops the job before the agent starts if it works', async () => {
    await expect(prepareIsolation('auto', () => {}, sudoer(0))).rejects.toThrow(
      'sudo works inside the sandbox, so the agent could act as root: refusing to run the episode',
    );
  });
});
