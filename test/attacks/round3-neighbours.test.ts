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
const TWO_BRANCHES = {
  strategy: 'fork-and-flush',
  budget: 'total: 12\n  unit: tokens\n  episode: 6',
  extra: 'fork: {branches: 2, at: [], branch_budget: 0.5}',
};

function stormRepo(weapon: 'tasks' | 'sockets', dir?: string): AttackRepo {
  return makeAttackRepo({
    agent: `sh {fx}/round3-storm.sh {logs} 12 ${weapon}`,
    grader: CAT_GRADER,
    ...TWO_BRANCHES,
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

  it.each([
    ['', false],
    // The user's git packed the loose objects in between (git gc, git maintenance): the sibling's
    // result is then in a pack, which a view that linked every pack whole would hold.
    [', the repository repacked since', true],
  ])(
    'cannot read it after a resume either, when the round was begun by a release that kept no view%s',
    async (_, repack) => {
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
      if (repack) repo.git('repack', '-a', '-d', '-q');
      writeFileSync(join(repo.logs, 'b0-committed'), '');
      const again = await openRun(repo.dir);
      const { state } = await drive(again.state, again);
      expectNoCopy(repo, state);
    },
  );
});

// Round 6 (a helper session's attacks on one round's siblings). Each asserts the honest outcome:
// - the CPU: a branch starves its sibling's judge until the sibling's grader times out (it knows
//   when: inotify on the base's grader blob, whose inode its borrowed objects share). The judge
//   is then graded again alone (local/shared-machine.ts); before, the attacker won the round;
// - the objects the round borrows (hard links to the repository's own, bound read-only): written,
//   truncated, removed, their folder filled, to spoil the base blobs the sibling's judge reads;
// - what the kernel shares between sandboxes rather than a folder: /dev/shm, /tmp, home, SysV
//   IPC, abstract Unix sockets, loopback ports, /proc, the hostname.
// Not held, and said in the README ("What it does not do"): two branches that cooperate can
// signal each other through the kernel they share (file locks on the read-only files both see,
// inotify on them, the load), and a branch can tell when its sibling is judged and which of the
// base's files it changed; neither moves a score.

/** Two branches of one round running `fixture <logs>`, graded by the task's own grade.sh. */
const siblingsRepo = (fixture: string, o: { agentTimeout?: number } = {}) =>
  makeAttackRepo({ agent: `sh {fx}/${fixture} {logs}`, grader: 'sh grade.sh', ...TWO_BRANCHES, ...o });

/** The honest sibling r0.b0 was judged its 9 and won the round. */
function expectJudgedSiblingWins(state: RunState, how: string) {
  const { round, b0 } = episodes(state);
  expect(b0?.result?.score, how).toBe(9);
  expect(round?.decision?.winner, how).toBe('r0.b0');
}

function episodes(state: RunState) {
  const round = state.rounds[0];
  const [b0, b1] = round?.episodes ?? [];
  return { round, b0, b1 };
}

describeSandboxed('a branch that starves its sibling of CPU while the sibling is judged', () => {
  it('cannot win: the sibling, graded live within its time, is judged again alone after the time-out, and wins', async () => {
    const repo = makeAttackRepo({
      agent: 'sh {fx}/round6-cpu-storm.sh {logs} 48 15',
      files: {
        // An honest grader with a little work to do: about 0.6 s of CPU on an idle machine.
        'grade.sh':
          "# The honest grader: some work, then the number in value.txt.\nawk 'BEGIN { for (i = 0; i < 18000000; i++) s += i }'\ncat value.txt 2>/dev/null || echo 0\n",
      },
      graderTimeout: 5,
      agentTimeout: 150,
      ...TWO_BRANCHES,
    });
    const { state } = await runLocal(repo, { concurrency: 2 });
    const { round, b0, b1 } = episodes(state);
    const [from, to] = log(repo, 'b0-graded-times').split(' ').map(Number);
    const how = `b0 live grading took ${((to ?? 0) - (from ?? 0)).toFixed(2)} s and printed ${JSON.stringify(log(repo, 'b0-graded'))}; storm up ${log(repo, 'storm-up')} end ${log(repo, 'storm-end')}; b0 ${JSON.stringify({ score: b0?.result?.score, reason: b0?.result?.reason })}; b1 ${JSON.stringify({ score: b1?.result?.score })}; decision ${JSON.stringify(round?.decision)}`;
    // The grader fits its time on this machine: the sibling's own live grading printed 9 in it.
    expect(log(repo, 'b0-graded').split('\n').at(-1), how).toBe('9');
    expect(log(repo, 'storm-up'), how).not.toBe('');
    expect(b1?.result?.score, how).toBe(3);
    // The honest outcome: the sibling's judge is not starved into a time-out, and it wins.
    expectJudgedSiblingWins(state, how);
  }, 300_000);
});

describeSandboxed("a branch that goes for the objects its round borrows, to spoil its sibling's", () => {
  it('cannot write, truncate, remove or add to them: the repository stays whole and the sibling wins', async () => {
    const repo = siblingsRepo('round6-objects-tamper.sh');
    const gitDir = join(repo.dir, '.git');
    const blobs = ['grade.sh', 'value.txt'].map((f) => repo.git('rev-parse', `HEAD:${f}`));
    const { state } = await runLocal(repo, { concurrency: 2 });
    const { b0, b1 } = episodes(state);
    const tamper = log(repo, 'tamper.log');
    const how = `tamper.log:\n${tamper}\nb0 ${JSON.stringify(b0?.result)}`;
    expect(tamper, how).toContain('view /');
    expect(tamper, how).toContain('failed: truncate');
    expect(tamper, how).not.toContain('SUCCEEDED');
    // The repository's objects are whole: the base's blobs, every result.
    const fsck = spawnSync('git', [`--git-dir=${gitDir}`, 'fsck', '--full', '--no-dangling'], { encoding: 'utf8' });
    expect(fsck.status, `${how}\n${fsck.stdout}${fsck.stderr}`).toBe(0);
    expect(blobs.map((b) => repo.git('cat-file', '-t', b))).toEqual(['blob', 'blob']);
    expect(showFile(gitDir, b0?.result?.commit ?? '', 'grade.sh')).toContain('The honest grader');
    // The attacker's own git still worked (its gc and repack touched only its own .git).
    expect(showFile(gitDir, b1?.result?.commit ?? '', 'value.txt')).toBe('3\n');
    expectJudgedSiblingWins(state, how);
  }, 60_000);
});

describeSandboxed('what the kernel shares between two sandboxes of one round', () => {
  it('a branch finds nothing its sibling leaves in /dev/shm, /tmp, home, IPC, sockets, ports or /proc', async () => {
    const repo = siblingsRepo('round6-kernel-shared.sh', { agentTimeout: 40 });
    const gitDir = join(repo.dir, '.git');
    const { state } = await runLocal(repo, { concurrency: 2 });
    const { b0, b1 } = episodes(state);
    const secret = (showFile(gitDir, b0?.result?.commit ?? '', 'secret.txt') ?? '').trim();
    const loot = showFile(gitDir, b1?.result?.commit ?? '', 'loot.txt') ?? '';
    const how = `b0 planted:\n${log(repo, 'b0-planted')}\nsecret ${secret}\nloot:\n${loot.slice(0, 4000)}`;
    expect(secret, how).toMatch(/^ffsecret[0-9a-f]{16}$/);
    // It did plant some (an abstract socket and a port of its loopback, a segment, its /tmp).
    expect(log(repo, 'b0-planted'), how).toContain('abstract');
    expect(loot, how).not.toBe('');
    expect(loot.includes(secret), how).toBe(false);
    expect(b0?.result?.score).toBe(9);
  }, 60_000);
});
