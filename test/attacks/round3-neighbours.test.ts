// Round 3: branches that go for their siblings instead of the grader. Two branches of one fork
// round run at once; one grades honestly and then fills its process limit with sleeping
// processes while its better sibling is graded and judged. Every sandbox counts against limits of
// its own (io/accounts.ts: a uid of its own under root, a user namespace of its own as an
// ordinary user), so the sibling's gradings fork as usual, its score is recorded and it wins.
// When all sandboxes shared one limit, the sibling's grader failed with EAGAIN, it was recorded
// with no score, and the attacker won the round.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { GRADE_SERVICE_MAX_CONNECTIONS } from '../../src/core/bounds.js';
import type { RunState } from '../../src/core/state.js';
import {
  type AttackRepo,
  attackTemp,
  CAT_GRADER,
  cleanupAttackTemps,
  currentCli,
  describeSandboxed,
  makeAttackRepo,
  runLocal,
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
