// A new user's real repository, as repositories really are: a linked `git worktree` and a git
// alias, a shell that exports GIT_DIR, a task in a subfolder of a monorepo, a dataset linked from
// the home folder. Each row is a whole `forkflush run` as a separate process (runCli) with a HOME
// of its own, as in user-git.test.ts, and each fails on the code it was written against: the
// comment says what the user saw and what should happen.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { attackTemp, cleanupAttackTemps, describeSandboxed, makeAttackRepo, runCli } from '../attacks/helpers.js';

afterAll(cleanupAttackTemps);

/** A HOME of its own, with a ~/.gitconfig naming the user. */
function homeWith(config = ''): string {
  const home = attackTemp('home');
  writeFileSync(join(home, '.gitconfig'), `[user]\n\tname = Night User\n\temail = user@example.invalid\n${config}`);
  return home;
}

const envFor = (home: string, more: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  HOME: home,
  LANG: 'C.UTF-8',
  ...more,
});

/** git in `dir` as the user runs it: its exit code and what it printed. */
function userGit(dir: string, home: string, ...args: string[]): { code: number | null; out: string } {
  const r = spawnSync('git', args, { cwd: dir, env: envFor(home), encoding: 'utf8' });
  return { code: r.status, out: `${r.stdout}${r.stderr}`.trim() };
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
      env: envFor(home, { GIT_DIR: gitDir, GIT_PREFIX: '' }),
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
        env: envFor(home),
        encoding: 'utf8',
      });
    dot('add', '.gitconfig');
    dot('commit', '-qm', 'dotfiles');
    const before = execFileSync('git', [`--git-dir=${dotfiles}`, 'config', '--local', '--list'], { encoding: 'utf8' });
    const r = await runCli(['run', repo.dir], {
      cwd: repo.dir,
      deadlineMs: 50_000,
      env: envFor(home, { GIT_DIR: dotfiles, GIT_WORK_TREE: home }),
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
    const r = await runCli(['run', sub.dir], { cwd: sub.dir, deadlineMs: 50_000, env: envFor(home) });
    const seen = join(sub.logs, 'seen.txt');
    expect(r.out).toMatch(/r0\.b0 (scored|no score)/);
    expect(existsSync(seen) ? readFileSync(seen, 'utf8') : '', r.out).not.toContain(secret);
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
    const home = homeWith();
    mkdirSync(join(home, 'datasets'));
    writeFileSync(join(home, 'datasets', 'd.txt'), '9\n');
    const repo = makeAttackRepo({
      agent: `sh -c 'echo ran > {logs}/agent-ran; echo 5 > value.txt'`,
      grader: `sh -c 'cat data/d.txt'`,
    });
    symlinkSync(join(home, 'datasets'), join(repo.dir, 'data'));
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'the dataset, linked');
    // It grades by hand in the user's folder.
    expect(execFileSync('sh', ['-c', 'cat data/d.txt'], { cwd: repo.dir, encoding: 'utf8' }).trim()).toBe('9');
    for (const how of [['--dry-run'], []]) {
      const r = await runCli(['run', repo.dir, ...how], { cwd: repo.dir, deadlineMs: 50_000, env: envFor(home) });
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
});
