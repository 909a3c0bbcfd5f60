// A local run and the user's own git: their global config, their repository's format and owner,
// and the user at work in the repository while a run goes on unattended. At 3 a.m. a run ends in a
// clear stop naming the cause (red exit, nothing lost), or works; it never hangs, never ends green
// having done nothing, and never changes the user's branches, index or working tree.
//
// forkflush runs as a separate process (runCli) with a HOME of its own, so each row's ~/.gitconfig
// is the only global config its git reads.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import {
  attackTemp,
  cleanupAttackTemps,
  describeSandboxed,
  killProcessesUnder,
  makeAttackRepo,
  runCli,
} from '../attacks/helpers.js';

afterAll(cleanupAttackTemps);

/** A HOME of its own: a ~/.gitconfig with `config`, and more files under it. */
function homeWith(config: string, files: Record<string, string> = {}): string {
  const home = attackTemp('home');
  writeFileSync(join(home, '.gitconfig'), `[user]\n\tname = Night User\n\temail = user@example.invalid\n${config}`);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(home, name, '..'), { recursive: true });
    writeFileSync(join(home, name), text, { mode: 0o755 });
  }
  return home;
}

const envFor = (home: string): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: home, LANG: 'C.UTF-8' });

/** git in `dir` as the user runs it (their HOME), never failing the test by itself. */
function userGit(dir: string, home: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd: dir, env: envFor(home), encoding: 'utf8' }).trim();
}

const forkflushBranches = (dir: string, home: string) =>
  userGit(dir, home, '-c', 'safe.directory=*', 'for-each-ref', '--format=%(refname:short)', 'refs/heads/forkflush/')
    .split('\n')
    .filter(Boolean);

describeSandboxed("the user's own git setup", () => {
  it.skipIf(process.getuid?.() !== 0)(
    'a repository owned by another user (git\'s safe.directory refuses it) is refused naming the cause and the way out, never run green on a copy of its working tree as "not a git repository"',
    async () => {
      const repo = makeAttackRepo({ agent: `sh -c 'echo 5 > value.txt'` });
      // An uncommitted edit: a run on the repository starts from HEAD (value 1), never from this.
      writeFileSync(join(repo.dir, 'value.txt'), '3\n');
      execFileSync('chown', ['-R', 'nobody:nogroup', repo.dir]);
      const home = homeWith('');
      const r = await runCli(['run', repo.dir], { cwd: repo.dir, deadlineMs: 50_000, env: envFor(home) });
      expect(r.exitCode, r.out).toBe(2);
      expect(r.out).toContain(
        `git refuses the repository at ${repo.dir}: it is owned by another user (git's safe.directory)`,
      );
      expect(forkflushBranches(repo.dir, home)).toEqual([]);
      expect(r.out).not.toMatch(/is not the root of a git repository/);
    },
    60_000,
  );

  it('a SHA-256 repository (git init --object-format=sha256) is refused up front naming its object format, never a failed start quoting "Not a valid object name"', async () => {
    const repo = makeAttackRepo({ agent: `sh -c 'echo 5 > value.txt'` });
    // The same task as a SHA-256 repository.
    rmSync(join(repo.dir, '.git'), { recursive: true, force: true });
    repo.git('init', '-q', '--object-format=sha256', '--initial-branch=main');
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'task');
    const home = homeWith('');
    const r = await runCli(['run', repo.dir], { cwd: repo.dir, deadlineMs: 50_000, env: envFor(home) });
    expect(r.exitCode, r.out).toBe(2);
    expect(r.out).toContain('uses sha256 object names: forkflush works with SHA-1 repositories only');
    expect(forkflushBranches(repo.dir, home)).toEqual([]);
  }, 60_000);

  it("a plain task folder's copy is committed without the user's commit.gpgsign: a signing program waiting for a passphrase never holds the run's start", async () => {
    const repo = makeAttackRepo({ agent: `sh -c 'echo 5 > value.txt'` });
    // A plain folder: forkflush makes a repository of a copy and commits it with its own git.
    rmSync(join(repo.dir, '.git'), { recursive: true, force: true });
    const root = join(repo.dir, '..');
    const asked = join(root, 'gpg-asked');
    // The user's signing program, as pinentry behaves at 3 a.m. with the agent's cache expired: it waits.
    const home = homeWith('[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = ~/bin/gpg-waiting\n', {
      'bin/gpg-waiting': `#!/bin/sh\necho "$*" >> ${asked}\nsleep 120\n`,
    });
    writeFileSync(
      join(home, '.gitconfig'),
      readFileSync(join(home, '.gitconfig'), 'utf8').replace('~/bin', join(home, 'bin')),
    );
    try {
      const r = await runCli(['run', repo.dir], { cwd: repo.dir, deadlineMs: 40_000, env: envFor(home) });
      expect(
        { timedOut: r.timedOut, signingAsked: existsSync(asked) ? readFileSync(asked, 'utf8').trim() : null },
        r.out,
      ).toEqual({ timedOut: false, signingAsked: null });
      expect(r.exitCode, r.out).toBe(0);
    } finally {
      killProcessesUnder(root);
    }
  }, 60_000);

  it("a user's core.splitIndex=true leaves the agent a workspace whose git works (git status does not fail on a shared index file that is not there)", async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'git status --short > /dev/null 2> {logs}/status.err; echo $? > {logs}/status.rc; echo 5 > value.txt'`,
    });
    const home = homeWith('[core]\n\tsplitIndex = true\n');
    const r = await runCli(['run', repo.dir], { cwd: repo.dir, deadlineMs: 50_000, env: envFor(home) });
    expect(r.exitCode, r.out).toBe(0);
    const rc = readFileSync(join(repo.logs, 'status.rc'), 'utf8').trim();
    const err = readFileSync(join(repo.logs, 'status.err'), 'utf8').trim();
    expect({ rc, err }).toEqual({ rc: '0', err: '' });
  }, 60_000);

  it("the agent's work is recorded whatever the user's personal ~/.config/git/ignore holds (only the repository's .gitignore applies, as on GitHub): out/result.csv is graded, not dropped as \"changing nothing\"", async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'mkdir -p out && echo 7 > out/result.csv'`,
      files: { 'grade.sh': 'cat out/result.csv 2>/dev/null || echo 0\n' },
    });
    // A personal ignore file many people have: data files and build output kept out of their own commits.
    const home = homeWith('', { '.config/git/ignore': '*.csv\nout/\n' });
    const r = await runCli(['run', repo.dir], { cwd: repo.dir, deadlineMs: 50_000, env: envFor(home) });
    const best = forkflushBranches(repo.dir, home).find((b) => b.endsWith('/best')) ?? '';
    const recorded = execFileSync('git', ['ls-tree', '-r', '--name-only', best], {
      cwd: repo.dir,
      env: envFor(home),
      encoding: 'utf8',
    });
    expect(
      { score: /r0\.b0 scored (-?[0-9.]+)/.exec(r.out)?.[1], recorded: recorded.includes('out/result.csv') },
      r.out,
    ).toEqual({
      score: '7',
      recorded: true,
    });
    expect(r.exitCode, r.out).toBe(0);
  }, 60_000);
});

