// Where bubblewrap is installed (CI installs it) the sandbox must work: every sandboxed test would
// otherwise run unconfined without a word, as `sandbox: auto` allows. And what keeps sandboxes'
// process limits apart holds on this kernel: two accounts never count against each other's
// RLIMIT_NPROC, one account's sandboxes do (the control), and as an ordinary user each sandbox's
// user namespace counts apart (Linux 5.14 and later), all of them against the user's own limit.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { countsPerNamespace, UID_RANGE } from '../../src/io/accounts.js';
import { runProcess } from '../../src/io/process.js';
import { probeSandbox, type Sandbox, type SandboxAccount } from '../../src/io/sandbox.js';
import { agentConfinement } from '../../src/worker/boundary.js';

function installed(): boolean {
  try {
    execFileSync('bwrap', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const bwrap = installed();
if (!bwrap)
  console.warn('\n*** bubblewrap is not installed: the sandbox tests are SKIPPED (apt-get install bubblewrap) ***\n');
const isRoot = process.getuid?.() === 0;

/**
 * Holds or tries to make `n` threads (tasks, as RLIMIT_NPROC counts them) and prints how many it
 * made: `hold` makes them, says so in DIR/up, and keeps them until DIR/done; `try` waits for
 * DIR/up, makes what it can, and writes DIR/done.
 */
const THREADS = `
import os, sys, threading, time
role, n, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
threading.stack_size(64 * 1024)
ev = threading.Event()
if role == 'try':
    while not os.path.exists(d + '/up'): time.sleep(0.05)
made = 0
for _ in range(n):
    try:
        threading.Thread(target=ev.wait, daemon=True).start()
        made += 1
    except RuntimeError:
        break
if role == 'hold':
    open(d + '/up', 'w').close()
    end = time.time() + 60
    while not os.path.exists(d + '/done') and time.time() < end: time.sleep(0.05)
else:
    open(d + '/done', 'w').close()
print(made)
`;

/** A folder both sandboxes share (world-writable), outside /tmp (each sandbox has its own /tmp). */
function meetingPlace(): string {
  const dir = mkdtempSync('/var/tmp/forkflush-nproc-');
  chmodSync(dir, 0o777);
  made.push(dir);
  return dir;
}
const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

/** `python3 THREADS role n dir` in the sandbox under `account`, its limit lowered to 40 inside. */
async function threadsIn(s: Sandbox, account: SandboxAccount, role: 'hold' | 'try', dir: string): Promise<number> {
  const r = await runProcess('prlimit', ['--nproc=40:40', '--', 'python3', '-c', THREADS, role, '30', dir], {
    cwd: '/',
    timeoutMs: 90_000,
    confine: {
      sandbox: s,
      confinement: { writable: [], shared: [dir], readable: [], hidden: [], tmp: '/tmp', network: false, account },
    },
  });
  if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}: ${r.stderr}`);
  return Number(r.stdout.trim());
}

/** The same, as raw bwrap run by an ordinary user (uid 65534), the user's own limit `outer`. */
function threadsAsUser(role: 'hold' | 'try', dir: string, outer: number): Promise<number> {
  const args = [
    `--nproc=${outer}:${outer}`,
    'setpriv',
    '--reuid=65534',
    '--regid=65534',
    '--clear-groups',
    'bwrap',
    '--die-with-parent',
    '--unshare-user',
    '--unshare-pid',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--bind',
    dir,
    dir,
    '--',
    'prlimit',
    '--nproc=40:40',
    '--',
    'python3',
    '-c',
    THREADS,
    role,
    '30',
    dir,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn('prlimit', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('close', (code) => (code === 0 ? resolve(Number(out.trim())) : reject(new Error(`exit ${code}: ${err}`))));
  });
}

/** test/fixtures/sandbox/probe-limit.ts, bundled where an ordinary user can run it. */
async function probeLimitScript(): Promise<string> {
  const dir = meetingPlace();
  chmodSync(dir, 0o755);
  const script = join(dir, 'probe-limit.mjs');
  await build({
    entryPoints: [join(import.meta.dirname, '..', 'fixtures', 'sandbox', 'probe-limit.ts')],
    outfile: script,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'warning',
  });
  return script;
}

/** The fixture run with soft and hard process limits of `limit`, as this user or (root only) as nobody. */
function probeUnderHardLimit(script: string, limit: number, asNobody: boolean): Record<string, unknown> {
  const as = asNobody ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] : [];
  const r = spawnSync('prlimit', [`--nproc=${limit}:${limit}`, '--', ...as, process.execPath, script], {
    encoding: 'utf8',
    timeout: 60_000,
    cwd: '/',
    env: { PATH: process.env.PATH, HOME: '/' },
  });
  const last = r.stdout.trim().split('\n').at(-1) ?? '';
  if (r.status !== 0 || !last.startsWith('{')) throw new Error(`exit ${r.status}: ${r.stdout}${r.stderr}`);
  return JSON.parse(last) as Record<string, unknown>;
}

describe.skipIf(!bwrap)('the sandbox on this machine', () => {
  it(`under a hard process limit of 1000 (below the 8192 a sandbox may get) ${isRoot ? 'as root' : 'as this user'}: the sandbox works, its limit within it`, async () => {
    const script = await probeLimitScript();
    const o = probeUnderHardLimit(script, 1000, false);
    // Root is not held to its own soft limit, only to the hard one; an ordinary user's sandboxes
    // all count against its own limit too, so each gets a quarter.
    const expected = isRoot ? 1000 : 250;
    expect(o, JSON.stringify(o)).toMatchObject({
      processLimit: expected,
      exitCode: 0,
      inside: `${expected} ${expected}`,
    });
    if (isRoot) {
      const user = probeUnderHardLimit(script, 1000, true);
      expect(user, JSON.stringify(user)).toMatchObject({ processLimit: 250, exitCode: 0, inside: '250 250' });
    }
  }, 60_000);

  it('works where bubblewrap is installed, and under root runs each account as a uid of its own', async () => {
    const probe = await probeSandbox();
    expect(probe).toHaveProperty('sandbox');
    if (!('sandbox' in probe) || !isRoot) return;
    const s = probe.sandbox;
    expect(s.accounts).toBe('uid');
    const [a, b] = [s.account(), s.account()];
    expect(a.user?.uid).toBeGreaterThanOrEqual(UID_RANGE.first);
    expect(b.user?.uid).not.toBe(a.user?.uid);
    expect(a.user?.gid).toBe(UID_RANGE.group);
    a.release();
    b.release();
  });

  it(`${isRoot ? 'under root' : 'as this ordinary user'}: a sandbox of another account makes its 30 threads while one holds 30 of a limit of 40`, async () => {
    const probe = await probeSandbox();
    if (!('sandbox' in probe)) throw new Error('no sandbox');
    const s = probe.sandbox;
    // Under root a uid each; as an ordinary user a user namespace each, counted apart since 5.14.
    expect(s.accounts).toBe(isRoot ? 'uid' : countsPerNamespace(release()) ? 'user-namespace' : 'shared');
    const [a, b] = [s.account(), s.account()];
    try {
      const apart = meetingPlace();
      const [held, other] = await Promise.all([threadsIn(s, a, 'hold', apart), threadsIn(s, b, 'try', apart)]);
      expect(held).toBe(30);
      if (s.accounts === 'shared') expect(other).toBeLessThan(10);
      else expect(other).toBe(30);
    } finally {
      a.release();
      b.release();
    }
  }, 120_000);

  it.skipIf(!isRoot)(
    'under root: a sandbox of the same account cannot (the control: what every sandbox shared as nobody)',
    async () => {
      const probe = await probeSandbox();
      if (!('sandbox' in probe)) throw new Error('no sandbox');
      const s = probe.sandbox;
      const a = s.account();
      try {
        const together = meetingPlace();
        const [held, same] = await Promise.all([threadsIn(s, a, 'hold', together), threadsIn(s, a, 'try', together)]);
        expect(held).toBe(30);
        expect(same).toBeLessThan(10);
      } finally {
        a.release();
      }
    },
    120_000,
  );

  it.skipIf(!isRoot)(
    `as an ordinary user (raw bwrap as nobody): each sandbox's user namespace counts apart on Linux ${release()} (5.14 and later), all of them against the user's own limit`,
    async () => {
      const apart = meetingPlace();
      const [held, other] = await Promise.all([threadsAsUser('hold', apart, 1000), threadsAsUser('try', apart, 1000)]);
      expect(held).toBe(30);
      if (countsPerNamespace(release())) expect(other).toBe(30);
      else expect(other).toBeLessThan(10);
      // The user's own limit (60) bounds every sandbox of the user together (a user with nothing
      // else running: nobody; an ordinary user running the tests has its own processes counted).
      const bounded = meetingPlace();
      const [held2, capped] = await Promise.all([
        threadsAsUser('hold', bounded, 60),
        threadsAsUser('try', bounded, 60),
      ]);
      expect(held2).toBe(30);
      expect(capped).toBeLessThan(30);
    },
    120_000,
  );

  it("makes what runs inside the OOM killer's first choice, before forkflush", async () => {
    const probe = await probeSandbox();
    if (!('sandbox' in probe)) throw new Error('no sandbox');
    const s = probe.sandbox;
    const account = s.account();
    try {
      const r = await runProcess('cat', ['/proc/self/oom_score_adj'], {
        cwd: '/',
        confine: {
          sandbox: s,
          confinement: { writable: [], readable: [], hidden: [], tmp: '/tmp', network: false, grader: true, account },
        },
      });
      expect(r.stdout.trim(), r.stderr).toBe('1000');
      expect(readFileSync('/proc/self/oom_score_adj', 'utf8').trim()).not.toBe('1000');
    } finally {
      account.release();
    }
  });

  it.skipIf(!isRoot)(
    'a folder shared by every episode stays writable by each account (one group, umask 002)',
    async () => {
      const probe = await probeSandbox();
      if (!('sandbox' in probe)) throw new Error('no sandbox');
      const s = probe.sandbox;
      const dir = meetingPlace();
      const write = async (account: SandboxAccount, script: string) => {
        const r = await runProcess('sh', ['-c', script], {
          cwd: '/',
          confine: {
            sandbox: s,
            confinement: {
              writable: [],
              shared: [dir],
              readable: [],
              hidden: [],
              tmp: '/tmp',
              network: false,
              account,
            },
          },
        });
        expect(r.exitCode, r.stderr).toBe(0);
      };
      const [a, b] = [s.account(), s.account()];
      try {
        await write(a, `mkdir ${dir}/cache && echo a > ${dir}/cache/entry`);
        await write(b, `echo b >> ${dir}/cache/entry && echo b > ${dir}/cache/other`);
        expect(readFileSync(join(dir, 'cache', 'entry'), 'utf8')).toBe('a\nb\n');
        expect(statSync(join(dir, 'cache')).uid).toBe(a.user?.uid);
        expect(statSync(join(dir, 'cache', 'other')).gid).toBe(UID_RANGE.group);
      } finally {
        a.release();
        b.release();
      }
    },
  );

  it('a folder shown from the real /tmp (sandbox.read there) does not show a hidden place inside it', async () => {
    // /tmp in a sandbox is its own, so hidden places under the real /tmp were left unhidden; a
    // readable bind of a folder there holding one (a task repository and its run folder, say)
    // showed it again: the run's seal key to the agent.
    const probe = await probeSandbox();
    if (!('sandbox' in probe)) throw new Error('no sandbox');
    const outer = mkdtempSync(join(tmpdir(), 'forkflush-shown-'));
    const box = mkdtempSync(join(tmpdir(), 'forkflush-shown-box-'));
    for (const d of ['data', 'repo/.forkflush/run']) mkdirSync(join(outer, d), { recursive: true });
    writeFileSync(join(outer, 'data', 'shown.txt'), 'shown\n');
    writeFileSync(join(outer, 'repo', '.forkflush', 'run', 'seal.key'), 'SECRET\n');
    for (const d of [outer, box]) chmodSync(d, 0o755);
    const account = probe.sandbox.account();
    try {
      const r = await runProcess(
        'sh',
        ['-c', `cat ${outer}/data/shown.txt; cat ${outer}/repo/.forkflush/run/seal.key`],
        {
          cwd: '/',
          confine: {
            sandbox: probe.sandbox,
            confinement: {
              writable: [box],
              readable: [outer],
              hidden: [join(outer, 'repo')],
              tmp: box,
              network: false,
              account,
            },
          },
        },
      );
      expect(r.stdout, r.stderr).toContain('shown');
      expect(r.stdout).not.toContain('SECRET');
    } finally {
      account.release();
      rmSync(outer, { recursive: true, force: true });
      rmSync(box, { recursive: true, force: true });
    }
  });

  it('a sandbox.read path an earlier episode made a symlink to the runs folder (through sandbox.write) does not show the seal key', async () => {
    // sandbox.write: [SHARED], sandbox.read: [SHARED/ds], ds not made yet. Episode 1's agent makes
    // SHARED/ds a link to the runs folder, whose path it knows (its workspace is in it). Before, each
    // later episode bound the link's target, the runs folder itself, over its hiding (equal paths,
    // the bind won), and the next agent read seal.key: a config's folder that is, or is in, one of
    // forkflush's own places is now left out each time a sandbox is made (found by a review).
    const probe = await probeSandbox();
    if (!('sandbox' in probe)) throw new Error('no sandbox');
    const outer = mkdtempSync('/var/tmp/forkflush-swap-');
    const repo = join(outer, 'repo');
    const runs = join(repo, '.forkflush');
    const run = join(runs, 'r1');
    const shared = join(outer, 'shared');
    for (const d of ['ws', 'context', 'box/tmp'].map((p) => join(run, p))) mkdirSync(d, { recursive: true });
    mkdirSync(shared);
    writeFileSync(join(run, 'seal.key'), 'SECRET\n');
    // As an ordinary user's run: the agent runs as that user, and reads what the user reads.
    for (const d of [
      outer,
      repo,
      runs,
      run,
      join(run, 'ws'),
      join(run, 'context'),
      join(run, 'box'),
      join(run, 'box/tmp'),
    ])
      chmodSync(d, 0o755);
    chmodSync(join(run, 'box/tmp'), 0o777);
    chmodSync(join(run, 'ws'), 0o777);
    chmodSync(shared, 0o777);
    // The config refuses a sandbox.read inside a sandbox.write as written; named another way (a
    // link, `~/`), it gets past, and the sandbox must hold all the same.
    const config = parseConfig(
      `grader:\n  command: sh grade.sh\nagent:\n  command: sh agent.sh\nbudget:\n  total: 10\n  unit: tokens\nsandbox:\n  write: [${JSON.stringify(shared)}]\n`,
      '.github/autoresearch.yml',
    );
    config.sandbox.read = [join(shared, 'ds')];
    const places = {
      workspace: join(run, 'ws'),
      context: join(run, 'context'),
      box: join(run, 'box'),
      objects: [],
      private: [repo, runs],
    };
    const episode = async (script: string) => {
      const account = probe.sandbox.account();
      try {
        return await runProcess('sh', ['-c', script], {
          cwd: places.workspace,
          confine: {
            sandbox: probe.sandbox,
            confinement: { ...agentConfinement(places, config, process.env), account },
          },
        });
      } finally {
        account.release();
      }
    };
    try {
      // Episode 1: the hostile agent, through the shared folder.
      const first = await episode(`ln -s ${runs} ${join(shared, 'ds')} && cat ${run}/seal.key`);
      expect(first.stdout, first.stderr).not.toContain('SECRET');
      // Episode 2: any agent of the run.
      const second = await episode(`cat ${run}/seal.key; ls ${runs}`);
      expect(second.stdout, second.stderr).not.toContain('SECRET');
    } finally {
      rmSync(outer, { recursive: true, force: true });
    }
  });
});
