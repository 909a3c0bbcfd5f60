// A new user's first hour: help and version, JSON output, a setup that cannot work stops before it
// spends (uncommitted inputs, a missing agent, an agent that cannot start, a grader that scores
// nothing), run ids that never collide, and taking the result home.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { cli, cliWith, plainEnv } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

const runs = (dir: string) => (existsSync(join(dir, '.forkflush')) ? readdirSync(join(dir, '.forkflush')) : []);
const stateOf = (dir: string, id: string) =>
  JSON.parse(readFileSync(join(dir, '.forkflush', id, 'state.json'), 'utf8'));
const small = { budget: 'total: 12\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' };

describe('the CLI as a CLI', () => {
  it('prints its version with --version and -V', async () => {
    const { version } = JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8'));
    for (const flag of ['--version', '-V']) {
      const r = await cli(flag);
      expect([r.code, r.out]).toEqual([0, `forkflush ${version}\n`]);
    }
  });

  it('answers a bare forkflush with the usage on stderr and exit 2, and --help on stdout with exit 0', async () => {
    const bare = await cli();
    expect([bare.code, bare.out]).toEqual([2, '']);
    expect(bare.err).toContain('forkflush run [DIR]');
    const help = await cli('--help');
    expect([help.code, help.err]).toEqual([0, '']);
    expect(help.out).toBe(bare.err);
  });

  it("gives each command's help with only its own flags, three ways", async () => {
    const texts = await Promise.all([cli('help', 'run'), cli('run', '--help'), cli('run', '-h')]);
    for (const t of texts) expect([t.code, t.out]).toEqual([0, texts[0]?.out]);
    const run = texts[0]?.out ?? '';
    expect(run).toMatch(/^forkflush run: /);
    expect(run).toContain('--dry-run');
    expect(run).toContain('Examples:\n  forkflush run .');
    expect(run).not.toContain('--json');
    expect(run).not.toContain('--grader');
    const status = (await cli('help', 'status')).out;
    expect(status).toContain('--json');
    expect(status).not.toContain('--budget');
    expect((await cli('help', 'launch')).err).toContain('no command "launch"');
  });

  it('prints the plan as JSON', async () => {
    const repo = makeTaskRepo();
    const r = await cli('plan', repo.dir, '--json', '--branches', '3');
    expect(r.code).toBe(0);
    const json = JSON.parse(r.out);
    expect(json).toMatchObject({ strategy: 'fork-and-flush', budget: { total: 100, unit: 'tokens' }, branches: 3 });
    expect(json.phases[0]).toMatchObject({ phase: 'opening', branches: 3 });
    const spend = json.phases.map((p: { spend: number; budgetEach: number; branches: number; rounds: number }) => {
      expect(p.spend).toBeCloseTo(p.budgetEach * p.branches * p.rounds, 9);
      return p.spend;
    });
    expect(spend.reduce((a: number, b: number) => a + b, 0)).toBeCloseTo(100, 6);
    expect(json.phases.at(-1).cumulative).toBeCloseTo(100, 6);
  });

  it('counts progress time on the monotonic clock: a wall clock set back mid-run (NTP after a wake) shows no negative [mm:ss]', async () => {
    const repo = makeTaskRepo();
    const real = Date.now.bind(Date);
    let reads = 0;
    // The first reading is the run's start; from then on the wall clock reads two hours earlier.
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => (reads++ === 0 ? real() : real() - 2 * 3_600_000));
    try {
      const r = await cli('run', repo.dir, '--strategy', 'single-run', '--budget', '12');
      expect(r.code, r.err).toBe(0);
      const stamps = r.out.split('\n').flatMap((l) => /^\[([^\]]*)\]/.exec(l)?.[1] ?? []);
      expect(stamps.length).toBeGreaterThan(0);
      expect(stamps.filter((t) => t.includes('-'))).toEqual([]);
    } finally {
      spy.mockRestore();
    }
  }, 120_000);

  it('colours progress on a terminal unless NO_COLOR, and with FORCE_COLOR even in a pipe', async () => {
    // SGR colour codes; a terminal also gets cursor moves for the live footer, which are not colour.
    const colour = new RegExp(`${String.fromCharCode(27)}\\[[\\d;]*m`);
    const tty = await cliWith(['run', makeTaskRepo(small).dir], { tty: true, env: { ...plainEnv(), NO_COLOR: '' } });
    expect(tty.code).toBe(0);
    expect(tty.out).toMatch(colour);
    const none = await cliWith(['run', makeTaskRepo(small).dir], { tty: true, env: { ...plainEnv(), NO_COLOR: '1' } });
    expect(none.out).not.toMatch(colour);
    const forced = await cliWith(['run', makeTaskRepo(small).dir], { env: { ...plainEnv(), FORCE_COLOR: '1' } });
    expect(forced.out).toMatch(colour);
  });

  it('ends quietly when the reader closes the pipe', async () => {
    const cliJs = join(import.meta.dirname, '../../dist/cli.js');
    const child = spawn(process.execPath, [cliJs, 'schema'], { stdio: ['ignore', 'pipe', 'pipe'] });
    // Closed before the child has written anything: its first write meets a closed pipe.
    child.stdout.destroy();
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const code = await new Promise((done) => child.on('close', done));
    expect({ code, err }).toEqual({ code: 0, err: '' });
  });

  it('runs to its end when the reader of its output goes away (`| head -1`, a killed tee)', async () => {
    const repo = makeTaskRepo(small);
    const cliJs = join(import.meta.dirname, '../../dist/cli.js');
    const child = spawn(process.execPath, [cliJs, 'run', repo.dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    child.stderr.destroy();
    const code = await new Promise((done) => child.on('close', done));
    const [id] = runs(repo.dir) as [string];
    expect({ code, status: stateOf(repo.dir, id).status }).toEqual({ code: 0, status: 'finished' });
  });
});

