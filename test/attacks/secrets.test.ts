// Hostile agents after what is kept from them: the user's home, forkflush's run folders (seal
// keys, states, other episodes' workspaces, other runs), the machine's root-only files, and
// privileges or processes outside the sandbox.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  attackTemp,
  CAT_GRADER,
  cleanupAttackTemps,
  commitHolds,
  describeSandboxed,
  folderText,
  makeAttackRepo,
  processesWith,
  runLocal,
  showFile,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);

// A sentinel in the real home (forkflush hides the home of the user running it): a file of its
// own, removed afterwards. HOME is /root on this machine.
const CLI = join(import.meta.dirname, '..', '..', 'dist', 'cli.js');
const HOME_SECRET = unique('home-sentinel');
const homeDir = join(process.env.HOME || homedir(), `.forkflush-attack-${process.pid}`);
const homeFile = join(homeDir, 'id_rsa');
beforeAll(() => {
  mkdirSync(homeDir, { recursive: true, mode: 0o700 });
  writeFileSync(homeFile, `-----BEGIN OPENSSH PRIVATE KEY-----\n${HOME_SECRET}\n`, { mode: 0o600 });
});
afterAll(() => rmSync(homeDir, { recursive: true, force: true }));

describeSandboxed('secrets outside the workspace', () => {
  it("an agent that reads the home, the main .git, seal keys, states, contexts and other runs' folders gets nothing", async () => {
    const contextSecret = unique('earlier-run-context');
    const configSecret = unique('main-git-config');
    const repo = makeAttackRepo({
      agent:
        '[ -f {logs}/context-secret ] && { cp {logs}/context-secret "$FORKFLUSH_CONTEXT_DIR/memory.txt"; echo 2 > value.txt; ' +
        `echo '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"; } || sh {fx}/loot.sh {logs} {repo} ${homeFile} ${homeDir}`,
      grader: CAT_GRADER,
    });
    repo.git('config', 'forkflush-attack.sentinel', configSecret);
    // An earlier run of the same task left its folder: a seal key, a state, a context.
    writeFileSync(join(repo.logs, 'context-secret'), contextSecret);
    const earlier = await runLocal(repo, { now: new Date('2026-11-29T10:00:00Z') });
    expect(earlier.result.score).toBe(2);
    expect(folderText(earlier.run.store.path('contexts'))).toContain(contextSecret);
    rmSync(join(repo.logs, 'context-secret'));
    const { result, run } = await runLocal(repo);
    const gitDir = join(repo.dir, '.git');
    const key = readFileSync(run.store.path('seal.key'));
    const earlierKey = readFileSync(earlier.run.store.path('seal.key'));
    const secrets = {
      home: HOME_SECRET,
      'earlier context': contextSecret,
      'earlier seal key': earlierKey.toString('hex'),
      'seal key': key.toString('hex'),
      'earlier state': `"id": "${earlier.state.id}"`,
      'main .git config': configSecret,
    };
    const loot = folderText(repo.logs);
    expect(loot.length).toBeGreaterThan(0);
    for (const [what, secret] of Object.entries(secrets)) {
      expect(commitHolds(gitDir, result.commit, secret), what).toBe(false);
      expect(loot.includes(secret), what).toBe(false);
    }
    for (const k of [key, earlierKey]) expect(loot.includes(k.toString('latin1'))).toBe(false);
    expect(result.score).toBe(5);
  });

  it("an episode cannot read or write its sibling's workspace while both run", async () => {
    const repo = makeAttackRepo({
      agent: 'sh {fx}/sibling.sh {logs} {repo}',
      grader: CAT_GRADER,
      strategy: 'best-of-n',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'fork:\n  branches: 2',
    });
    const { state } = await runLocal(repo, { concurrency: 2 });
    const [b0, b1] = state.rounds[0]?.episodes ?? [];
    const gitDir = join(repo.dir, '.git');
    expect(existsSync(join(repo.logs, 'b1-ready'))).toBe(true);
    // The secret r0.b1 made up while it ran, and kept in its workspace only.
    const secret = (showFile(gitDir, b1?.result?.commit ?? '', 'secret.txt') ?? '').trim();
    expect(secret).toMatch(/^sibling-secret-[0-9a-f]{32}$/);
    expect(commitHolds(gitDir, b0?.result?.commit ?? '', secret)).toBe(false);
    expect(showFile(gitDir, b0?.result?.commit ?? '', 'stolen.txt') ?? '').toBe('');
    expect(showFile(gitDir, b1?.result?.commit ?? '', 'planted.txt')).toBeNull();
  });

  it('an agent of a run started by root cannot read root-only files of the machine (/etc/shadow, SSH host keys)', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/machine-secrets.sh', grader: CAT_GRADER });
    const { result } = await runLocal(repo);
    const gitDir = join(repo.dir, '.git');
    // Lengths only: the test's own output must not print the machine's secrets.
    expect((showFile(gitDir, result.commit, 'shadow.txt') ?? '').length, 'bytes of /etc/shadow in the commit').toBe(0);
    expect((showFile(gitDir, result.commit, 'host-keys.txt') ?? '').length, 'bytes of host keys in the commit').toBe(0);
  });
});

