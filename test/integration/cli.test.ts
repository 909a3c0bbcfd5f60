// The command line as a user meets it: exit codes and messages, never a stack trace.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

describe('forkflush CLI', () => {
  it('prints the plan of a repository', async () => {
    const repo = makeTaskRepo();
    const r = await cli('plan', repo.dir);
    expect(r.code).toBe(0);
    expect(r.out).toContain('strategy fork-and-flush, budget 100 tokens, K = 4');
    expect(r.out).toMatch(/opening\s+fork round\s+4/);
    const single = await cli('plan', repo.dir, '--strategy', 'single-run', '--budget', '60');
    expect(single.out).toMatch(/solo\s+serial\s+1\s+10\s+6\s+60\s+60 \(100%\)/);
    // One branch at a time: no K to speak of.
    expect(single.out).toContain('strategy single-run, budget 60 tokens\n');
    // The notes a run would print first are on its plan too.
    const tiny = await cli('plan', repo.dir, '--budget', '5');
    expect(tiny.err).toMatch(/^forkflush: note: the smallest episode gets [\d.]+ tokens, less than one token/m);
    const json = JSON.parse((await cli('plan', repo.dir, '--budget', '5', '--json')).out);
    expect(json.warnings).toEqual([expect.stringMatching(/less than one token/)]);
  });

  it('explains a bad config with file, line, key and fix, and exits 2', async () => {
    const repo = makeTaskRepo({ extra: 'forks:\n  branches: 3\nfork:\n  at: [0.5, 1.5]' });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain('forkflush: the config is not valid:');
    expect(r.err).toMatch(/autoresearch\.yml:\d+:1: unknown key "forks"; did you mean "fork"\?/);
    expect(r.err).toMatch(/autoresearch\.yml:\d+:\d+: fork\.at\[1\] must be between 0 and 1 \(exclusive\), got 1\.5/);
    expect(r.err).not.toMatch(/\n\s+at /);
  });

  it.each([
    [['run', '.', '--budget=-3'], '--budget must be a number above 0, got "-3"'],
    [['run', '.', '--budget', 'lots'], '--budget must be a number above 0, got "lots"'],
    [['run', '.', '--branches', '2.5'], '--branches must be a whole number from 1 to 64, got "2.5"'],
    [
      ['run', '.', '--strategy', 'fork-and-flash'],
      '--strategy must be one of fork-and-flush, single-run, best-of-n, fork-only, flush-only, got "fork-and-flash"',
    ],
    [['run', '.', '--forks', '2'], 'forkflush run has no flag --forks (see forkflush help run)'],
    [['status', '.', '--budget', '3'], 'forkflush status has no flag --budget (see forkflush help status)'],
    [['run', '.', '--budget', '-1'], '--budget must be a number above 0, got "-1"'],
    [['plan', '.', '--branches', '-2'], '--branches must be a whole number from 1 to 64, got "-2"'],
    // Before: Number() read a hexadecimal or binary figure, so a seed 0x10 ran as seed 16.
    [['run', '.', '--seed', '0x10'], '--seed must be a whole number from 0, got "0x10"'],
    [['run', '.', '--budget', '0b11'], '--budget must be a number above 0, got "0b11"'],
    [['launch'], 'unknown command "launch"'],
    [['runn', '.'], 'unknown command "runn"; did you mean "run"?'],
    [
      ['run', '.', '--budjet', '5'],
      'forkflush run has no flag --budjet; did you mean --budget? (see forkflush help run)',
    ],
    [['run', '.', '--dryrun'], 'forkflush run has no flag --dryrun; did you mean --dry-run? (see forkflush help run)'],
    [['run', '.', '--budget'], '--budget needs a value: --budget N (see forkflush help run)'],
    [['run', '.', '--config', ''], '--config is empty: give it a value (--config FILE), or leave it out'],
    [['run', '/no/such/folder'], '/no/such/folder is not a folder'],
    // Before: the last of the two was taken without a word.
    [['run', '.', '--budget', '10', '--budget=20'], '--budget is given twice (10 and 20): give it once'],
  ])('rejects %j with a clear message', async (argv, message) => {
    const r = await cli(...argv);
    expect(r.code).toBe(2);
    expect(r.err).toContain(message);
  });

  it('says where the config should be when there is none, and how to make it', async () => {
    const repo = makeTaskRepo();
    const r = await cli('run', repo.dir, '--config', join(repo.dir, 'missing.yml'));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/no config at .*missing\.yml: check the file --config names/);
    const bare = mkdtempSync(join(tmpdir(), 'bare-'));
    const none = await cli('plan', bare);
    expect(none.code).toBe(2);
    expect(none.err).toContain(
      `no config at ${join(bare, '.github', 'autoresearch.yml')}: create .github/autoresearch.yml with \`forkflush init ${bare}\``,
    );
    // A config at a path people expect (.yaml): the file found is named, and where it goes.
    mkdirSync(join(bare, '.github'));
    writeFileSync(join(bare, '.github', 'autoresearch.yaml'), 'grader: {command: x}\n');
    expect((await cli('run', bare)).err).toContain(
      '.github/autoresearch.yaml is not read: forkflush reads .github/autoresearch.yml (move or rename it there)',
    );
    // A bare repository has no files to work on: the clone to make is named.
    const bareRepo = mkdtempSync(join(tmpdir(), 'bare-'));
    execFileSync('git', ['init', '-q', '--bare', bareRepo]);
    for (const command of ['run', 'compare', 'map'])
      expect((await cli(command, bareRepo)).err).toContain(
        `${bareRepo} is a bare repository (no files to work on): clone it and name the clone, as in \`git clone ${bareRepo} task && forkflush run task\``,
      );
    // Run from a folder of the task: the task's folder is named.
    const sub = join(repo.dir, 'src');
    mkdirSync(sub);
    const below = await cli('run', sub);
    expect(below.code).toBe(2);
    expect(below.err).toContain(
      `no config at ${join(sub, '.github', 'autoresearch.yml')}, but ${repo.dir} above it has one (.github/autoresearch.yml): name that folder instead, as in \`forkflush run ${repo.dir}\``,
    );
  });

  it('names the task file when it is missing, and a bad prompt template', async () => {
    const repo = makeTaskRepo({ extra: 'task: GOAL.md' });
    expect((await cli('run', repo.dir)).err).toContain('task: GOAL.md is not in the repository');
    const other = makeTaskRepo({ extra: 'prompts:\n  branch: prompts/branch.md' });
    writeFileSync(join(other.dir, 'branch.md'), '');
    mkdirSync(join(other.dir, 'prompts'));
    writeFileSync(join(other.dir, 'prompts', 'branch.md'), 'Do it.\n{{budget}}\n');
    other.git('add', '-A');
    other.git('commit', '-qm', 'template');
    const r = await cli('run', other.dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain('prompts/branch.md:2: unknown placeholder {{budget}}');
  });

  it('runs, shows status, and says a finished run is finished', async () => {
    const repo = makeTaskRepo({ budget: 'total: 12\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' });
    const run = await cli('run', repo.dir, '--seed', '3');
    expect(run.code).toBe(0);
    expect(run.out).toContain('forkflush run 20261130-100000: single-run, budget 12 tokens, seed 3');
    expect(run.out).toMatch(/\[00:\d\d\] r0\.b0 scored \d+, spent 5\.4 tokens/);
    expect(run.out).toMatch(/Best score: \d+ from round \d, branch 0, on branch forkflush\/20261130-100000\/best/);
    expect(run.out).toContain('report:  ');
    const status = await cli('status', repo.dir);
    expect(status.code).toBe(0);
    expect(status.out).toContain('run 20261130-100000');
    expect(status.out).toContain(': finished.');
    const resume = await cli('resume', repo.dir);
    expect(resume.out).toContain('run 20261130-100000 is already finished.');
    expect((await cli('status', repo.dir, '--run', 'nope')).err).toContain('no run nope in');
  });

  it('prints the JSON Schema', async () => {
    const r = await cli('schema');
    expect(JSON.parse(r.out).properties.strategy.enum).toContain('fork-and-flush');
  });
});