describeSandboxed('the user at work in the repository during a run', () => {
  it('a forkflush branch the user checked out mid-run (to look at the best so far) is not moved under their work tree: the run stops naming it, and resumes once they switch away', async () => {
    const repo = makeAttackRepo({
      agent: `sh -c 'sleep 3; echo $(( $(cat value.txt) + 1 )) > value.txt'`,
      budget: 'total: 18\n  unit: tokens\n  episode: 6',
    });
    const home = homeWith('');
    let looked: string | null = null;
    const r = await runCli(['run', repo.dir], {
      cwd: repo.dir,
      deadlineMs: 55_000,
      env: envFor(home),
      onOutput: (out) => {
        if (looked !== null || !/r\d+\.b0 scored/.test(out)) return;
        // The user, still at the keyboard, looks at the best workspace so far (as git lets them).
        looked = forkflushBranches(repo.dir, home).find((b) => b.endsWith('/best')) ?? '';
        userGit(repo.dir, home, 'switch', '-q', looked);
      },
    });
    expect(looked).toMatch(/\/best$/);
    // Their index and files still match their HEAD: nothing a `git commit -a` would silently revert.
    expect(userGit(repo.dir, home, 'status', '--porcelain', '--untracked-files=no')).toBe('');
    expect(r.exitCode, r.out).toBe(1);
    expect(r.out).toContain(`${looked} is checked out in ${repo.dir}`);
    expect(r.out).toMatch(/switch it to another branch .*\n.*forkflush resume/);
    userGit(repo.dir, home, 'switch', '-q', 'main');
    const again = await runCli(['resume', repo.dir], { cwd: repo.dir, deadlineMs: 55_000, env: envFor(home) });
    expect(again.exitCode, again.out).toBe(0);
  }, 120_000);
});
