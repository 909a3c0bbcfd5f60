// A new user's real repository, as repositories really are: a linked `git worktree` and a git
// alias, a shell that exports GIT_DIR, a task in a subfolder of a monorepo, a dataset linked from
// the home folder. Each row is a whole `forkflush run` as a separate process (runCli) with a HOME
// of its own, as in user-git.test.ts, and each fails on the code it was written against: the
// comment says what the user saw and what should happen.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import {
  attackTemp,
  cleanupAttackTemps,
  describeSandboxed,
  homeWith,
  makeAttackRepo,
  runCli,
  userEnv,
} from '../attacks/helpers.js';

afterAll(cleanupAttackTemps);

/** git in `dir` as the user runs it: its exit code and what it printed. */
function userGit(dir: string, home: string, ...args: string[]): { code: number | null; out: string } {
  const r = spawnSync('git', args, { cwd: dir, env: userEnv(home), encoding: 'utf8' });
  return { code: r.status, out: `${r.stdout}${r.stderr}`.trim() };
}

/** git in a monorepo's top, as the tests set one up (a committer named). */
const monorepoGit = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' });

/** A dataset in the home folder (d.txt: 9), linked into a task repository (`data`, not yet committed) whose grader reads it. */
function datasetInHome(agent: string) {
  const home = homeWith();
  mkdirSync(join(home, 'datasets'));
  writeFileSync(join(home, 'datasets', 'd.txt'), '9\n');
  const repo = makeAttackRepo({ agent, grader: `sh -c 'cat data/d.txt'` });
  symlinkSync(join(home, 'datasets'), join(repo.dir, 'data'));
  return { home, repo };
}

