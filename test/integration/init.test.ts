// `forkflush init`: a task from flags or from questions, a config forkflush can run, files it
// never overwrites without --force, workflows for the chosen agent, and the grader tried once.
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the strings hold GitHub Actions expressions
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { cli, cliWith } from './cli-io.js';

/** A dry run's whole stderr that says only that TASK.md still has init's line for the user to replace. */
const UNWRITTEN_TASK_ONLY =
  /^forkflush: note: task: TASK\.md still has the line init wrote for you to replace \("Describe the problem here[^\n]*\n$/;

function folder(files: Record<string, string> = { 'grade.sh': 'echo 42\n' }): string {
  const dir = mkdtempSync(join(tmpdir(), 'forkflush-init-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  execFileSync('git', ['init', '-q', '--initial-branch=main'], { cwd: dir });
  return dir;
}
const read = (dir: string, path: string) => readFileSync(join(dir, path), 'utf8');
const commit = (dir: string) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'add', '-A'], { cwd: dir }) &&
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'task'], { cwd: dir });

describe('forkflush init', () => {
  it('writes a task from flags that forkflush can plan and dry-run, and grades it once', async () => {
    const dir = folder();
    const r = await cli(
      'init',
      dir,
      '--grader',
      'sh grade.sh',
      '--direction',
      'minimize',
      '--agent',
      'command',
      '--agent-command',
      'node agent.mjs',
      '--budget',
      '60',
      '--unit',
      'tokens',
      '--protected',
      'grade.sh',
      '--protected',
      'data/**',
      '--yes',
    );
    expect(r.code).toBe(0);
    for (const f of ['.github/autoresearch.yml', '.github/autoresearch.schema.json', 'TASK.md', 'NOTES.md']) {
      expect(r.out).toContain(`wrote ${f}\n`);
    }
    expect(r.out).toContain('grading the workspace as it is now: sh grade.sh\n  score: 42');
    expect(r.out).toContain(`forkflush run ${dir}`);
    const config = read(dir, '.github/autoresearch.yml');
    expect(config.split('\n')[0]).toBe('# yaml-language-server: $schema=./autoresearch.schema.json');
    expect(parse(config)).toMatchObject({
      grader: { command: 'sh grade.sh', direction: 'minimize', protected: ['grade.sh', 'data/**'] },
      agent: { kind: 'command', command: 'node agent.mjs' },
      budget: { total: 60, unit: 'tokens' },
    });
    expect(JSON.parse(read(dir, '.github/autoresearch.schema.json')).properties.grader).toBeDefined();
    expect(read(dir, 'TASK.md')).toContain('It is the last line that `sh grade.sh` prints; lower is better.');
    writeFileSync(join(dir, 'agent.mjs'), '');
    // What data/** protects (a glob that matches no file gets a note in the dry run).
    mkdirSync(join(dir, 'data'));
    writeFileSync(join(dir, 'data', 'instance.txt'), '1\n');
    commit(dir);
    const plan = await cli('plan', dir);
    expect(plan.code).toBe(0);
    expect(plan.out).toContain('budget 60 tokens');
    const dry = await cli('run', dir, '--dry-run');
    // Only that TASK.md still asks to be written: the task file init left for the user.
    expect(dry.err).toMatch(UNWRITTEN_TASK_ONLY);
    expect([dry.code, dry.out]).toEqual([0, expect.stringContaining('initial workspace: score 42')]);
  });

  it('never overwrites a file without --force, and keeps TASK.md and NOTES.md that exist', async () => {
    const dir = folder({ 'grade.sh': 'echo 1\n', 'TASK.md': 'my task\n' });
    const args = ['init', dir, '--grader', 'sh grade.sh', '--agent-command', 'true', '--yes'];
    expect((await cli(...args)).code).toBe(0);
    expect(read(dir, 'TASK.md')).toBe('my task\n');
    writeFileSync(join(dir, '.github/autoresearch.yml'), '# mine\n');
    const again = await cli(...args);
    expect(again.code).toBe(0);
    expect(again.out).toContain('kept .github/autoresearch.yml: it exists (--force overwrites it)');
    expect(read(dir, '.github/autoresearch.yml')).toBe('# mine\n');
    const forced = await cli(...args, '--force');
    expect(forced.out).toContain('wrote .github/autoresearch.yml');
    expect(read(dir, '.github/autoresearch.yml')).toContain('command: "sh grade.sh"');
    expect(read(dir, 'TASK.md')).toBe('my task\n');
  });

  it('with --github writes the three workflows with the agent secret and the action reference', async () => {
    const dir = folder();
    const r = await cli('init', dir, '--grader', 'sh grade.sh', '--agent', 'codex', '--github', '--yes');
    expect(r.code).toBe(0);
    const worker = read(dir, '.github/workflows/forkflush.yml');
    expect(worker).toContain('OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}');
    expect(worker).not.toContain('ANTHROPIC_API_KEY');
    expect(r.out).toMatch(/replace your-org\/forkflush@\S+ with the forkflush repository/);
    for (const f of ['forkflush.yml', 'autoresearch.yml', 'autoresearch-tick.yml'])
      expect(() => parse(read(dir, `.github/workflows/${f}`))).not.toThrow();
    expect(parse(read(dir, '.github/autoresearch.yml')).budget).toEqual({ total: 20, unit: 'usd' });

    // github.com's acme/forkflush, a repository here with the annotated tag v2.1.0 (git's own
    // url.<base>.insteadOf, so that init resolves the tag as it would on GitHub).
    const hub = mkdtempSync(join(tmpdir(), 'forkflush-hub-'));
    const action = folder({ 'action.yml': 'name: forkflush\n' });
    commit(action);
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'tag', '-a', 'v2.1.0', '-m', 'v2.1.0'], {
      cwd: action,
    });
    execFileSync('git', ['clone', '-q', '--bare', action, join(hub, 'acme', 'forkflush')]);
    const sha = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: action, encoding: 'utf8' }).trim();
    const env = {
      ...process.env,
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: `url.file://${hub}/.insteadOf`,
      GIT_CONFIG_VALUE_0: 'https://github.com/',
    };
    const initWith = (dir: string, ref: string) =>
      cliWith(
        ['init', dir, '--grader', 'sh grade.sh', '--agent', 'claude-code', '--github', '--action', ref, '--yes'],
        { env },
      );
    const pinned = folder();
    const r2 = await initWith(pinned, 'acme/forkflush@v2.1.0');
    expect(r2.out).toContain(`The workflows use acme/forkflush@${sha} (v2.1.0, pinned to its commit).`);
    const both = read(pinned, '.github/workflows/forkflush.yml') + read(pinned, '.github/workflows/autoresearch.yml');
    expect(both).not.toContain('your-org/forkflush');
    expect(read(pinned, '.github/workflows/forkflush.yml')).toContain(`      - uses: acme/forkflush@${sha} # v2.1.0\n`);
    expect(read(pinned, '.github/workflows/autoresearch.yml')).toContain(`ref: ${sha} # v2.1.0\n`);
    expect(read(pinned, '.github/workflows/autoresearch-tick.yml')).toContain(`ref: ${sha} # v2.1.0\n`);
    // A tag that is not there: written as given, and the user told how to pin it.
    const unpinned = folder();
    const r3 = await initWith(unpinned, 'acme/forkflush@v9.9.9');
    expect(read(unpinned, '.github/workflows/forkflush.yml')).toContain('      - uses: acme/forkflush@v9.9.9\n');
    expect(r3.out).toMatch(
      /Note: the workflows use acme\/forkflush@v9\.9\.9, a tag, not its commit \(https:\/\/github\.com\/acme\/forkflush has no tag v9\.9\.9\); pin it: `git ls-remote/,
    );
    expect(read(pinned, '.github/workflows/forkflush.yml')).toContain(
      'ANTHROPIC_API_KEY: ${{ secrets.ANTHROPIC_API_KEY }}',
    );
    // What is no reference of an Action: refused before anything is written.
    for (const bad of ['not a ref', 'acme/forkflush', 'acme@v1']) {
      const dir = folder();
      const r = await initWith(dir, bad);
      expect(r.code, bad).toBe(2);
      expect(r.err).toContain(`--action: ${JSON.stringify(bad)} is not OWNER/REPO@REF`);
      expect(existsSync(join(dir, '.github'))).toBe(false);
    }
  });

  it('asks on a terminal, offering the files the grader names as protected', async () => {
    const dir = folder({ 'score.py': 'print(7)\n' });
    const r = await cliWith(['init', dir], {
      answers: ['the share of tests passed', 'python3 score.py', '', 'none', 'command', './agent.sh', '', '200', ''],
    });
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain('The command that prints the score (its last line is the score)?: ');
    expect(r.out).toContain('Paths the agent must not change (comma-separated)? [score.py]: ');
    expect(parse(read(dir, '.github/autoresearch.yml'))).toMatchObject({
      grader: { command: 'python3 score.py', direction: 'maximize', protected: ['score.py'] },
      agent: { command: './agent.sh' },
      budget: { total: 200, unit: 'tokens' },
    });
    expect(read(dir, 'TASK.md')).toContain('the share of tests passed. It is the last line');
  });

  it('needs a grader and an agent command, naming the flag that gives each, and says which answer is wrong', async () => {
    const dir = folder();
    const none = await cli('init', dir);
    expect([none.code, none.err]).toEqual([
      2,
      "forkflush: no grader given: pass --grader '<command>' (or run init on a terminal to be asked)\n",
    ]);
    expect(existsSync(join(dir, '.github'))).toBe(false);
    const yes = await cli('init', dir, '--grader', 'sh grade.sh', '--yes');
    expect(yes.err).toBe(
      "forkflush: no agent command given: pass --agent-command '<command>' (or run init on a terminal without --yes to be asked)\n",
    );
    const typed = await cliWith(['init', dir], { answers: ['', ''] });
    expect(typed.err).toBe("forkflush: no grader given: pass --grader '<command>' (or type one when asked)\n");
    const bad = await cli('init', dir, '--grader', 'sh grade.sh', '--direction', 'up', '--yes');
    expect(bad.err).toContain('--direction must be maximize or minimize, got "up"');
    const agent = await cli('init', dir, '--grader', 'sh grade.sh', '--agent', 'gpt', '--yes');
    expect(agent.err).toMatch(/--agent must be one of command, claude-code, .*got "gpt"/);
    expect(existsSync(join(dir, '.github'))).toBe(false);
    // Answers that make a config forkflush refuses are said of the answers: no file:line of a file
    // init has not written (review: it cited ".github/autoresearch.yml:3:1").
    const small = await cli(
      'init',
      dir,
      '--grader',
      'sh grade.sh',
      '--agent-command',
      'sh a.sh',
      '--budget',
      '6',
      '--unit',
      'evaluations',
      '--yes',
    );
    expect(small.code).toBe(2);
    expect(small.err).toMatch(
      /^forkflush: these answers make a config forkflush would refuse, so nothing was written:\n {2}fork\.branch_budget: .*raise budget\.total to at least \d+/,
    );
    expect(small.err).not.toContain('autoresearch.yml:');
    expect(existsSync(join(dir, '.github'))).toBe(false);
  });

  it('calls a grader that cannot run a problem, not a task that starts from nothing, and still writes the task', async () => {
    const dir = folder({ 'grade.sh': 'test -f solution.txt || { echo "no solution.txt yet" >&2; exit 1; }\n' });
    const agent = ['--agent', 'aider', '--yes'];
    const missing = await cli('init', dir, '--grader', 'node g.mjs', ...agent);
    expect(missing.code).toBe(0);
    expect(missing.out).toContain('wrote .github/autoresearch.yml\n');
    expect(missing.out).toMatch(
      /problem: the grader cannot run: .*\/g\.mjs does not exist \(exit 1: Error: Cannot find module '.*g\.mjs'\)\.\n {2}Write it/,
    );
    expect(missing.out).not.toContain('That is fine');
    // The steps commit the file the problem says to write.
    expect(missing.out).toContain('Next, once the problems above are fixed: commit the task');
    expect(missing.out).toMatch(/ add \.github TASK\.md NOTES\.md g\.mjs && /);

    const notFound = await cli('init', dir, '--grader', 'no-such-grader-program', '--force', ...agent);
    expect(notFound.out).toMatch(
      /problem: the grader cannot run: a program it runs is not found \(exit 127: .*no-such-grader-program: not found\)/,
    );
    expect(notFound.out).not.toContain('That is fine');

    const empty = await cli('init', dir, '--grader', 'sh grade.sh', '--force', ...agent);
    expect(empty.out).toContain(
      '  no score yet (exit 1: no solution.txt yet). That is fine for a task that starts from nothing',
    );
    expect(empty.out).not.toContain('problem');
    expect(empty.out).toContain('\nNext: commit the task');
  });

  it("warns at init, as the run's pre-flight would, when the agent command's file does not exist", async () => {
    const dir = folder();
    const r = await cli('init', dir, '--grader', 'sh grade.sh', '--agent-command', './a.sh', '--yes');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/\nproblem: the agent cannot run: .*\/a\.sh, which agent\.command runs, does not exist\./);
    expect(r.out).toMatch(/ add \.github TASK\.md NOTES\.md grade\.sh a\.sh && /);
    writeFileSync(join(dir, 'a.sh'), '#!/bin/sh\n', { mode: 0o755 });
    const again = await cli('init', dir, '--grader', 'sh grade.sh', '--agent-command', './a.sh', '--force', '--yes');
    expect(again.out).not.toContain('problem');
    expect(again.out).toMatch(/ add \.github TASK\.md NOTES\.md grade\.sh a\.sh && /);
  });

  it('names the untracked files the grader read and adds them to its git add line; a commit without them fails the dry run, naming them', async () => {
    const dir = folder({ 'grade.sh': 'head -1 data/cities.tsp\n', 'notes-to-self.txt': 'not the task\n' });
    execFileSync('mkdir', [join(dir, 'data')]);
    writeFileSync(join(dir, 'data', 'cities.tsp'), '7\n');
    const r = await cli('init', dir, '--grader', 'sh grade.sh', '--agent-command', 'true', '--yes');
    expect(r.code).toBe(0);
    expect(r.out).toContain('  score: 7\n');
    expect(r.out).toContain(
      'the grader read a file that git does not have yet: data/cities.tsp.\nEpisodes are graded on the commit: the git add line below takes it.',
    );
    const add = r.out.split('\n').find((l) => l.includes(' commit -m ')) ?? '';
    expect(add).toContain(' data/cities.tsp ');
    expect(add).not.toContain('notes-to-self.txt');
    // Committed without it (what init printed before): the dry run grades the commit as the run will.
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, encoding: 'utf8' });
    git('add', '.github', 'TASK.md', 'NOTES.md', 'grade.sh');
    git('commit', '-qm', 'task');
    const dry = await cli('run', dir, '--dry-run');
    expect(dry.code).toBe(2);
    expect(dry.err).toContain('the initial workspace as committed gets no score (the grader exited with code 1');
    expect(dry.err).toContain(
      'but the working tree scores 7: episodes start from the commit, and the grader fails there because it reads a file git does not have: data/cities.tsp. Commit it (git add data/cities.tsp, git commit), then run again',
    );
    git('add', 'data/cities.tsp');
    git('commit', '-qm', 'the data');
    const fixed = await cli('run', dir, '--dry-run');
    expect(fixed.code, fixed.err).toBe(0);
    expect(fixed.err).toMatch(UNWRITTEN_TASK_ONLY);
    expect(fixed.out).toContain('initial workspace: score 7');
  });

  it('in a folder that is not a repository, prints next steps that work: git init first', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'forkflush-init-'));
    writeFileSync(join(dir, 'grade.sh'), 'echo 5\n');
    const r = await cli('init', dir, '--grader', 'sh grade.sh', '--agent-command', 'true', '--yes');
    expect(r.code).toBe(0);
    const steps = r.out.slice(r.out.indexOf('\nNext: ')).split('\n').slice(2, 4);
    expect(steps[0]).toBe(`  git init ${dir}`);
    const identity = {
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@t',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@t',
    };
    for (const step of steps) execFileSync('sh', ['-c', step], { env: { ...process.env, ...identity }, stdio: 'pipe' });
    const plan = await cli('plan', dir);
    expect([plan.code, plan.err]).toEqual([0, '']);
  });

  it('leaves no new folder behind when it fails', async () => {
    const base = mkdtempSync(join(tmpdir(), 'forkflush-init-'));
    const task = join(base, 'new', 'task');
    expect((await cli('init', task)).code).toBe(2);
    const outside = await cli(
      'init',
      task,
      '--grader',
      'true',
      '--agent-command',
      'true',
      '--protected',
      '../x',
      '--yes',
    );
    expect(outside.err).toContain('grader.protected[0] must be a path inside the repository');
    expect(existsSync(join(base, 'new'))).toBe(false);
  });

  it('with --github also prints the steps on GitHub: push, the secrets the agent needs, the issue and its label', async () => {
    const dir = folder();
    const claude = await cli('init', dir, '--grader', 'sh grade.sh', '--agent', 'claude-code', '--github', '--yes');
    const github = claude.out.slice(claude.out.indexOf('\nThen on GitHub'));
    expect(github).toContain('push the commit to the default branch');
    expect(github).toContain('    ANTHROPIC_API_KEY for claude-code (or CLAUDE_CODE_OAUTH_TOKEN');
    expect(github).toContain("FORKFLUSH_CONTEXT_KEY, which encrypts the agents' contexts: openssl rand -base64 32 |");
    expect(github).toContain('FORKFLUSH_APP_ID and FORKFLUSH_APP_PRIVATE_KEY');
    expect(github).toContain('open an issue that describes the task, and label it autoresearch\n');
    const codex = await cli('init', dir, '--grader', 'sh grade.sh', '--agent', 'codex', '--github', '--force', '--yes');
    expect(codex.out).toContain('    OPENAI_API_KEY for codex (or CODEX_AUTH_JSON');
    expect(codex.out).not.toContain('ANTHROPIC_API_KEY');
    const local = await cli('init', dir, '--grader', 'sh grade.sh', '--agent-command', 'true', '--force', '--yes');
    expect(local.out).not.toContain('on GitHub');
  });
});