describe('status', () => {
  it('tells a live run from an interrupted one, with the resume command, and prints JSON', async () => {
    const repo = makeTaskRepo(small);
    await cli('run', repo.dir);
    const [id] = runs(repo.dir) as [string];
    const folder = join(repo.dir, '.forkflush', id);
    const state = stateOf(repo.dir, id);
    state.status = 'running';
    writeFileSync(join(folder, 'state.json'), JSON.stringify(state));
    // A lock whose process is gone: interrupted.
    writeFileSync(join(folder, 'lock'), '999999999');
    const dead = await cli('status', repo.dir);
    expect(dead.out).toContain(`run ${id} (${folder}), interrupted`);
    expect(dead.out).toContain(`continue it with forkflush resume ${repo.dir} --run ${id}`);
    // A lock whose pid another process has now (after a reboot): its start time is not the lock's.
    writeFileSync(join(folder, 'lock'), '1 999999999999');
    expect((await cli('status', repo.dir)).out).toContain(`run ${id} (${folder}), interrupted`);
    const json = JSON.parse((await cli('status', repo.dir, '--json')).out);
    expect(json).toMatchObject({ run: id, status: 'interrupted', pid: null, strategy: 'single-run' });
    expect(json.resume).toBe(`forkflush resume ${repo.dir} --run ${id}`);
    expect(json.rounds[0].episodes[0]).toMatchObject({ id: 'r0.b0', outcome: 'kept', exit: 'finished' });
    // PID 1 is always alive: as if another forkflush were driving it.
    writeFileSync(join(folder, 'lock'), '1');
    const live = await cli('status', repo.dir);
    expect(live.out).toContain(`run ${id} (${folder}), running in process 1`);
    expect(live.out).not.toContain('forkflush resume');
    expect(JSON.parse((await cli('status', repo.dir, '--json')).out)).toMatchObject({ status: 'running', pid: 1 });
    // A resume of a run another process drives is refused before it says it resumes anything.
    const resume = await cli('resume', repo.dir);
    expect([resume.code, resume.out]).toEqual([2, '']);
    expect(resume.err).toContain(`run ${id} is being driven by process 1: stop it first`);
  });
});