describeSandboxed("a new user's real repository", () => {
  // `git worktree add ../feature` and a git alias to start runs (`git config alias.ff '!forkflush
  // run .'`), or a hook that runs `forkflush run . --dry-run`: in a linked worktree git gives
  // the alias (and the hook) GIT_DIR=<main>/.git/worktrees/<name>, absolute. forkflush's own git
  // commands inherit it: the workspace's `git init` (worker/cleanroom.ts) reinitialised the
  // user's worktree git directory instead, wrote core.bare=true into the repository's shared
  // config, and the run died at its first episode with "failed: ENOENT: no such file or
  // directory, open '.../workspaces/r0.b0/.git/objects/info/alternates'" (exit 1, "after the
  // fix, continue it", no fix named). Afterwards the user's main checkout is broken: every
  // `git status` there says "fatal: this operation must be run in a work tree", and `git
  // worktree list` calls it bare. Right: forkflush's git ignores the caller's GIT_DIR (it names
  // its repositories itself), the run scores, and the user's config is as it was.
  it('a run started by a git alias in a linked worktree (GIT_DIR set by git) scores and leaves the main checkout working', async () => {
    const repo = makeAttackRepo({ agent: `sh -c 'echo 5 > value.txt'` });
    const home = homeWith();
    const linked = join(repo.dir, '..', 'feature');
    repo.git('worktree', 'add', '-q', linked, '-b', 'feature');
    // What git exports to an alias (or a hook) run in the linked worktree.
    const gitDir = userGit(linked, home, 'rev-parse', '--absolute-git-dir').out;
    expect(gitDir).toBe(join(repo.dir, '.git', 'worktrees', 'feature'));
    const r = await runCli(['run', '.'], {
      cwd: linked,
      deadlineMs: 50_000,
      env: userEnv(home, { GIT_DIR: gitDir, GIT_PREFIX: '' }),
    });
    expect({
      mainCheckout: userGit(repo.dir, home, 'status', '--short'),
      bare: repo.git('config', 'core.bare'),
    }).toEqual({
      mainCheckout: { code: 0, out: '' },
      bare: 'false',
    });
    expect(r.out).not.toMatch(/ENOENT/);
    expect(r.exitCode, r.out).toBe(0);
    expect(r.out).toMatch(/r0\.b0 scored 5/);
  }, 60_000);

  // A shell that keeps GIT_DIR and GIT_WORK_TREE exported for a bare "dotfiles" repository
  // (`export GIT_DIR=~/.dotfiles GIT_WORK_TREE=~`, the common way to version a home folder),
  // then `forkflush run ~/project`. forkflush's git took the home folder for the repository's
  // top, so the project "is not the root of a git repository" and was to be run on a copy; the
  // copy's `git init`, `git add -A` and `git commit` (local/start.ts copyTask) went to the
  // dotfiles repository instead: core.bare=false and core.worktree=<home> written into its
  // config, and a commit "forkflush: the task folder <project>" holding the whole home folder
  // (~/.ssh included, had there been one) put on the user's dotfiles branch, ready for their
  // next push. The run then refused with ".github/autoresearch.yml: task: TASK.md is not in the
  // repository's last commit" (it is committed, in the project). Right: the project named on
  // the command line is the repository (its own .git, whatever GIT_DIR says), or a refusal
  // naming GIT_DIR; never a write to another repository.
  it('GIT_DIR and GIT_WORK_TREE exported for a dotfiles repository: the project is run (or GIT_DIR named), the dotfiles config untouched', async () => {
    const repo = makeAttackRepo({ agent: `sh -c 'echo 5 > value.txt'` });
    const home = homeWith();
    const dotfiles = join(home, '.dotfiles');
    execFileSync('git', ['init', '-q', '--bare', dotfiles]);
    const dot = (...args: string[]) =>
      execFileSync('git', [`--git-dir=${dotfiles}`, `--work-tree=${home}`, ...args], {
        env: userEnv(home),
        encoding: 'utf8',
      });
    dot('add', '.gitconfig');
    dot('commit', '-qm', 'dotfiles');
    const before = execFileSync('git', [`--git-dir=${dotfiles}`, 'config', '--local', '--list'], { encoding: 'utf8' });
    const r = await runCli(['run', repo.dir], {
      cwd: repo.dir,
      deadlineMs: 50_000,
      env: userEnv(home, { GIT_DIR: dotfiles, GIT_WORK_TREE: home }),
    });
    const after = execFileSync('git', [`--git-dir=${dotfiles}`, 'config', '--local', '--list'], { encoding: 'utf8' });
    const log = execFileSync('git', [`--git-dir=${dotfiles}`, 'log', '--all', '--format=%s'], { encoding: 'utf8' });
    expect({ config: after, log: log.trim() }).toEqual({ config: before, log: 'dotfiles' });
    expect(r.out).not.toMatch(/TASK\.md is not in the repository's last commit/);
    if (r.exitCode !== 0) {
      expect(r.exitCode, r.out).toBe(2);
      expect(r.out).toContain('GIT_DIR');
    } else {
      expect(r.out).toMatch(/r0\.b0 scored 5/);
    }
  }, 60_000);

  // A monorepo (`forkflush run services/solver`): the task's folder is not the repository's
  // root, so the run works on a copy of the folder. The copy takes every file in it and commits
  // what the folder's own .gitignore lets through, so what the monorepo's root .gitignore keeps
  // out came along: services/solver/.env, with the user's API key, was committed into the copy
  // and sat in every agent's workspace (and in what the agent sends its model provider). Right:
  // the copy holds what the user's repository would (its ignore rules apply, as they do to a run
  // on the repository itself), so an ignored .env never reaches an agent.
  it("a task in a monorepo's subfolder: a .env the monorepo's .gitignore keeps out never reaches the agent", async () => {
    const root = attackTemp('mono');
    const sub = makeAttackRepo({
      dir: root,
      agent: `sh -c 'cat .env > {logs}/seen.txt 2>&1; echo 5 > value.txt'`,
    });
    // The folder is part of the monorepo at `root`, not a repository of its own.
    rmSync(join(sub.dir, '.git'), { recursive: true, force: true });
    writeFileSync(join(root, '.gitignore'), '.env\nlogs/\n');
    mkdirSync(join(root, 'lib'));
    writeFileSync(join(root, 'lib', 'shared.txt'), 'shared\n');
    const secret = 'sk-live-monorepo-0123456789';
    writeFileSync(join(sub.dir, '.env'), `OPENAI_API_KEY=${secret}\n`);
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: root, encoding: 'utf8' });
    git('init', '-q', '--initial-branch=main');
    git('add', '-A');
    git('commit', '-qm', 'monorepo');
    expect(git('ls-files')).not.toContain('.env');
    const home = homeWith();
    const r = await runCli(['run', sub.dir], { cwd: sub.dir, deadlineMs: 50_000, env: userEnv(home) });
    const seen = join(sub.logs, 'seen.txt');
    expect(r.out).toMatch(/r0\.b0 (scored|no score)/);
    // The agent looked (so the row cannot pass by its not running), and found no key.
    expect(existsSync(seen), r.out).toBe(true);
    expect(readFileSync(seen, 'utf8'), r.out).not.toContain(secret);
  }, 60_000);

  // A dataset kept in the home folder and linked into the repository (`ln -s ~/datasets data`,
  // committed: the usual way ML repositories point at data too large for git). The grader reads
  // data/d.txt and scores 9 when the user runs it. The sandbox hides the home folder, so the
  // dry run said "initial workspace: no score (cat: data/d.txt: No such file or directory)",
  // "no score, as committed and as it is" (as it is, it scores 9) and "the checks passed", exit
  // 0; the run then spent its opening round on agents graded "no score" and ended exit 1.
  // Right: before any agent, the run (and its dry run) names the link data, which leads into the
  // home folder the sandbox hides, and the fix (sandbox.read), exit 2; or it reads the data.
  it('a committed link to a dataset in the home folder: refused before any agent naming the link and sandbox.read, or read', async () => {
    const { home, repo } = datasetInHome(`sh -c 'echo ran > {logs}/agent-ran; echo 5 > value.txt'`);
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'the dataset, linked');
    // It grades by hand in the user's folder.
    expect(execFileSync('sh', ['-c', 'cat data/d.txt'], { cwd: repo.dir, encoding: 'utf8' }).trim()).toBe('9');
    for (const how of [['--dry-run'], []]) {
      const r = await runCli(['run', repo.dir, ...how], { cwd: repo.dir, deadlineMs: 50_000, env: userEnv(home) });
      if (r.exitCode === 0) {
        expect(r.out).toContain('initial workspace: score 9');
      } else {
        expect(r.exitCode, r.out).toBe(2);
        expect(r.out).toMatch(
          /link data needs .*datasets, which the sandbox hides .*sandbox: \{read: \[".*datasets"\]\}/,
        );
        expect(existsSync(join(repo.logs, 'agent-ran'))).toBe(false);
      }
    }
  }, 120_000);

  // Found by a review of the fixes above.

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
    monorepoGit(root, 'init', '-q', '--initial-branch=main');
    monorepoGit(root, 'add', '-A');
    monorepoGit(root, 'commit', '-qm', 'monorepo');
    const r = await runCli(['run', task.dir], { cwd: task.dir, deadlineMs: 50_000, env: userEnv(homeWith()) });
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
    const r = await runCli(['run', task.dir], { cwd: task.dir, deadlineMs: 50_000, env: userEnv(home) });
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
    const { home, repo } = datasetInHome(`sh -c 'echo 5 > value.txt'`);
    mkdirSync(join(repo.dir, 'aaa'));
    for (let i = 0; i < 250; i++) symlinkSync('../value.txt', join(repo.dir, 'aaa', `l${String(i).padStart(3, '0')}`));
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'links, and the dataset');
    const r = await runCli(['run', repo.dir, '--dry-run'], { cwd: repo.dir, deadlineMs: 50_000, env: userEnv(home) });
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
        execFileSync('git', ['status', '--short'], { cwd: repo.dir, env: userEnv(home, safe), encoding: 'utf8' }),
      ).toBe('');
      const r = await runCli(['run', repo.dir], { cwd: repo.dir, deadlineMs: 50_000, env: userEnv(home, safe) });
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
      env: userEnv(homeWith()),
    });
    expect(r.exitCode, r.out).toBe(2);
    expect(r.out).toMatch(
      /link data names .*real, in the repository by its absolute path.*name it relative to the repository \(real\)/,
    );
  }, 60_000);
});
