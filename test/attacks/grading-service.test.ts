// FORKFLUSH_GRADE from where it should not be reachable (a sibling episode, a process outside the
// sandbox), and from inside past the evaluation budget.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { afterAll, afterEach, expect, it } from 'vitest';
import {
  attackTemp,
  cleanupAttackTemps,
  describeSandboxed,
  makeAttackRepo,
  processesWith,
  runLocal,
  showFile,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);

/** The grader counts its runs: each one appends a line to graded.log in the folder it grades. */
const COUNTING_GRADER = {
  'grade.sh': '# Counts its runs, then the score: the number in value.txt.\necho graded >> graded.log\ncat value.txt\n',
};

const savedTmp = process.env.TMPDIR;
afterEach(() => {
  if (savedTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmp;
});

function gradings(gitDir: string, commit: string): number {
  return (showFile(gitDir, commit, 'graded.log') ?? '').split('\n').filter(Boolean).length;
}

describeSandboxed('the grading service', () => {
  it('twenty parallel FORKFLUSH_GRADE calls and forty pipelined requests get no more than the evaluation budget', async () => {
    const repo = makeAttackRepo({
      agent: 'node {fx}/grade-flood.mjs',
      files: COUNTING_GRADER,
      budget: 'total: 3\n  unit: evaluations\n  episode: 3',
    });
    const { result } = await runLocal(repo);
    expect(result.spent).toBeLessThanOrEqual(3);
    expect(gradings(join(repo.dir, '.git'), result.commit)).toBeLessThanOrEqual(3);
    expect(result.exit).toBe('budget');
  });

  it('forty gradings pipelined on one connection: the service answers one, never queues the rest in its memory', async () => {
    const repo = makeAttackRepo({
      agent: 'node {fx}/grade-pipeline.mjs {logs}',
      files: COUNTING_GRADER,
      budget: 'total: 6\n  unit: tokens\n  episode: 6',
    });
    const { result } = await runLocal(repo);
    // The first is graded; the socket is closed after it (one request per connection).
    const statuses = readFileSync(join(repo.logs, 'pipeline'), 'utf8').trim().split(' ');
    expect(statuses[0]).toBe('200');
    expect(gradings(join(repo.dir, '.git'), result.commit)).toBe(1);
  });

  it.each([
    ['in /tmp (the default)', false],
    ['when forkflush runs with TMPDIR outside /tmp', true],
  ])("a sibling episode cannot grade through another episode's socket, %s", async (_, moveTmp) => {
    const tmp = attackTemp('tmpdir');
    if (moveTmp) process.env.TMPDIR = tmp;
    const repo = makeAttackRepo({
      agent: `node {fx}/grade-thief.mjs {logs} ${tmp}`,
      files: COUNTING_GRADER,
      strategy: 'best-of-n',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'fork:\n  branches: 2',
    });
    const { state } = await runLocal(repo, { concurrency: 2 });
    const round = state.rounds[0]?.episodes ?? [];
    expect(round.map((e) => e.id)).toEqual(['r0.b0', 'r0.b1']);
    // Both ran at once and each knew the other's socket.
    const logs = readdirSync(repo.logs);
    expect(logs).toEqual(expect.arrayContaining(['socket-r0.b0', 'socket-r0.b1', 'tried-r0.b0', 'tried-r0.b1']));
    const stolen = logs.filter((f) => f.startsWith('stolen-')).map((f) => readFileSync(join(repo.logs, f), 'utf8'));
    expect(stolen).toEqual([]);
    // Each workspace was graded once: by its own agent.
    for (const e of round) expect(gradings(join(repo.dir, '.git'), e.result?.commit ?? ''), e.id).toBe(1);
  });

  it('a process outside the sandbox, of another user (root here) or of this one, cannot grade through the socket while the episode runs', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/grade-wait.sh {logs}', files: COUNTING_GRADER });
    const socketFile = join(repo.logs, 'socket');
    const outside: { out?: string } = {};
    const thief = (async () => {
      for (let i = 0; i < 1_200 && !existsSync(socketFile); i++) await new Promise((r) => setTimeout(r, 50));
      const socket = readFileSync(socketFile, 'utf8').trim();
      // Asynchronously: the grading service answers from this very process.
      outside.out = await new Promise<string>((resolve) => {
        // Another user where this is root; as an ordinary user, this user outside the sandbox.
        const as = process.getuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] : [];
        execFile(
          as[0] ?? process.execPath,
          [
            ...as.slice(1),
            ...(as.length > 0 ? [process.execPath] : []),
            '-e',
            `const r = require('node:http').request({ socketPath: ${JSON.stringify(socket)}, path: '/grade', method: 'POST' },
               (res) => { console.log('answered', res.statusCode); process.exit(0); });
             r.on('error', (e) => { console.log('refused', e.code); process.exit(1); }); r.end();`,
          ],
          { encoding: 'utf8', timeout: 10_000 },
          (_e, stdout, stderr) => resolve(`${stdout}${stderr}`),
        );
      });
      writeFileSync(join(repo.logs, 'outside-done'), '');
    })();
    const { result } = await runLocal(repo);
    await thief;
    // The socket is open to the sandbox's user, who may be this one; without the episode's
    // secret (in the box, which only the sandbox can read) it answers nothing but a refusal.
    expect(outside.out).toMatch(/refused|answered 403/);
    expect(gradings(join(repo.dir, '.git'), result.commit)).toBe(0);
    expect(result.score).toBe(8);
  });

  it('a daemon started by agent code the grading service runs does not survive that grading', async () => {
    const marker = unique('ff-grader-daemon');
    const repo = makeAttackRepo({
      agent: `sh {fx}/grader-daemon.sh ${marker}`,
      files: { 'grade.sh': '# The score: what the solver prints.\nsh solve.sh\n' },
    });
    const { result } = await runLocal(repo);
    // The daemon was up (it marked the workspace), and never wrote its 999.
    expect(showFile(join(repo.dir, '.git'), result.commit, '.daemon-up')).toBe('');
    expect(result.score).toBe(4);
    expect(showFile(join(repo.dir, '.git'), result.commit, 'value.txt')).toBe('4\n');
    expect(processesWith(marker)).toEqual([]);
  });

  it('the solver a grader runs cannot reach into the grader: no fd of its, no ptrace, no writing its memory, no debugger signal', async () => {
    // The judge's grader runs the solver with its output captured, and prints its last line itself.
    const repo = makeAttackRepo({
      agent: 'sh {fx}/grader-takeover.sh',
      files: { 'grade.sh': '# The score: what the solver prints last.\na=$(sh solve.sh)\necho "$a" | tail -n 1\n' },
      grader: 'sh grade.sh',
    });
    const { run, result } = await runLocal(repo);
    const log = readFileSync(join(run.store.scratch('r0.b0'), 'grader.log'), 'utf8');
    expect(log).toMatch(/^target: socket:/m);
    // (A kernel older than pidfd_open, 5.3, refuses the first step itself.)
    expect(log).toMatch(/^(pidfd_getfd: Operation not permitted|pidfd_open: Function not implemented)$/m);
    expect(log).toMatch(/^ptrace: Operation not permitted$/m);
    expect(log).toMatch(/^mem: Read-only file system$/m);
    expect(log).toMatch(/^usr1: refused$/m);
    expect(log).toMatch(/^quit: refused$/m);
    expect(log).toMatch(/^setsig: Operation not permitted$/m);
    // Had it taken the grader's stdout, its "99" would have made the grader's 4 read 994.
    expect(result.score).toBe(4);
  });

  it("the solver cannot rewrite, swap or add to the protected checker the judge's grader runs after it", async () => {
    // The grader runs the solver, then its checkers on the answer: at most 10 from each, summed.
    const repo = makeAttackRepo({
      agent: 'sh {fx}/checker-swap.sh',
      grader: 'sh grade.sh',
      protected: ['grade.sh', 'check.sh', 'tools/checker/**', 'data'],
      files: {
        'grade.sh':
          'a=$(sh solve.sh)\nx=$(sh check.sh "$a"); y=$(sh tools/checker/check.sh "$a"); z=$(cat data/*.txt | wc -l)\necho $((x + y + z))\n',
        'check.sh': 'test "$1" -le 10 && echo "$1" || echo 10\n',
        'tools/checker/check.sh': 'test "$1" -le 10 && echo "$1" || echo 10\n',
        'data/cases.txt': '1\n',
      },
    });
    const { run, result } = await runLocal(repo);
    const log = readFileSync(join(run.store.scratch('r0.b0'), 'grader.log'), 'utf8');
    expect(log).toMatch(/^check\.sh: refused$/m);
    expect(log).toMatch(/^tools: refused$/m);
    expect(log).toMatch(/^data: refused$/m);
    // 4 from each checker and one line of data: what a clean checkout scores.
    expect(result.score).toBe(9);
  });

  it("what setup makes under a protected path in the judge's checkout is removed before grading", async () => {
    const repo = makeAttackRepo({
      agent: 'sh {fx}/setup-plant.sh',
      grader: 'sh grade.sh',
      protected: ['grade.sh', 'data'],
      extra: 'setup: sh install.sh',
      files: { 'grade.sh': 'cat data/*.txt | wc -l\n', 'install.sh': 'true\n', 'data/cases.txt': '1\n' },
    });
    const { run, result } = await runLocal(repo);
    expect(result.score).toBe(1);
    const log = readFileSync(join(run.store.scratch('r0.b0'), 'grader.log'), 'utf8');
    expect(log).toContain('(removed what setup made under protected paths: data/planted.txt)');
  });

  it("setup's hard links and new folders reach no protected file, and a file the grader's solver writes at a protected path voids the score", async () => {
    const files = {
      'expected.txt': 'right\n',
      'tests/test_a.py': 'def test_a(): pass\n',
      'setup.sh': 'true\n',
      // 1 when the solver's answer is the protected expectation, 2 when a planted test is there.
      'grade.sh':
        'echo "python: $PYTHONNOUSERSITE $PYTHONDONTWRITEBYTECODE $PYTHONPYCACHEPREFIX" >&2\n' +
        'out=$(sh solve.sh); s=0\n[ "$out" = "$(cat expected.txt)" ] && s=$((s + 1))\n[ -f tests/zz/planted.py ] && s=$((s + 2))\necho $s\n',
    };
    const repo = makeAttackRepo({
      agent: 'sh {fx}/protected-plant.sh',
      protected: ['grade.sh', 'expected.txt', 'tests/**/*.py'],
      extra: 'setup: sh setup.sh',
      files,
    });
    const { run, result } = await runLocal(repo);
    const log = readFileSync(join(run.store.scratch('r0.b0'), 'grader.log'), 'utf8');
    expect(log).toContain('(removed what setup made under protected paths: tests/zz/planted.py)');
    expect(log).toContain('python: 1 1 /dev/null/forkflush-no-bytecode');
    // The link setup made points at the old file: the protected one was written afresh.
    expect(result.score).toBe(0);

    const second = makeAttackRepo({
      agent: 'sh {fx}/protected-plant.sh && mv solve2.sh solve.sh',
      protected: ['grade.sh', 'tests/**/*.py'],
      files: {
        'tests/test_a.py': 'def test_a(): pass\n',
        'grade.sh': 'sh solve.sh >/dev/null\n[ -f tests/conftest.py ] && echo 100 || echo 1\n',
      },
    });
    const voided = (await runLocal(second)).result;
    expect(voided.score).toBeNull();
    expect(voided.reason).toBe('the graded code wrote under protected paths while the grader ran: tests/conftest.py');
  });

  it("a grading the agent asks for gets neither grader.env nor grader.network: it runs the agent's files, the grader's too", async () => {
    const secret = unique('grader-secret');
    let reached = 0;
    const server = createServer((_, res) => {
      reached++;
      res.end('HOST-LOOPBACK-REACHED');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    process.env.FF_ATTACK_GRADER_SECRET = secret;
    try {
      const repo = makeAttackRepo({ agent: `sh {fx}/round4-grader-env.sh {logs} ${port}` });
      // grader.env and grader.network: the judge's, for a grader that needs a key or a download.
      const config = join(repo.dir, '.github', 'autoresearch.yml');
      writeFileSync(
        config,
        readFileSync(config, 'utf8').replace(
          'grader:\n',
          'grader:\n  env: [FF_ATTACK_GRADER_SECRET]\n  network: true\n',
        ),
      );
      repo.git('commit', '-qam', 'the grader gets a key and the network');
      await runLocal(repo);
      const log = (name: string) => readFileSync(join(repo.logs, name), 'utf8');
      const said = log('graded-err');
      expect(log('graded-out').trim(), said).toBe('1');
      expect(said).toContain('PATH=');
      expect(said).not.toContain(secret);
      expect(said).toMatch(/^net refused: /m);
      expect(reached).toBe(0);
      expect(log('failed-err')).toContain(
        'forkflush: gradings asked for during the episode run without grader.env (FF_ATTACK_GRADER_SECRET) or the network:',
      );
    } finally {
      delete process.env.FF_ATTACK_GRADER_SECRET;
      server.close();
    }
  }, 60_000);

  it('a grading the agent left running is stopped with the agent, before the snapshot', async () => {
    const marker = unique('ff-grade-linger');
    const repo = makeAttackRepo({ agent: `sh {fx}/grade-linger.sh ${marker}`, files: COUNTING_GRADER });
    const { result } = await runLocal(repo);
    expect(result.score).toBe(4);
    // Gone by the time the episode has its result: it wrote for a moment, not for its 20 s.
    expect(processesWith(marker)).toEqual([]);
    const written = (showFile(join(repo.dir, '.git'), result.commit, 'linger.log') ?? '').split('\n').filter(Boolean);
    expect(written.length).toBeGreaterThan(0);
    expect(written.length).toBeLessThan(300);
  });
});
