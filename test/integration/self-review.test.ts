// A review of the fixes since ff0229d (task-copy.ts, sandbox-view.ts linkedOut, io/git.ts's
// environment), as a new user's whole `forkflush run` in a separate process (runCli, a HOME of its
// own, as in real-repos.test.ts). Every row failed before its fix; its comment says what went
// wrong then, what the right behaviour is, and where in src/.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { attackTemp, cleanupAttackTemps, describeSandboxed, makeAttackRepo, runCli } from '../attacks/helpers.js';

afterAll(cleanupAttackTemps);

/** A HOME of its own, with a ~/.gitconfig naming the user. */
function homeWith(): string {
  const home = attackTemp('home');
  writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Night User\n\temail = user@example.invalid\n');
  return home;
}

const envFor = (home: string, more: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  HOME: home,
  LANG: 'C.UTF-8',
  ...more,
});

const userGit = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' });

describeSandboxed('self-review: a task folder copied, its links, its git environment', () => {
  // A task kept in a folder the enclosing repository ignores: a monorepo's `scratch/` (or
  // `experiments/`, `sandbox/`) in its .gitignore, the usual place to try a thing out before it
  // is committed. task-copy.ts now copies only what `git ls-files --cached --others
  // --exclude-standard` lists, which for an ignored folder is nothing: the copy is empty, and
  // the run dies with "forkflush: failed: git commit --quiet -m forkflush: the task folder ...
  // failed (exit 1):" (exit 1, no reason, no fix). Before the fix the folder was copied whole and
  // the run scored. Right: a folder its repository ignores as a whole is copied as a plain folder
  // (as before), or refused up front (exit 2) naming the .gitignore that ignores it.
  // Where: src/local/task-copy.ts enclosingRepositoryTakes / copyTaskFiles.
  it('a task folder the monorepo ignores (scratch/ in its .gitignore) runs on a copy, or is refused naming the .gitignore', async () => {
    const root = attackTemp('mono');
    const task = makeAttackRepo({ dir: join(root, 'scratch'), agent: `sh -c 'echo 5 > value.txt'` });
    rmSync(join(task.dir, '.git'), { recursive: true, force: true });
    writeFileSync(join(root, '.gitignore'), 'scratch/\n');
    writeFileSync(join(root, 'README.md'), '# the monorepo\n');
    userGit(root, 'init', '-q', '--initial-branch=main');
    userGit(root, 'add', '-A');
    userGit(root, 'commit', '-qm', 'monorepo');
    const r = await runCli(['run', task.dir], { cwd: task.dir, deadlineMs: 50_000, env: envFor(homeWith()) });
    expect(r.out).not.toMatch(/failed: git commit/);
    if (r.exitCode === 0) expect(r.out).toMatch(/r0\.b0 scored 5/);
    else {
      expect(r.exitCode, r.out).toBe(2);
      expect(r.out).toMatch(/ignore/i);
    }
  }, 60_000);

  // A plain task folder in the home folder (~/tasks/solver, the usual place) with a relative
  // link inside it: `current -> v2`, the grader reading current/d.txt. The copy (task-copy.ts,
  // node's fs.cp without verbatimSymlinks) rewrites every relative link to an absolute one into
  // the user's original folder: the copy commits `current -> /home/<user>/tasks/solver/v2`. The
  // new pre-flight (linkedOut) then finds a committed link "that leads out of the repository" into
  // the home folder the sandbox hides and refuses the run (exit 2), telling the user to add their
  // own task folder to sandbox.read, for a link they wrote as relative and that never leaves the
  // folder. (Had it passed, the grader would read the user's live folder, not the episode's
  // checkout: an agent's edit of v2/d.txt would never count.) Right: the copy keeps links as they
  // are written (fs.cp's verbatimSymlinks: true), and the run scores 7.
  // Where: src/local/task-copy.ts copyTaskFiles (cp), with src/local/sandbox-view.ts linkedOut.
  it('a plain task folder in the home folder with a relative link inside it runs, its link kept relative in the copy', async () => {
    const home = homeWith();
    const task = makeAttackRepo({
      dir: join(home, 'tasks'),
      agent: `sh -c 'echo 5 > value.txt'`,
      grader: `sh -c 'cat current/d.txt'`,
    });
    rmSync(join(task.dir, '.git'), { recursive: true, force: true });
    mkdirSync(join(task.dir, 'v2'));
    writeFileSync(join(task.dir, 'v2', 'd.txt'), '7\n');
    symlinkSync('v2', join(task.dir, 'current'));
    const r = await runCli(['run', task.dir], { cwd: task.dir, deadlineMs: 50_000, env: envFor(home) });
    expect(r.out).not.toMatch(/link current/);
    expect(r.exitCode, r.out).toBe(0);
    expect(r.out).toContain('initial workspace: score 7');
  }, 60_000);

  // A repository that commits many links inside itself (a vendored tree, `node_modules/.bin`,
  // versioned data folders: 10,000 links is not rare) and one that leads out, to a dataset in the
  // home folder. linkedOut takes the first LINKS_PROBED_MAX (200) committed links in path order
  // before it asks whether each leads out, so the one link that matters, data -> ~/datasets,
  // sorted after aaa/..., is never looked at: the dry run says the checks passed (exit 0) and the
  // grader will find no data in every episode. Right: every committed link is read (a readlink
  // each, cheap); the bound applies to the links that lead out (the probe's arguments), and the
  // run is refused naming `data` and sandbox.read, exit 2.
  // Where: src/local/sandbox-view.ts linkedOut (links.slice(0, LINKS_PROBED_MAX) before the filter).
  it('a link to a dataset in the home folder, after 250 links that stay inside the repository, is still refused naming the link', async () => {
    const home = homeWith();
    mkdirSync(join(home, 'datasets'));
    writeFileSync(join(home, 'datasets', 'd.txt'), '9\n');
    const repo = makeAttackRepo({
      agent: `sh -c 'echo 5 > value.txt'`,
      grader: `sh -c 'cat data/d.txt'`,
    });
    mkdirSync(join(repo.dir, 'aaa'));
    for (let i = 0; i < 250; i++) symlinkSync('../value.txt', join(repo.dir, 'aaa', `l${String(i).padStart(3, '0')}`));
    symlinkSync(join(home, 'datasets'), join(repo.dir, 'data'));
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'links, and the dataset');
    const r = await runCli(['run', repo.dir, '--dry-run'], { cwd: repo.dir, deadlineMs: 50_000, env: envFor(home) });
    expect(r.exitCode, r.out).toBe(2);
    expect(r.out).toMatch(/link data needs .*datasets, which the sandbox hides/);
  }, 60_000);

  // A container or CI job whose repository belongs to another user, made safe the way read-only
  // images do it: in the environment (`GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory
  // GIT_CONFIG_VALUE_0=/work/repo`; git honours it as it does `-c`), since the global config is
  // not theirs to write. withoutRepositoryEnv strips GIT_CONFIG_COUNT and its pairs along with
  // GIT_DIR, so forkflush's git refuses the repository "owned by another user (git's
  // safe.directory)" though the user's own `git status` there works. These variables do not say
  // where a repository is (the bug the fix was for): they are the user's config. Right: keep the
  // caller's GIT_CONFIG_COUNT/KEY/VALUE and GIT_CONFIG_PARAMETERS (or keep their safe.directory),
  // and the run scores. Where: src/io/git.ts REPOSITORY_ENV.
  it.skipIf(process.getuid?.() !== 0)(
    "a repository made safe by safe.directory in the environment (GIT_CONFIG_COUNT) is run, as the user's own git runs it",
    async () => {
      const repo = makeAttackRepo({ agent: `sh -c 'echo 5 > value.txt'` });
      execFileSync('chown', ['-R', 'nobody:nogroup', repo.dir]);
      const home = homeWith();
      const safe = { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'safe.directory', GIT_CONFIG_VALUE_0: repo.dir };
      // The user's own git works there.
      expect(
        execFileSync('git', ['status', '--short'], { cwd: repo.dir, env: envFor(home, safe), encoding: 'utf8' }),
      ).toBe('');
      const r = await runCli(['run', repo.dir], { cwd: repo.dir, deadlineMs: 50_000, env: envFor(home, safe) });
      expect(r.out).not.toMatch(/owned by another user/);
      expect(r.exitCode, r.out).toBe(0);
      expect(r.out).toMatch(/r0\.b0 scored 5/);
    },
    60_000,
  );

  // A link the repository commits into itself by its absolute path (`ln -s "$PWD/real" data`, as a
  // script that builds the data folder writes it). Episodes run in a checkout elsewhere, and the
  // sandbox hides the repository's own path: the link leads nowhere there and every episode would
  // get no score. linkedOut passed over it (it leads "into the repository"). Right: refused before
  // any agent, telling to make the link relative. Where: src/local/sandbox-view.ts linkedOut.
  it('a committed link into the repository by its absolute path is refused before any agent, with the relative name', async () => {
    const repo = makeAttackRepo({ agent: `sh -c 'echo 5 > value.txt'`, grader: `sh -c 'cat data/d.txt'` });
    mkdirSync(join(repo.dir, 'real'));
    writeFileSync(join(repo.dir, 'real', 'd.txt'), '9\n');
    symlinkSync(join(repo.dir, 'real'), join(repo.dir, 'data'));
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'the data folder, linked by its absolute path');
    const r = await runCli(['run', repo.dir, '--dry-run'], {
      cwd: repo.dir,
      deadlineMs: 50_000,
      env: envFor(homeWith()),
    });
    expect(r.exitCode, r.out).toBe(2);
    expect(r.out).toMatch(
      /link data names .*real, in the repository by its absolute path.*name it relative to the repository \(real\)/,
    );
  }, 60_000);
});
