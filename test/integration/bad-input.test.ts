// Bad input on the local CLI path, as a new user and a careless teammate give it: each mistake is
// stopped with a clear message (file, field, what is valid) before anything is spent. Each row's
// comment says what happened before it was (found by a review).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

// Two episodes of one lineage at most: a row that is not refused ends in seconds.
const small = { budget: 'total: 12\n  unit: tokens\n  episode: 6' };
/** Any episode id in the output: an episode ran, so something was spent. */
const EPISODE = /\br\d+\.b\d+\b/;

/** A task repository moved into a folder of its own, OUTER/repo, so that OUTER holds it. */
function repoInsideFolder(extra: (outer: string) => string): { outer: string; dir: string; calls: () => unknown[] } {
  const outer = mkdtempSync(join(tmpdir(), 'forkflush-outer-'));
  const repo = makeTaskRepo({ ...small, extra: `${extra(outer)}\nstrategy: single-run` });
  const dir = join(outer, 'repo');
  renameSync(repo.dir, dir);
  return { outer, dir, calls: repo.calls };
}

/** Sets grader.protected of a task repository's config to `globs`, committed. */
function protect(repo: ReturnType<typeof makeTaskRepo>, ...globs: string[]): void {
  const file = join(repo.dir, '.github', 'autoresearch.yml');
  writeFileSync(file, readFileSync(file, 'utf8').replace(/protected: \[[^\]]*\]/, `protected: [${globs.join(', ')}]`));
  repo.git('commit', '-qam', `protect ${globs.join(' ')}`);
}