describe('one process per run', () => {
  it('two processes taking one run at once, fresh or from a holder that is gone (a reboot), never both get it', async () => {
    // The lock was made empty and then written, and a stale one removed and then made again: a
    // process that read it empty, or had read the stale one too, removed the other's fresh lock,
    // and both drove the run, resetting each other's workspaces (found by a review).
    const dir = mkdtempSync(join(tmpdir(), 'forkflush-lock-'));
    const script = join(dir, 'take.cjs');
    const { build } = await import('esbuild');
    writeFileSync(
      join(dir, 'take.ts'),
      `import { RunStore } from ${JSON.stringify(join(import.meta.dirname, '..', '..', 'src', 'local', 'store.ts'))};
const [run, at] = process.argv.slice(2);
while (Date.now() < Number(at)) {}
new RunStore(run).lock().then(
  () => { console.log('took'); setTimeout(() => process.exit(0), 120_000); },
  () => { console.log('refused'); process.exit(0); },
);
`,
    );
    await build({
      entryPoints: [join(dir, 'take.ts')],
      outfile: script,
      bundle: true,
      platform: 'node',
      format: 'cjs',
    });
    // A taker holds the lock until both have answered: on a busy machine the second one started
    // after a holder that let go after 300 ms had exited, and took a lock that was free by then.
    const take = (run: string, at: number) => {
      const child = spawn(process.execPath, [script, run, String(at)], { stdio: ['ignore', 'pipe', 'inherit'] });
      const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
      const said = new Promise<string>((resolve) => {
        let out = '';
        child.stdout.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          if (out.includes('\n')) resolve(out.trim());
        });
        void closed.then(() => resolve(out.trim()));
      });
      const done = () => {
        child.kill('SIGKILL');
        return closed;
      };
      return { said, done };
    };
    // A pid that is surely gone: a process that ran and was reaped.
    const dead = spawnSync('sh', ['-c', 'echo $$']).stdout.toString().trim();
    const outcomes: string[] = [];
    for (let i = 0; i < 30; i++) {
      const run = join(dir, `run-${i}`);
      mkdirSync(run);
      if (i % 2 === 0) writeFileSync(join(run, 'lock'), dead);
      const at = Date.now() + 400;
      const both = [take(run, at), take(run, at)];
      outcomes.push((await Promise.all(both.map((t) => t.said))).sort().join(' '));
      await Promise.all(both.map((t) => t.done()));
    }
    expect(new Set(outcomes)).toEqual(new Set(['refused took']));
  }, 120_000);

  it('refuses to resume a run another live process is driving', async () => {
    const repo = makeTaskRepo({ budget: 'total: 6\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' });
    await cli('run', repo.dir);
    const { readdirSync } = await import('node:fs');
    const [id] = readdirSync(join(repo.dir, '.forkflush'));
    // PID 1 is always alive: as if another forkflush were driving this run.
    writeFileSync(join(repo.dir, '.forkflush', id as string, 'lock'), '1');
    const { readFileSync } = await import('node:fs');
    const state = JSON.parse(readFileSync(join(repo.dir, '.forkflush', id as string, 'state.json'), 'utf8'));
    state.status = 'running';
    writeFileSync(join(repo.dir, '.forkflush', id as string, 'state.json'), JSON.stringify(state));
    const r = await cli('resume', repo.dir);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/is being driven by process 1: stop it first/);
  });

  it("refuses before it starts a repository whose branch forkflush would block the run's branches", async () => {
    const repo = makeTaskRepo({ budget: 'total: 6\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' });
    repo.git('branch', 'forkflush');
    const r = await cli('run', repo.dir, '--dry-run');
    expect(r.code).toBe(2);
    expect(r.err).toContain('the branch forkflush blocks the branches a run makes');
  });

  it('names a sandbox.write folder that does not exist before it starts (a sandbox.read one in a note)', async () => {
    const repo = makeTaskRepo({ budget: 'total: 6\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    const text = readFileSync(config, 'utf8').replace(
      /sandbox:\n {2}write: \[(.*)\]/,
      'sandbox:\n  write: [$1, /nonexistent/ff-w]\n  read: [/nonexistent/ff-r]',
    );
    writeFileSync(config, text);
    repo.git('commit', '-qam', 'sandbox folders');
    const r = await cli('run', repo.dir, '--dry-run');
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain('sandbox.write: /nonexistent/ff-w does not exist (the sandbox cannot bind it)');
    writeFileSync(config, text.replace(', /nonexistent/ff-w', ''));
    repo.git('commit', '-qam', 'no such write folder');
    const read = await cli('run', repo.dir, '--dry-run');
    expect(read.code, read.err).toBe(0);
    expect(read.err).toContain('sandbox.read: /nonexistent/ff-r does not exist, so it shows the agent nothing');
  });

  it('says a run whose folder moved cannot go on from the new one, and how to go on', async () => {
    const repo = makeTaskRepo({ budget: 'total: 6\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' });
    await cli('run', repo.dir);
    const moved = `${repo.dir}-moved`;
    renameSync(repo.dir, moved);
    const r = await cli('resume', moved);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`was made in ${repo.dir}, which is gone (the folder moved?)`);
    expect(r.err).toContain(`forkflush run ${moved}`);
    renameSync(moved, repo.dir);
  });
});