describe('pre-flight: a setup that cannot work stops before it spends', () => {
  it('lists the uncommitted files the run needs, and starts nothing', async () => {
    const repo = makeTaskRepo({
      grader: 'sh grade.sh && node check.mjs',
      extra: 'setup: pip install -r requirements.txt\n',
    });
    writeFileSync(join(repo.dir, 'grade.sh'), 'echo 5\n');
    writeFileSync(join(repo.dir, 'check.mjs'), '');
    writeFileSync(join(repo.dir, 'requirements.txt'), 'numpy\n');
    writeFileSync(join(repo.dir, 'unrelated.txt'), 'not an input');
    // A task file not committed yet, and notes for the agents written since the last commit.
    writeFileSync(join(repo.dir, 'TASK2.md'), 'The task, rewritten.\n');
    writeFileSync(join(repo.dir, 'NOTES.md'), '# Notes\nTried greedy first: it stalls at 80.\n');
    const configFile = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(configFile, `${readFileSync(configFile, 'utf8')}task: TASK2.md\n# edited\n`);
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain('these files the run needs are not committed');
    expect(r.err).toContain('  .github/autoresearch.yml (changed)');
    expect(r.err).toContain('  grade.sh (changed)');
    expect(r.err).toContain('  check.mjs (not in git)');
    expect(r.err).toContain('  requirements.txt (not in git)');
    // All at once: the task that is not in the commit is one of them, not an error of its own first.
    expect(r.err).toContain('  TASK2.md (not in git)');
    expect(r.err).toContain('  NOTES.md (changed)');
    expect(r.err).not.toContain('is not in the repository');
    expect(r.err).not.toContain('unrelated.txt');
    expect(r.err).toContain('commit them (git add, git commit), then run again');
    expect(runs(repo.dir)).toEqual([]);
    expect(repo.calls()).toEqual([]);
  });

  it('lists a file `git rm --cached` took out of git once, as removed', async () => {
    const repo = makeTaskRepo({ grader: 'sh grade.sh' });
    writeFileSync(join(repo.dir, 'grade.sh'), 'echo 5\n');
    execFileSync('git', ['-C', repo.dir, 'add', 'grade.sh']);
    execFileSync('git', ['-C', repo.dir, 'commit', '-qm', 'grader']);
    execFileSync('git', ['-C', repo.dir, 'rm', '-q', '--cached', 'grade.sh']);
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(2);
    expect(r.err.match(/^ {2}grade\.sh \(.*\)$/gm)).toEqual(['  grade.sh (removed from git, not committed)']);
    expect(runs(repo.dir)).toEqual([]);
  });

  it('refuses a repository with no commit yet, and leaves no run folder', async () => {
    const repo = makeTaskRepo();
    const empty = join(repo.dir, 'fresh');
    mkdirSync(join(empty, '.github'), { recursive: true });
    cpSync(join(repo.dir, '.github', 'autoresearch.yml'), join(empty, '.github', 'autoresearch.yml'));
    execFileSync('git', ['init', '-q', empty]);
    const r = await cli('run', empty);
    expect(r.code).toBe(2);
    expect(r.err).toContain('has no commits yet: commit the task');
    expect(runs(empty)).toEqual([]);
  });

  it('names an agent program that cannot be found', async () => {
    const repo = makeTaskRepo({ agentCommand: 'no-such-agent-cli --go' });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain('agent.command: `no-such-agent-cli` is not found on PATH');
    const kind = makeTaskRepo();
    writeFileSync(
      join(kind.dir, '.github', 'autoresearch.yml'),
      'grader: {command: sh grade.sh}\nagent: {kind: codex, command: /nowhere/codex}\nbudget: {total: 5, unit: usd}\n',
    );
    kind.git('commit', '-qam', 'codex');
    const k = await cli('run', kind.dir);
    expect(k.code).toBe(2);
    expect(k.err).toContain('agent.command: the codex CLI `/nowhere/codex` is not found');
  });

  it('names a grader program, or a grader or agent file, that is not there: --dry-run too, and nothing starts', async () => {
    const cases = [
      { grader: 'gradr-not-here', said: 'grader.command: `gradr-not-here` is not found on PATH' },
      {
        grader: 'node grade.mjs',
        said: 'grader.command: grade.mjs, the file `node grade.mjs` runs, does not exist in the repository',
      },
      { agentCommand: 'sh agnt.sh', said: 'agent.command: agnt.sh, the file `sh agnt.sh` runs, does not exist' },
    ];
    for (const { said, ...o } of cases) {
      const repo = makeTaskRepo({ ...o, ...small });
      for (const args of [
        ['run', repo.dir, '--dry-run'],
        ['run', repo.dir],
      ]) {
        const r = await cli(...args);
        expect(r.code, r.err).toBe(2);
        expect(r.err).toContain(said);
      }
      expect(runs(repo.dir)).toEqual([]);
    }
    // A file setup builds is not looked for.
    const built = makeTaskRepo({ grader: 'node dist/grade.mjs', extra: 'setup:\n  commands: [sh grade.sh]' });
    expect((await cli('run', built.dir, '--dry-run')).err).not.toContain('does not exist');
    // The first setup command's own script is: nothing ran before it to make it. (Before: any setup
    // command turned the check off.)
    const unbuilt = makeTaskRepo({ extra: 'setup:\n  commands: [sh install.sh, sh grade.sh]' });
    expect((await cli('run', unbuilt.dir, '--dry-run')).err).toContain(
      'setup.commands[0]: install.sh, the file `sh install.sh` runs, does not exist in the repository',
    );
  });

  it('--dry-run checks, grades the initial workspace and prints the plan, and starts no agent', async () => {
    const repo = makeTaskRepo();
    const r = await cli('run', repo.dir, '--dry-run');
    expect(r.code).toBe(0);
    expect(r.out).toContain('forkflush dry run: fork-and-flush, budget 100 tokens');
    expect(r.out).toContain('initial workspace: score 0');
    expect(r.out).toMatch(/opening\s+fork round\s+4/);
    expect(r.out).toContain('no agent was started');
    expect(repo.calls()).toEqual([]);
    expect(runs(repo.dir)).toEqual([]);
    // The command it offers runs what was checked: the same flags, without --dry-run.
    const flags = await cli('run', repo.dir, '--budget', '20', '--strategy', 'single-run', '--dry-run');
    expect(flags.out).toContain(`Run it: forkflush run ${repo.dir} --budget 20 --strategy single-run\n`);
  });

  it('stops at the first agent that cannot start (exit 127), with its error, before the next round', async () => {
    const repo = makeTaskRepo({ agentCommand: "sh -c 'no-such-tool-at-all --flag'" });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/the agent could not start in r0\.b\d \(.*no-such-tool-at-all.*not found/);
    expect(r.err).toContain('check agent.command');
    const [id] = runs(repo.dir) as [string];
    expect(stateOf(repo.dir, id).rounds).toHaveLength(1);
    // An agent that never started spent nothing: it is not charged its allowance.
    const started = stateOf(repo.dir, id).rounds[0].episodes.filter((e: { result?: unknown }) => e.result);
    expect(started.length).toBeGreaterThan(0);
    for (const e of started) {
      expect(e.result).toMatchObject({ spent: 0, exit: 'crash' });
      expect(e.result.note ?? '').not.toContain('charged its whole allowance');
    }
    // Stopped, not interrupted: status says why and offers no resume, which could not help.
    const status = await cli('status', repo.dir);
    expect(status.out).toContain(`run ${id} (${join(repo.dir, '.forkflush', id)}), stopped\n`);
    expect(status.out).toMatch(/seed \d+: stopped\.\nStopped: the agent could not start in r0\.b\d/);
    expect(status.out).not.toContain('forkflush resume');
    const json = JSON.parse((await cli('status', repo.dir, '--json')).out);
    expect(json).toMatchObject({ status: 'stopped', stopped: { code: 2 }, resume: null });
    const resume = await cli('resume', repo.dir);
    expect(resume.code).toBe(2);
    expect(resume.out).toBe('');
    expect(resume.err).toMatch(new RegExp(`^forkflush: run ${id} stopped: the agent could not start in r0\\.b\\d`));
  });

  it("stops after an opening round with no score, with the grader's own error, and links its log", async () => {
    const broken =
      'console.error("/task/grade.mjs:3");\nconsole.error("Error: cannot open data.csv");\nconsole.error("    at x (grade.mjs:3:9)");\nconsole.error("");\nconsole.error("Node.js v20.20.2");\nprocess.exit(1);\n';
    const repo = makeTaskRepo({ grader: 'node broken.mjs', files: { 'broken.mjs': broken } });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(1);
    expect(r.out).toContain('initial workspace: no score');
    expect(r.err).toContain('neither the initial workspace nor any episode of the opening round got a score');
    expect(r.err).toContain('Error: cannot open data.csv');
    expect(r.err).not.toContain('Node.js v20');
    const [id] = runs(repo.dir) as [string];
    expect(stateOf(repo.dir, id).rounds).toHaveLength(1);
    const report = readFileSync(join(repo.dir, '.forkflush', id, 'report.md'), 'utf8');
    expect(report).toContain('[grader log](episodes/r0.b0/grader.log)');
    const log = readFileSync(join(repo.dir, '.forkflush', id, 'episodes', 'r0.b0', 'grader.log'), 'utf8');
    expect(log).toContain('$ node broken.mjs');
    expect(log).toContain('    at x (grade.mjs:3:9)');
  });

  it('exits 1 when no episode got a score, though the initial workspace had one, after CRASH_STREAK of them', async () => {
    // The agent changes the grader each time: stopped after three episodes, not at the run's end.
    const repo = makeTaskRepo({ ...small, agent: 'protected' });
    const r = await cli('run', repo.dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      'forkflush: the initial workspace got a score (0) but none of the 3 episodes since did (the agent changed protected paths: grade.sh), ' +
        'so the run stopped rather than spend the rest of its budget: the agent changes what grader.protected keeps every time',
    );
    expect(r.out).toContain('report: ');
  });
});