describe('bad input on the local CLI path', () => {
  it('grader.command of only spaces is refused like an empty one, before any agent runs', async () => {
    // Before: `command: ""` is refused (grader.command must not be empty), but `command: "   "`
    // passes --dry-run (exit 0, "the checks passed"); the run starts agents, every episode gets
    // "the grader printed nothing on stdout", and the run stops with exit 1 after spending.
    const repo = makeTaskRepo({ ...small, grader: '"   "', extra: 'strategy: single-run' });
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/autoresearch\.yml:\d+:\d+: grader\.command/);
    expect(repo.calls()).toEqual([]);
  });

  it('agent.command of only spaces is refused like an empty one, before any episode is charged', async () => {
    // Before: `command: ""` is refused, `command: "   "` passes --dry-run; the run charges each
    // episode its whole allowance ("the agent wrote no usage file ... charged 6 tokens as an
    // estimate") and only then stops: here (single-run) exit 1, "no episode did any work"; with
    // fork-and-flush, after the opening round of 4, exit 2 "the agent ended without changing...".
    const repo = makeTaskRepo({ ...small, agentCommand: '"   "', extra: 'strategy: single-run' });
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/autoresearch\.yml:\d+:\d+: agent\.command/);
    expect(r.out + r.err).not.toMatch(EPISODE);
  });

  it('grader.protected: ["."] protects the journal (git reads "." as the whole tree) and is refused', async () => {
    // Before: "*" and "**" are refused ("protects the journal (NOTES.md)"), but "." passes --dry-run
    // with a wrong note ("grader.protected does not cover grade.sh"); git restores the whole tree,
    // every episode "changed protected paths", and the run stops with exit 1 after spending.
    const repo = makeTaskRepo({ ...small, extra: 'strategy: single-run' });
    protect(repo, '.');
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/grader\.protected/);
    expect(repo.calls()).toEqual([]);
  });

  it('journal: naming the script grader.command runs is refused before any agent starts', async () => {
    // Before: journal: grade.sh with grade.sh protected is refused, but with it unprotected the
    // dry run passes; each episode's journal lines are appended to the grader script, the judge
    // then fails ("grade.sh: 3: Syntax error: \"(\" unexpected") and the run stops with exit 1.
    const repo = makeTaskRepo({ ...small, extra: 'strategy: single-run\njournal: grade.sh' });
    protect(repo, 'agent.mjs');
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/journal/);
    expect(repo.calls()).toEqual([]);
  });

  it('sandbox.write naming a folder that holds the repository is refused (it shows the run folder to the agent)', async () => {
    // Before: the dry run passes and the run goes on. Run as an ordinary user, the agent then reads
    // (and may write) .forkflush/<run>/seal.key and state.json, which the README says the sandbox
    // hides (checked by hand). Run as root (here), the bind hides the episode's own places from the
    // agent's uid: "Cannot find module '.../workspaces/r2.b0/agent.mjs'" three times, then exit 2
    // after charging those episodes, naming the agent's crash, not sandbox.write. (With an agent
    // that runs anyway: "cannot create .../box/usage.json: Permission denied", estimates, exit 0.)
    const { outer, dir, calls } = repoInsideFolder(() => '');
    const config = readFileSync(join(dir, '.github', 'autoresearch.yml'), 'utf8');
    writeFileSync(
      join(dir, '.github', 'autoresearch.yml'),
      config.replace('  write: [', `  write: [${JSON.stringify(outer)}, `),
    );
    execGit(dir, 'commit', '-qam', 'share the folder');
    const r = await cli('run', dir);
    expect(r.code, r.err).toBe(2);
    expect(r.out + r.err, r.err).not.toMatch(EPISODE);
    expect(r.err).toMatch(/sandbox\.write/);
    expect(calls()).toEqual([]);
  });

  it('sandbox.read naming a folder that holds the repository is refused (it shows the seal key to the agent)', async () => {
    // Before: the dry run passes. Run as an ordinary user, the agent lists .forkflush/<run>/ and
    // reads seal.key (checked by hand: its bytes land in the agent's commit), exit 0. Run as root
    // (here), the read-only bind hides the agent's own workspace: "Cannot find module
    // '.../workspaces/r2.b0/agent.mjs'" three times, then exit 2 telling the user to fix the agent.
    const { dir, calls } = repoInsideFolder((outer) => `  read: [${JSON.stringify(outer)}]`);
    const r = await cli('run', dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/sandbox\.read/);
    expect(calls()).toEqual([]);
  });

  it("sandbox.read may name a folder of the repository (a dataset), not its .git or forkflush's runs folder", async () => {
    const shown =
      (...parts: string[]) =>
      (outer: string) =>
        `  read: [${JSON.stringify(join(outer, 'repo', ...parts))}]`;
    for (const inside of [['.git'], ['.forkflush', 'x']]) {
      const { dir } = repoInsideFolder(shown(...inside));
      mkdirSync(join(dir, ...inside), { recursive: true });
      const r = await cli('run', dir, '--dry-run');
      expect(r.code, r.err).toBe(2);
      const verb = inside.length === 1 ? 'is' : 'is inside';
      expect(r.err).toContain(`sandbox.read: ${join(dir, ...inside)} ${verb} ${join(dir, inside[0] as string)}`);
    }
    const { dir } = repoInsideFolder(shown('data'));
    mkdirSync(join(dir, 'data'));
    const r = await cli('run', dir, '--dry-run');
    expect(r.code, r.err).toBe(0);
  });

  it("a run in a git worktree: sandbox.read naming the repository's git folder (the main checkout's .git) is refused", async () => {
    // In a worktree, <worktree>/.git is a file and the git folder every worktree shares is the main
    // checkout's .git. Before, the pre-flight knew only <worktree>/.git and passed this; the episode
    // bound that folder over its hiding, and the agent read the whole .git (a token in a remote's
    // URL, every branch of the run); with sandbox.write, it could write its hooks (found by a review).
    const repo = makeTaskRepo({ ...small, extra: 'strategy: single-run' });
    const wt = join(mkdtempSync(join(tmpdir(), 'forkflush-worktree-')), 'wt');
    repo.git('worktree', 'add', '-q', '-b', 'work', wt);
    const file = join(wt, '.github', 'autoresearch.yml');
    const shared = JSON.stringify(join(repo.dir, '.git'));
    writeFileSync(file, readFileSync(file, 'utf8').replace('  write: [', `  read: [${shared}]\n  write: [`));
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qam', 'read the data'], { cwd: wt });
    const r = await cli('run', wt, '--dry-run');
    expect(r.code, r.out + r.err).toBe(2);
    expect(r.err).toMatch(/sandbox\.read: .*\.git/);
    expect(repo.calls()).toEqual([]);
  });

  it('sandbox.read of a dataset inside the repository (ignored by git) reaches the agent in its run', async () => {
    // What the pre-flight suggests for a repository's data. A bind inside the repository, which the
    // sandbox hides, is not one of forkflush's own places (its .git, the runs folder): it is shown.
    const repo = makeTaskRepo({ ...small, extra: 'strategy: single-run', agentCommand: 'sh agent.sh' });
    const data = join(repo.dir, 'data');
    mkdirSync(data);
    writeFileSync(join(data, 'v.txt'), '7\n');
    writeFileSync(join(repo.dir, '.gitignore'), 'data/\n');
    writeFileSync(
      join(repo.dir, 'agent.sh'),
      `cat ${JSON.stringify(join(data, 'v.txt'))} > value.txt\necho '{"spent": 6}' > "$FORKFLUSH_USAGE_FILE"\n`,
    );
    const file = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace('  write: [', `  read: [${JSON.stringify(data)}]\n  write: [`),
    );
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'the data, read from the repository');
    const r = await cli('run', repo.dir);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/r0\.b0 scored 7\b/);
  });

  it('an empty task file is refused, naming it, before any agent starts', async () => {
    // Before: TASK.md of zero bytes passes --dry-run with no note, and every episode's prompt
    // quotes an empty task.
    const repo = makeTaskRepo({ ...small, extra: 'strategy: single-run' });
    writeFileSync(join(repo.dir, 'TASK.md'), '');
    repo.git('commit', '-qam', 'empty task');
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/TASK\.md/);
    expect(repo.calls()).toEqual([]);
  });

  it('init DIR where DIR is a file: exit 2 saying it is not a folder, not a raw EEXIST', async () => {
    // Before: "forkflush: failed: EEXIST: file already exists, mkdir '<DIR>'", exit 1 (run, status,
    // resume, compare and map say "<DIR> is not a folder: name the task's repository", exit 2).
    const dir = mkdtempSync(join(tmpdir(), 'forkflush-initfile-'));
    const file = join(dir, 'notes.txt');
    writeFileSync(file, 'x\n');
    const args = ['--grader', 'sh grade.sh', '--agent-command', 'sh agent.sh', '--budget', '5', '--unit', 'tokens'];
    const r = await cli('init', file, ...args, '--yes');
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain('is not a folder');
    expect(r.err).not.toMatch(/EEXIST|ENOTDIR/);
    // A file where init makes a folder (.github) is named, and nothing is left half-written.
    const repo = mkdtempSync(join(tmpdir(), 'forkflush-initgithub-'));
    writeFileSync(join(repo, '.github'), 'x\n');
    const inside = await cli('init', repo, ...args, '--yes');
    expect(inside.code, inside.err).toBe(2);
    expect(inside.err).toContain(`${join(repo, '.github')} is a file where init would make a folder`);
    expect(readdirSync(repo)).toEqual(['.github']);
  });

  it('plan and probe of a file, --config of a folder, --dry-run with --smoke, branches past 64: each named, exit 2', async () => {
    // Before: "no config at <file>/.github/autoresearch.yml: create it with forkflush init <file>";
    // "no config at <folder>"; --smoke started the agent a dry run promises not to start; and past
    // 64 branches a second error told to lower fork.branch_budget "to at most 0".
    const repo = makeTaskRepo({ ...small, extra: 'strategy: single-run' });
    const file = join(repo.dir, 'grade.sh');
    for (const command of ['plan', 'probe']) {
      const r = await cli(command, file);
      expect([r.code, r.err.trim()]).toEqual([
        2,
        `forkflush: ${file} is not a folder: name the task's repository (or folder)`,
      ]);
    }
    const folder = await cli('plan', repo.dir, '--config', join(repo.dir, '.github'));
    expect(folder.code).toBe(2);
    expect(folder.err).toContain(`${join(repo.dir, '.github')} is a folder: name the config file itself`);
    const both = await cli('run', repo.dir, '--dry-run', '--smoke');
    expect([both.code, both.err.trim()]).toEqual([
      2,
      'forkflush: --dry-run starts no agent and --smoke starts one: give one of them',
    ]);
    expect(repo.calls()).toEqual([]);
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(config, readFileSync(config, 'utf8').replace('strategy: single-run', 'fork:\n  branches: 100000'));
    const wide = await cli('plan', repo.dir);
    expect(wide.code).toBe(2);
    expect(wide.err).toContain('fork.branches must be at most 64, got 100000');
    expect(wide.err).not.toContain('branch_budget');
  });

  it('a config of two YAML documents says so, not "please use YAML.parseAllDocuments()"', async () => {
    // Before: ".github/autoresearch.yml:N:1: not valid YAML: Source contains multiple documents;
    // please use YAML.parseAllDocuments()": advice to the library's caller, not to the user.
    const repo = makeTaskRepo({ ...small, extra: '---\nstrategy: single-run' });
    const r = await cli('plan', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/autoresearch\.yml:\d+:\d+: /);
    expect(r.err).not.toContain('parseAllDocuments');
    expect(r.err).toMatch(/---|document/);
  });
});

function execGit(dir: string, ...args: string[]): void {
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir });
}
