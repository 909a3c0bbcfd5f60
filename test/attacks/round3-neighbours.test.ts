// Round 3: branches that go for their siblings instead of the grader. Two branches of one fork
// round run at once; one grades honestly and then fills its process limit with sleeping
// processes while its better sibling is graded and judged. Every sandbox counts against limits of
// its own (io/accounts.ts: a uid of its own under root, a user namespace of its own as an
// ordinary user), so the sibling's gradings fork as usual, its score is recorded and it wins.
// When all sandboxes shared one limit, the sibling's grader failed with EAGAIN, it was recorded
// with no score, and the attacker won the round.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { GRADE_SERVICE_MAX_CONNECTIONS } from '../../src/core/bounds.js';
import type { RunState } from '../../src/core/state.js';
import { drive } from '../../src/local/runner.js';
import { openRun, startRun } from '../../src/local/start.js';
import {
  type AttackRepo,
  attackTemp,
  CAT_GRADER,
  cleanupAttackTemps,
  currentCli,
  describeSandboxed,
  makeAttackRepo,
  runLocal,
  showFile,
} from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
});

const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn('\n!!!!!!!! the ordinary-user neighbour test needs root to switch user: SKIPPED !!!!!!!!\n');

/** One fork round of two branches, run side by side, and nothing after it. */
function stormRepo(weapon: 'tasks' | 'sockets', dir?: string): AttackRepo {
  return makeAttackRepo({
    agent: `sh {fx}/round3-storm.sh {logs} 12 ${weapon}`,
    grader: CAT_GRADER,
    strategy: 'fork-and-flush',
    budget: 'total: 12\n  unit: tokens\n  episode: 6',
    extra: 'fork: {branches: 2, at: [], branch_budget: 0.5}',
    agentTimeout: 150,
    graderTimeout: 30,
    ...(dir ? { dir } : {}),
  });
}

function log(repo: AttackRepo, name: string): string {
  try {
    return readFileSync(join(repo.logs, name), 'utf8').trim();
  } catch {
    return '';
  }
}

/** When a result's commit was made (seconds since the epoch). */
function committedAt(repo: AttackRepo, commit: string): number {
  return Number(repo.git('-c', 'safe.directory=*', 'log', '-1', '--format=%ct', commit));
}

/** The storm filled the attacker's limit and lasted until the sibling's result was committed; the sibling won. */
function expectSiblingWins(repo: AttackRepo, state: RunState): void {
  const round = state.rounds[0];
  const [attacker, sibling] = round?.episodes ?? [];
  const how = JSON.stringify(round, null, 1);
  // The sibling's own live grading and its judge forked as usual, and it won.
  expect(log(repo, 'sibling-graded'), how).toBe('9');
  expect(sibling?.result?.score, how).toBe(9);
  expect(attacker?.result?.score, how).toBe(5);
  // The attack happened: the storm forked until its own limit refused it (RLIMIT_NPROC counts
  // threads and the agent's own processes too), and held while the sibling was judged.
  const limit = Number(log(repo, 'nproc-r0.b0'));
  expect(limit, how).toBeGreaterThan(100);
  expect(Number(log(repo, 'storm')), how).toBeGreaterThan(limit - 30);
  expect(log(repo, 'storm-error')).toMatch(/Resource temporarily unavailable|can't start new thread/);
  expect(Number(log(repo, 'storm-end'))).toBeGreaterThanOrEqual(committedAt(repo, sibling?.result?.commit ?? ''));
  expect(round?.decision?.winner, how).toBe('r0.b1');
}

describeSandboxed('a branch that opens every connection it can to its grading service', () => {
  it("while its sibling is judged: forkflush's open files are not its to take, and the sibling wins", async () => {
    const repo = stormRepo('sockets');
    // forkflush is this process: its open files, sampled through the run.
    const files = () => readdirSync('/proc/self/fd').length;
    const before = files();
    let most = before;
    const sampler = setInterval(() => {
      most = Math.max(most, files());
    }, 100);
    const { state } = await runLocal(repo).finally(() => clearInterval(sampler));
    const [attacker, sibling] = state.rounds[0]?.episodes ?? [];
    const how = JSON.stringify(state.rounds[0], null, 1);
    expect(log(repo, 'sibling-graded'), how).toBe('9');
    expect(sibling?.result?.score, how).toBe(9);
    expect(attacker?.result?.score, how).toBe(5);
    expect(state.rounds[0]?.decision?.winner, how).toBe('r0.b1');
    // It tried (thousands of connections went through), and forkflush never held more than a
    // service's share of them.
    const [opened] = log(repo, 'storm').split(' ').map(Number);
    expect(opened, log(repo, 'storm')).toBeGreaterThan(5000);
    expect(most - before, `${before} open files before, ${most} at most`).toBeLessThan(
      GRADE_SERVICE_MAX_CONNECTIONS + 300,
    );
    expect(Number(log(repo, 'storm-end').split(' ')[0])).toBeGreaterThanOrEqual(
      committedAt(repo, sibling?.result?.commit ?? ''),
    );
  }, 240_000);
});

describeSandboxed('a branch that fills its process limit while its sibling is judged', () => {
  it(`as forkflush runs it (${isRoot ? 'root' : 'this ordinary user'} here): the sibling is graded, judged and wins`, async () => {
    const repo = stormRepo('tasks');
    const { state } = await runLocal(repo);
    expectSiblingWins(repo, state);
  }, 240_000);

  it.skipIf(!isRoot)(
    'as an ordinary user (a user namespace per sandbox): the sibling wins',
    async () => {
      const root = attackTemp('neighbours');
      const repo = stormRepo('tasks', root);
      const home = join(root, 'home');
      mkdirSync(home);
      execFileSync('chown', ['-R', '65534:65534', root]);
      const cli = await currentCli();
      const r = spawnSync(
        'setpriv',
        ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, cli, 'run', repo.dir, '--seed', '1'],
        { encoding: 'utf8', timeout: 240_000, cwd: root, env: { PATH: process.env.PATH, HOME: home, LANG: 'C.UTF-8' } },
      );
      expect(r.status, r.stdout + r.stderr).toBe(0);
      expect(r.stdout + r.stderr).not.toMatch(/sandbox is off|one process limit for every sandbox/);
      const runs = join(repo.dir, '.forkflush');
      const [id] = readdirSync(runs);
      const state = JSON.parse(readFileSync(join(runs, id ?? '', 'state.json'), 'utf8')) as RunState;
      expect(state.rounds[0]?.episodes[0]?.result?.sandbox).toMatch(/^bubblewrap/);
      expectSiblingWins(repo, state);
    },
    300_000,
  );
});