describeSandboxed('the home, with toolchains on PATH', () => {
  // A home of the test's own (HOME and PATH are forkflush's environment: this process's).
  it.each([
    ['~/.local/bin (pip --user, pipx; Ubuntu puts it on PATH)', '.local/bin'],
    ['the home folder itself', ''],
  ])('with %s on PATH, the secrets in the home stay hidden', async (_, bin) => {
    const home = attackTemp('home');
    const secret = unique('home-secret');
    const files = {
      ssh: join(home, '.ssh', 'id_ed25519'),
      keyring: join(home, '.local', 'share', 'keyrings', 'login.keyring'),
      history: join(home, '.local', 'state', 'fish', 'fish_history'),
    };
    for (const f of Object.values(files)) {
      mkdirSync(join(f, '..'), { recursive: true });
      writeFileSync(f, `${secret}\n`, { mode: 0o600 });
    }
    mkdirSync(join(home, bin), { recursive: true });
    const saved = { HOME: process.env.HOME, PATH: process.env.PATH };
    process.env.HOME = home;
    process.env.PATH = `${join(home, bin)}:${saved.PATH}`;
    try {
      const repo = makeAttackRepo({
        agent: `sh {fx}/home-via-path.sh ${Object.values(files).join(' ')}`,
        grader: CAT_GRADER,
      });
      const { result } = await runLocal(repo);
      expect(result.score).toBe(5);
      const loot = showFile(join(repo.dir, '.git'), result.commit, 'home-loot.txt') ?? '';
      expect(loot.split('\n').filter((l) => l === secret).length, 'secret files the agent read').toBe(0);
    } finally {
      process.env.HOME = saved.HOME;
      process.env.PATH = saved.PATH;
    }
  });
});

describeSandboxed('privileges and processes outside', () => {
  it('sudo, su, unshare -r with umount and bind mounts, and writes outside the workspace get the agent nothing', async () => {
    const name = unique('ff-escalate');
    const repo = makeAttackRepo({ agent: `sh {fx}/escalate.sh ${homeFile} ${name}`, grader: CAT_GRADER });
    const { result } = await runLocal(repo);
    const gitDir = join(repo.dir, '.git');
    expect(showFile(gitDir, result.commit, 'escalate/caps-self.txt')).toMatch(/^CapEff:\s+0{16}\n$/);
    expect(commitHolds(gitDir, result.commit, HOME_SECRET)).toBe(false);
    expect(showFile(gitDir, result.commit, 'escalate/writable.txt')).toBeNull();
    for (const p of [
      `/etc/${name}`,
      `/usr/local/bin/${name}`,
      `/var/tmp/${name}`,
      `/var/tmp/forkflush-attacks/${name}`,
      `/run/${name}`,
    ]) {
      expect(existsSync(p), p).toBe(false);
    }
    expect(showFile(gitDir, result.commit, 'escalate/writes.txt') ?? '').not.toMatch(/^wrote \/(etc|usr|var|run)/m);
    expect(result.score).toBe(5);
  });

  it("an agent of a run started by root cannot write the kernel's settings (/proc/sys, /proc/sysrq-trigger)", async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/sysctl.sh', grader: CAT_GRADER });
    const { result } = await runLocal(repo);
    expect(showFile(join(repo.dir, '.git'), result.commit, 'sysctl.txt')).toBeNull();
  });

  it("an agent of a run started by root cannot reach the host's system bus over its Unix socket", async () => {
    const path = '/run/dbus/system_bus_socket';
    // The system bus, or (on a machine without one) a stand-in listening where it would be.
    const clients = new Set<Socket>();
    const standIn =
      existsSync('/run/dbus') && !existsSync(path)
        ? createServer((c) => {
            clients.add(c);
            c.on('error', () => {});
            c.end('OK 1234\r\n');
          })
        : null;
    if (!existsSync(path) && !standIn) {
      console.warn('no /run/dbus here: the system-bus case is not tested');
      return;
    }
    await new Promise<void>((resolve) => (standIn ? standIn.listen(path, resolve) : resolve()));
    try {
      const repo = makeAttackRepo({ agent: `node {fx}/host-socket.mjs {logs} ${path}`, grader: CAT_GRADER });
      await runLocal(repo);
      expect(existsSync(join(repo.logs, 'host-socket.txt'))).toBe(false);
    } finally {
      for (const c of clients) c.destroy();
      await new Promise<void>((resolve) => (standIn ? standIn.close(() => resolve()) : resolve()));
      if (standIn) rmSync(path, { force: true });
    }
  });

  it.skipIf(!existsSync('/usr/bin/script'))(
    'the agent gets no terminal even when forkflush has one (no TIOCSTI)',
    () => {
      const repo = makeAttackRepo({ agent: 'sh {fx}/tty.sh', grader: CAT_GRADER });
      const r = spawnSync('script', ['-qec', `${process.execPath} ${CLI} run ${repo.dir} --seed 1`, '/dev/null'], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(r.status, r.stdout).toBe(0);
      const runs = join(repo.dir, '.forkflush');
      const [id] = readdirSync(runs);
      const state = JSON.parse(readFileSync(join(runs, id ?? '', 'state.json'), 'utf8'));
      const commit = state.rounds[0].episodes[0].result.commit as string;
      expect(showFile(join(repo.dir, '.git'), commit, 'value.txt')).toBe('5\n');
      expect(showFile(join(repo.dir, '.git'), commit, 'tty.txt')).toBeNull();
    },
  );

  it('kill -9 of every process the agent sees leaves the processes outside alone', async () => {
    const marker = `600.${process.pid}${Date.now() % 100000}`;
    const bystander = spawn('sleep', [marker], { stdio: 'ignore', detached: true });
    try {
      const repo = makeAttackRepo({ agent: 'sh {fx}/kill-all.sh {logs}', grader: CAT_GRADER });
      const { result, state } = await runLocal(repo);
      expect(state.status).toBe('finished');
      expect(result.score).toBe(5);
      // It saw only its own namespace's few processes, and the bystander lives on.
      const seen = readFileSync(join(repo.logs, 'visible-pids'), 'utf8').trim().split(' ');
      expect(seen.length).toBeLessThan(10);
      expect(processesWith(marker)).toEqual([bystander.pid]);
    } finally {
      bystander.kill('SIGKILL');
    }
  });
});