describe('runs', () => {
  it('never share an id, even when started in the same second', async () => {
    const repo = makeTaskRepo(small);
    const [a, b] = await Promise.all([cli('run', repo.dir), cli('run', repo.dir)]);
    // In one process (as a compare starts its runs), neither is another run to the other.
    expect([a?.code, b?.code, a?.err, b?.err]).toEqual([0, 0, '', '']);
    const ids = runs(repo.dir).sort();
    expect(ids).toEqual(['20261130-100000', '20261130-100000-2']);
  });

  it('notes a grader that took most of grader.timeout alone, before its branches are graded side by side', async () => {
    // grader.timeout is 5 s (task-repo.ts): 3 s alone is most of it.
    const slow = makeTaskRepo({ grader: "sh -c 'sleep 3; sh grade.sh'" });
    const r = await cli('run', slow.dir, '--dry-run');
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(
      /note: the initial grading took 3\.\d+ s of grader\.timeout's 5 s, alone; 4 branches are graded side by side/,
    );
    const quick = await cli('run', makeTaskRepo().dir, '--dry-run');
    expect(quick.err).not.toContain('the initial grading took');
  });

  it('notes a grader.protected that protects nothing, or leaves out the file the grader runs', async () => {
    const repo = makeTaskRepo(small);
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace('protected: [grade.sh, agent.mjs]', 'protected: [grade.py, agent.mjs]'),
    );
    repo.git('commit', '-qam', 'a misspelt protected path');
    const r = await cli('run', repo.dir, '--dry-run');
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain('note: grader.protected: "grade.py" matches no file of the commit, so it protects nothing');
    expect(r.err).toContain('note: grader.protected does not cover grade.sh, the file grader.command runs');
    expect((await cli('run', makeTaskRepo(small).dir, '--dry-run')).err).not.toContain('grader.protected');
  });

  it('says when an earlier run of the task did not finish, and how to resume it instead', async () => {
    const repo = makeTaskRepo(small);
    await cli('run', repo.dir);
    const [id] = runs(repo.dir) as [string];
    const state = stateOf(repo.dir, id);
    state.status = 'running';
    writeFileSync(join(repo.dir, '.forkflush', id, 'state.json'), JSON.stringify(state));
    const again = await cli('run', repo.dir);
    expect(again.err).toContain(
      `note: run ${id} of this task did not finish (stopped or interrupted); this is a new run. To go on with that one instead: forkflush resume ${repo.dir} --run ${id}`,
    );
  });

  it('says when another run of the task is running', async () => {
    const repo = makeTaskRepo(small);
    await cli('run', repo.dir);
    // PID 1 is always alive: as if another forkflush drove the first run.
    writeFileSync(join(repo.dir, '.forkflush', '20261130-100000', 'lock'), '1');
    const second = await cli('run', repo.dir);
    expect(second.code).toBe(0);
    expect(second.err).toContain(
      "forkflush: note: run 20261130-100000 of this task is running too (process 1): the two share this machine's CPUs and your agent's quota",
    );
    // One this process drives is its own (a compare's runs side by side): no note.
    writeFileSync(join(repo.dir, '.forkflush', '20261130-100000', 'lock'), String(process.pid));
    expect((await cli('run', repo.dir)).err).not.toContain('is running too');
  });

  it('warns when the best workspace changes what runs by itself once pushed (a CI workflow)', async () => {
    const repo = makeTaskRepo({
      ...small,
      agentCommand: `sh -c 'mkdir -p .github/workflows && echo on-push > .github/workflows/pwn.yml && node agent.mjs improve /dev/null'`,
    });
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain(
      'warning: the best workspace changes what runs by itself once merged and pushed (CI, git): .github/workflows/pwn.yml; the agent wrote them: read them before you merge',
    );
    expect((await cli('run', makeTaskRepo(small).dir)).err).not.toContain('runs by itself');
  });

  it('say how to take the best workspace home, in a repository and from a copy', async () => {
    const repo = makeTaskRepo(small);
    const r = await cli('run', repo.dir);
    expect(r.out).toContain(
      'Take the best workspace into your branch: git merge --no-overwrite-ignore forkflush/20261130-100000/best',
    );
    const copy = makeTaskRepo({ ...small, git: false });
    const c = await cli('run', copy.dir);
    expect(c.code).toBe(0);
    expect(c.out).toContain(`The run worked on a copy of ${copy.dir} (it is not the root of a git repository)`);
    expect(c.out).toMatch(
      /Copy its files over yours: git -C \S+ archive forkflush\/20261130-100000\/best \| tar -x -C /,
    );
  });
});