describeSandboxed("a branch copying its sibling's result of the same round", () => {
  /** r0.b0 ends with 9 and a marker at once; r0.b1 then looks for its tree and copies it (round-copy.sh). */
  const copyRepo = () =>
    makeAttackRepo({
      agent: 'sh {fx}/round-copy.sh {logs}',
      grader: CAT_GRADER,
      strategy: 'best-of-n',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'fork:\n  branches: 2',
    });

  /** r0.b1 found nothing to copy, its git worked, and its own result stands. */
  function expectNoCopy(repo: AttackRepo, state: RunState) {
    const [b0, b1] = state.rounds[0]?.episodes ?? [];
    const gitDir = join(repo.dir, '.git');
    expect(b0?.result?.score).toBe(9);
    const commit = b1?.result?.commit ?? '';
    expect(showFile(gitDir, commit, 'copied.txt')).toBe('none\n');
    expect(showFile(gitDir, commit, 'marker.txt')).toBeNull();
    expect(b1?.result?.score).toBe(3);
    // Its git saw the base and its objects all the same.
    expect(Number(showFile(gitDir, commit, 'history.txt'))).toBe(1);
    expect(Number(showFile(gitDir, commit, 'objects.txt'))).toBeGreaterThan(5);
    // The round's view of the objects went when the round was settled.
    expect(readdirSync(join(repo.dir, '.forkflush', state.id, 'round-objects'))).toEqual([]);
  }

  it("cannot read it: the round's workspaces borrow the objects as the round began", async () => {
    const repo = copyRepo();
    // Tells r0.b1 when r0.b0's branch holds its result: then it goes looking.
    const base = repo.git('rev-parse', 'main');
    const watch = setInterval(() => {
      const refs = spawnSync('git', ['for-each-ref', '--format=%(refname) %(objectname)'], { cwd: repo.dir });
      const b0 = String(refs.stdout)
        .split('\n')
        .find((l) => /round-0\/branch-0 /.test(l));
      if (b0 && !b0.endsWith(base)) writeFileSync(join(repo.logs, 'b0-committed'), '');
    }, 100);
    const { state } = await runLocal(repo, { concurrency: 2 }).finally(() => clearInterval(watch));
    expect(existsSync(join(repo.logs, 'b0-committed'))).toBe(true);
    expectNoCopy(repo, state);
  });

  it('cannot read it after a resume either, when the round was begun by a release that kept no view', async () => {
    const repo = copyRepo();
    const run = await startRun({ dir: repo.dir, seed: 1, now: new Date('2026-12-05T10:00:00Z'), concurrency: 2 });
    // Stopped once r0.b0's result is recorded, with r0.b1 still waiting: r0.b1 runs again on resume.
    const stop = new AbortController();
    const first = await drive(run.state, {
      ...run,
      signal: stop.signal,
      onEvent: (e) => e.type === 'episode-done' && e.episode.id === 'r0.b0' && stop.abort(),
    });
    expect(first.interrupted).toBe(true);
    rmSync(run.store.path('round-objects'), { recursive: true, force: true });
    writeFileSync(join(repo.logs, 'b0-committed'), '');
    const again = await openRun(repo.dir);
    const { state } = await drive(again.state, again);
    expectNoCopy(repo, state);
  });
});
