// Round 6: one branch of a round against its sibling of the same round, both running locally side
// by side (one fork round of two branches, concurrency 2). Each test asserts the honest outcome:
// - the CPU: a branch starves its sibling's judge until the sibling's grader times out (it knows
//   when: inotify on the base's grader blob, whose inode its borrowed objects share). The judge
//   is then graded again alone (local/shared-machine.ts); before, the attacker won the round;
// - the objects the round borrows (hard links to the repository's own, bound read-only): written,
//   truncated, removed, their folder filled, to spoil the base blobs the sibling's snapshot and
//   judge read from the repository;
// - what the kernel shares between sandboxes rather than a folder: /dev/shm, /tmp, home, SysV
//   IPC, abstract Unix sockets, loopback ports, /proc, the hostname;
// - a round resumed without its view (begun by an earlier release) after the user's git packed the
//   repository: the view is a pack of what the round's bases reach (before, every pack was
//   linked whole, the sibling's result with it).
// Not held, and said in the README ("What it does not do"): two branches that cooperate can
// signal each other through the kernel they share (file locks on the read-only files both see,
// inotify on them, the load), and a branch can tell when its sibling is judged and which of the
// base's files it changed; neither moves a score.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { RunState } from '../../src/core/state.js';
import { drive } from '../../src/local/runner.js';
import { openRun, startRun } from '../../src/local/start.js';
import {
  type AttackRepo,
  CAT_GRADER,
  cleanupAttackTemps,
  describeSandboxed,
  makeAttackRepo,
  runLocal,
  showFile,
} from './helpers.js';

afterAll(cleanupAttackTemps);

/** One fork round of two branches, run side by side, and nothing after it. */
const TWO_BRANCHES = {
  strategy: 'fork-and-flush',
  budget: 'total: 12\n  unit: tokens\n  episode: 6',
  extra: 'fork: {branches: 2, at: [], branch_budget: 0.5}',
};

function log(repo: AttackRepo, name: string): string {
  try {
    return readFileSync(join(repo.logs, name), 'utf8').trim();
  } catch {
    return '';
  }
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
      agentTimeout: 60,
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
    expect(b0?.result?.score, how).toBe(9);
    expect(round?.decision?.winner, how).toBe('r0.b0');
  }, 120_000);
});

describeSandboxed("a branch that goes for the objects its round borrows, to spoil its sibling's", () => {
  it('cannot write, truncate, remove or add to them: the repository stays whole and the sibling wins', async () => {
    const repo = makeAttackRepo({
      agent: 'sh {fx}/round6-objects-tamper.sh {logs}',
      grader: 'sh grade.sh',
      ...TWO_BRANCHES,
    });
    const gitDir = join(repo.dir, '.git');
    const blobs = ['grade.sh', 'value.txt'].map((f) => repo.git('rev-parse', `HEAD:${f}`));
    const { state } = await runLocal(repo, { concurrency: 2 });
    const { round, b0, b1 } = episodes(state);
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
    expect(b0?.result?.score, how).toBe(9);
    expect(round?.decision?.winner, how).toBe('r0.b0');
  }, 60_000);
});

describeSandboxed('what the kernel shares between two sandboxes of one round', () => {
  it('a branch finds nothing its sibling leaves in /dev/shm, /tmp, home, IPC, sockets, ports or /proc', async () => {
    const repo = makeAttackRepo({
      agent: 'sh {fx}/round6-kernel-shared.sh {logs}',
      grader: 'sh grade.sh',
      agentTimeout: 40,
      ...TWO_BRANCHES,
    });
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

describeSandboxed("a branch resumed after its repository was repacked, its sibling's result already in", () => {
  it("cannot copy the sibling's result out of a pack made since the round began: the view is a pack of what the bases reach", async () => {
    // As round3-neighbours' resume test (a round begun by a release that kept no view), but the
    // user's git packed the repository's loose objects in between (git gc, git maintenance), so
    // the sibling's result is no longer a loose object the view can leave out.
    const repo = makeAttackRepo({ agent: 'sh {fx}/round-copy.sh {logs}', grader: CAT_GRADER, ...TWO_BRANCHES });
    const run = await startRun({ dir: repo.dir, seed: 1, now: new Date('2026-12-05T11:00:00Z'), concurrency: 2 });
    const stop = new AbortController();
    const first = await drive(run.state, {
      ...run,
      signal: stop.signal,
      onEvent: (e) => e.type === 'episode-done' && e.episode.id === 'r0.b0' && stop.abort(),
    });
    expect(first.interrupted).toBe(true);
    rmSync(run.store.path('round-objects'), { recursive: true, force: true });
    repo.git('repack', '-a', '-d', '-q');
    writeFileSync(join(repo.logs, 'b0-committed'), '');
    const again = await openRun(repo.dir);
    const { state } = await drive(again.state, again);
    const { b0, b1 } = episodes(state);
    const gitDir = join(repo.dir, '.git');
    const commit = b1?.result?.commit ?? '';
    const how = `b1 copied ${showFile(gitDir, commit, 'copied.txt')?.trim()}, its marker.txt ${JSON.stringify(showFile(gitDir, commit, 'marker.txt'))}, note ${b1?.result?.note}`;
    expect(b0?.result?.score, how).toBe(9);
    expect(showFile(gitDir, commit, 'copied.txt'), how).toBe('none\n');
    expect(showFile(gitDir, commit, 'marker.txt'), how).toBeNull();
    expect(b1?.result?.score, how).toBe(3);
  }, 90_000);
});