// Found by a helper's review, each failing then: the message a mistake got, or the money it cost.
describe('a new user, by mistake', () => {
  it.each(['.inf', '.nan', '1e400'])(
    'writes budget.total: %s and is told the number is not finite, not that they wrote null',
    async (value) => {
      // JSON.stringify(Infinity) is "null": config-errors.ts shows the value as JSON.
      const repo = makeTaskRepo({ budget: `total: ${value}\n  unit: tokens` });
      const r = await cli('plan', repo.dir);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/budget\.total/);
      expect(r.err).not.toContain('got null');
    },
  );

  it('names a folder as task: and is refused before any agent starts (not its file listing as the task)', async () => {
    const repo = makeTaskRepo({ budget: small.budget, extra: 'strategy: single-run\ntask: docs' });
    mkdirSync(join(repo.dir, 'docs'));
    writeFileSync(join(repo.dir, 'docs', 'a.md'), 'the task\n');
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'docs');
    // Today: `git show HEAD:docs` ("tree HEAD:docs\n\na.md") is quoted into every prompt as the task.
    const dry = await cli('run', repo.dir, '--dry-run');
    expect(dry.code, dry.err).toBe(2);
    expect(dry.err).toMatch(/task: docs .*(folder|directory|not a file)/);
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(repo.calls()).toEqual([]);
  });

  it('names a journal: inside .git and is refused before any agent starts, not a git error after one', async () => {
    const repo = makeTaskRepo({ budget: small.budget, extra: 'strategy: single-run\njournal: .git/notes.md' });
    // Today: dry run passes; the run starts an agent, then fails with exit 1 on
    // "git update-index ... Invalid path '.git/notes.md'" and offers a resume that cannot help.
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/journal/);
    expect(r.err).not.toContain('update-index');
    expect(repo.calls()).toEqual([]);
  });

  it('names the config file as journal: and is refused, as a protected journal is', async () => {
    // journal: grade.sh (protected) is refused; the config is always protected, yet journal:
    // .github/autoresearch.yml runs, exits 0, and its best branch's config ends in journal lines
    // that are not YAML: merged, the next forkflush run fails on it.
    const repo = makeTaskRepo({
      budget: small.budget,
      extra: 'strategy: single-run\njournal: .github/autoresearch.yml',
    });
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/journal/);
    expect(repo.calls()).toEqual([]);
  });

  it('names a folder of the task as journal: and is refused, not given a best branch that deletes the folder', async () => {
    const repo = makeTaskRepo({ budget: small.budget, extra: 'strategy: single-run\njournal: data' });
    mkdirSync(join(repo.dir, 'data'));
    writeFileSync(join(repo.dir, 'data', 'a.txt'), '1\n');
    writeFileSync(join(repo.dir, 'data', 'b.txt'), '2\n');
    repo.git('add', '-A');
    repo.git('commit', '-qm', 'data');
    // Today: exit 0; forkflush's journal line replaces the folder data/ with a file data, and the
    // best branch it says to merge deletes data/a.txt and data/b.txt.
    const r = await cli('run', repo.dir);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/journal: data .*(folder|directory|not a file)/);
    expect(repo.calls()).toEqual([]);
  });

  it("runs a task folder (not a repository) holding a FIFO and is told of the user's file, not a cp error in the run folder", async () => {
    const repo = makeTaskRepo({ budget: small.budget, extra: 'strategy: single-run', git: false });
    execFileSync('mkfifo', [join(repo.dir, 'pipe')]);
    // Today: "forkflush: failed: Cannot copy a FIFO pipe: cp returned EINVAL (... <run folder>/repo/pipe)", exit 1.
    const r = await cli('run', repo.dir, '--dry-run');
    expect(r.err).not.toContain('failed:');
    expect(r.err).not.toContain('EINVAL');
    expect(r.code).not.toBe(1);
    expect(r.err).toContain(join(repo.dir, 'pipe'));
    expect(runs(repo.dir)).toEqual([]);
  });

  it('runs a repository whose grader reads a submodule and is told the workspaces lack it (or they have it)', async () => {
    const lib = mkdtempSync(join(tmpdir(), 'forkflush-lib-'));
    const g = (cwd: string, ...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'protocol.file.allow=always', ...args], {
        cwd,
        encoding: 'utf8',
      });
    g(lib, 'init', '-q', '--initial-branch=main');
    writeFileSync(join(lib, 'value.txt'), '7\n');
    g(lib, 'add', '-A');
    g(lib, 'commit', '-qm', 'lib');
    const repo = makeTaskRepo({ budget: small.budget, extra: 'strategy: single-run', grader: 'cat lib/value.txt' });
    g(repo.dir, 'submodule', '-q', 'add', lib, 'lib');
    g(repo.dir, 'commit', '-qm', 'lib as a submodule');
    // Today: "initial workspace: no score (the grader exited with code 1)" and a note that this is
    // "fine for a task that starts from nothing": the run's checkouts have an empty lib/, and
    // nothing says so; a run spends its opening round before it stops.
    const r = await cli('run', repo.dir, '--dry-run');
    expect(`${r.out}${r.err}`).toMatch(/submodule|initial workspace: score 7\b/);
  });
});
