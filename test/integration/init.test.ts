// `forkflush init`: a task from flags or from questions, a config forkflush can run, files it
// never overwrites without --force, workflows for the chosen agent, and the grader tried once.
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the strings hold GitHub Actions expressions
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { cli, cliWith } from './cli-io.js';

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
    commit(dir);
    const plan = await cli('plan', dir);
    expect(plan.code).toBe(0);
    expect(plan.out).toContain('budget 60 tokens');
    const dry = await cli('run', dir, '--dry-run');
    expect(dry.err).toBe('');
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

  it('with --github writes both workflows with the agent secret and the action reference', async () => {
    const dir = folder();
    const r = await cli('init', dir, '--grader', 'sh grade.sh', '--agent', 'codex', '--github', '--yes');
    expect(r.code).toBe(0);
    const worker = read(dir, '.github/workflows/forkflush.yml');
    expect(worker).toContain('OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}');
    expect(worker).not.toContain('ANTHROPIC_API_KEY');
    expect(r.out).toContain('replace your-org/forkflush@v1 with the forkflush repository');
    for (const f of ['forkflush.yml', 'autoresearch.yml'])
      expect(() => parse(read(dir, `.github/workflows/${f}`))).not.toThrow();
    expect(parse(read(dir, '.github/autoresearch.yml')).budget).toEqual({ total: 20, unit: 'usd' });

    const pinned = folder();
    await cli(
      'init',
      pinned,
      '--grader',
      'sh grade.sh',
      '--agent',
      'claude-code',
      '--github',
      '--action',
      'acme/forkflush@v2.1.0',
      '--yes',
    );
    const both = read(pinned, '.github/workflows/forkflush.yml') + read(pinned, '.github/workflows/autoresearch.yml');
    expect(both).not.toContain('your-org/forkflush');
    expect(both).toContain('acme/forkflush');
    expect(read(pinned, '.github/workflows/forkflush.yml')).toContain(
      'ANTHROPIC_API_KEY: ${{ secrets.ANTHROPIC_API_KEY }}',
    );
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

  it('needs a grader, says which answer is wrong, and shows the grader error', async () => {
    const dir = folder();
    const none = await cli('init', dir);
    expect(none.code).toBe(2);
    expect(none.err).toContain('The command that prints the score (its last line is the score): give it as a flag');
    expect(existsSync(join(dir, '.github'))).toBe(false);
    const bad = await cli('init', dir, '--grader', 'sh grade.sh', '--direction', 'up', '--yes');
    expect(bad.err).toContain('--direction must be maximize or minimize, got "up"');
    const agent = await cli('init', dir, '--grader', 'sh grade.sh', '--agent', 'gpt', '--yes');
    expect(agent.err).toMatch(/--agent must be one of command, claude-code, .*got "gpt"/);
    const broken = await cli('init', dir, '--grader', 'node missing.mjs', '--agent', 'aider', '--yes');
    expect(broken.code).toBe(0);
    expect(broken.out).toMatch(/no score yet \(exit 1: Error: Cannot find module '.*missing\.mjs'/);
  });
});
