// The host failing under an unattended run: a disk that fills up or turns read-only, a power cut
// that leaves a file or a ref empty. Each ends in a clear red stop with nothing lost, and a resume
// goes on. Full disks are tmpfs mounts of their own (root only: skipped otherwise, and said so by
// the skip), unmounted after.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { spent } from '../../src/core/budget.js';
import { bestBranch } from '../../src/core/names.js';
import type { RunState } from '../../src/core/state.js';
import { writeAtomic } from '../../src/local/store.js';
import {
  attackTemp,
  CAT_GRADER,
  cleanupAttackTemps,
  describeSandboxed,
  killProcessesUnder,
  makeAttackRepo,
  newestRunState,
  onceExists,
  runCli,
} from '../attacks/helpers.js';

const mounted: string[] = [];
afterAll(() => {
  for (const dir of mounted.splice(0).reverse()) execFileSync('umount', ['-l', dir]);
  cleanupAttackTemps();
});

const isRoot = process.getuid?.() === 0;

/** A tmpfs of `size` at a fresh folder: a disk that fills up without touching the machine's. */
function smallDisk(prefix: string, size: string): string {
  const root = attackTemp(prefix);
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', root]);
  mounted.push(root);
  return root;
}

const envFor = (root: string) => ({ PATH: process.env.PATH, HOME: root, LANG: 'C.UTF-8' });

describeSandboxed('the host fails under an overnight run', () => {
  it.skipIf(!isRoot)(
    "a full disk while a lineage's context is carried to its next episode stops the run (red, 'disk is full'); the episode is not run with its conversation silently thrown away",
    async () => {
      const root = smallDisk('ctx-full', '15m');
      // Episode 1 leaves a 9 MB conversation in its context; the carried copy for episode 2 does not fit.
      const agent =
        `sh -c 'if [ ! -e {logs}/first ]; then touch {logs}/first; head -c 9M /dev/urandom > "$FORKFLUSH_CONTEXT_DIR/conversation.bin"; echo 5 > value.txt; ` +
        `else ls "$FORKFLUSH_CONTEXT_DIR" > {logs}/second-saw; echo 6 > value.txt; fi'`;
      const repo = makeAttackRepo({
        agent,
        grader: CAT_GRADER,
        dir: root,
        budget: 'total: 12\n  unit: tokens\n  episode: 6',
      });
      try {
        const run = await runCli(['run', repo.dir, '--seed', '1'], {
          cwd: root,
          deadlineMs: 60_000,
          env: envFor(root),
        });
        const state = newestRunState(repo.dir) as RunState;
        const second = state.rounds.flatMap((r) => r.episodes)[1];
        const saw = existsSync(join(repo.logs, 'second-saw'))
          ? readFileSync(join(repo.logs, 'second-saw'), 'utf8')
          : '(not run)';
        const facts = `exit ${run.exitCode}; second episode saw in its context: ${JSON.stringify(saw)}; its note: ${JSON.stringify(second?.result?.note)}\n${run.out.slice(-600)}`;
        expect(run.exitCode, facts).not.toBe(0);
        expect(run.out, facts).toMatch(/disk is full/i);
        expect(second?.result, facts).toBeUndefined();
      } finally {
        killProcessesUnder(root);
      }
    },
    90_000,
  );

  it.skipIf(!isRoot)(
    "a disk that fills up while the judge grades a branch stops the run (red, 'disk is full') with the branch unrecorded, and resume grades it once space is freed; the run does not end green with the branch's work voided",
    async () => {
      const root = smallDisk('judge-full', '24m');
      // The second episode's agent works a while; meanwhile the machine's disk fills up (a filler
      // outside the repository, 2 MB left: enough to commit, not for the grader's 4 MB build).
      const agent =
        `sh -c 'if [ ! -e {logs}/first ]; then touch {logs}/first; echo 5 > value.txt; ` +
        `else touch {logs}/second; sleep 3; echo 6 > value.txt; fi'`;
      const grader = "sh -c 'head -c 4M /dev/zero > build.out || exit 1; cat value.txt'";
      const repo = makeAttackRepo({ agent, grader, dir: root, budget: 'total: 12\n  unit: tokens\n  episode: 6' });
      const filler = join(root, 'filler');
      const second = join(repo.logs, 'second');
      try {
        const run = await runCli(['run', repo.dir, '--seed', '1'], {
          cwd: root,
          deadlineMs: 60_000,
          env: envFor(root),
          onStart: onceExists(second, () => {
            execFileSync('sh', ['-c', `cat /dev/zero > ${filler} 2>/dev/null; truncate -s -2M ${filler}`]);
          }),
        });
        const state = newestRunState(repo.dir) as RunState;
        const r1 = state.rounds.flatMap((r) => r.episodes)[1];
        const facts = `exit ${run.exitCode}; status ${state.status}; r1.b0 result: ${JSON.stringify({ score: r1?.result?.score, reason: r1?.result?.reason, machineShort: r1?.result?.machineShort })}; decision: ${JSON.stringify(state.rounds.at(-1)?.decision)}\n${run.out.slice(-500)}`;
        expect(run.exitCode, facts).not.toBe(0);
        expect(run.out, facts).toMatch(/disk is full/i);
        expect(r1?.result, facts).toBeUndefined();

        rmSync(filler);
        const again = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000, env: envFor(root) });
        expect(again.exitCode, again.out).toBe(0);
        expect((newestRunState(repo.dir) as RunState).best?.score, again.out).toBe(6);
      } finally {
        killProcessesUnder(root);
      }
    },
    90_000,
  );

  it.skipIf(!isRoot)(
    "the repository's .git turned read-only mid-run (a disk remounted read-only after an I/O error): a red stop naming it, and the attempt is charged what its agent reported (1 token), not its whole allowance as if forkflush had been killed",
    async () => {
      const root = attackTemp('git-ro');
      // Reports 1 token of its 6-token allowance every time it runs.
      const agent =
        `sh -c 'echo "{\\"spent\\": 1}" > "$FORKFLUSH_USAGE_FILE"; ` +
        `if [ ! -e {logs}/started ]; then touch {logs}/started; sleep 3; fi; echo 5 > value.txt'`;
      const repo = makeAttackRepo({ agent, grader: CAT_GRADER, dir: root });
      const gitDir = join(repo.dir, '.git');
      const started = join(repo.logs, 'started');
      let readOnly = false;
      try {
        const run = await runCli(['run', repo.dir, '--seed', '1'], {
          cwd: root,
          deadlineMs: 60_000,
          env: envFor(root),
          onStart: onceExists(started, () => {
            execFileSync('mount', ['--bind', gitDir, gitDir]);
            mounted.push(gitDir);
            execFileSync('mount', ['-o', 'remount,bind,ro', gitDir]);
            readOnly = true;
          }),
        });
        expect(readOnly).toBe(true);
        expect(run.exitCode, run.out).toBe(1);
        expect(run.out).toMatch(/Read-only file system/);
        expect((newestRunState(repo.dir) as RunState).rounds[0]?.episodes[0]?.result).toBeUndefined();

        execFileSync('umount', [gitDir]);
        mounted.splice(mounted.indexOf(gitDir), 1);
        const again = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000, env: envFor(root) });
        expect(again.exitCode, again.out).toBe(0);
        const state = newestRunState(repo.dir) as RunState;
        const e = state.rounds[0]?.episodes[0];
        expect(e?.result?.score).toBe(5);
        const facts = `run spent ${spent(state)} of a 6-token budget: result ${e?.result?.spent}, earlier attempt charged ${e?.interruptedSpent} (killedStarts ${e?.killedStarts})\n${again.out.slice(-900)}`;
        expect(e?.interruptedSpent, facts).toBe(1);
        expect(e?.killedStarts, facts).toBeUndefined();
        // The rest of the budget went to more episodes of 1 token: none past the total.
        expect(spent(state), facts).toBeLessThanOrEqual(6);
      } finally {
        killProcessesUnder(root);
      }
    },
    90_000,
  );

  it('a run whose seal.key a power cut left empty: resume stops naming seal.key, it does not go on making unsealed result commits', async () => {
    const root = attackTemp('seal');
    const agent = `sh -c 'if [ ! -e {logs}/waited ]; then touch {logs}/waited; sleep 60; fi; echo 5 > value.txt'`;
    const repo = makeAttackRepo({ agent, grader: CAT_GRADER, dir: root, agentTimeout: 120 });
    const waited = join(repo.logs, 'waited');
    try {
      const first = await runCli(['run', repo.dir, '--seed', '1'], {
        cwd: root,
        deadlineMs: 60_000,
        env: envFor(root),
        onStart: onceExists(waited, (child) => child.kill('SIGINT')),
      });
      expect(first.exitCode, first.out).toBe(130);
      const id = (newestRunState(repo.dir) as RunState).id;
      const key = join(repo.dir, '.forkflush', id, 'seal.key');
      expect(readFileSync(key).length).toBe(32);
      truncateSync(key, 0);

      const again = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000, env: envFor(root) });
      const commit = (newestRunState(repo.dir) as RunState).rounds[0]?.episodes[0]?.result?.commit;
      const message = commit ? repo.git('log', '-1', '--format=%B', commit) : '(no result)';
      const facts = `resume exit ${again.exitCode}; result commit sealed: ${/Forkflush-Seal:/.test(message)}\n${again.out.slice(0, 400)}`;
      expect(again.exitCode, facts).not.toBe(0);
      expect(again.out, facts).toMatch(/seal\.key/);
    } finally {
      killProcessesUnder(root);
    }
  }, 90_000);

  it.skipIf(!isRoot)(
    'a state.json write refused by a full disk leaves the old file whole and no half-written temp file behind in the run folder',
    async () => {
      const root = smallDisk('atomic', '1m');
      const file = join(root, 'state.json');
      await writeAtomic(file, '{"version":1}');
      const refused = await writeAtomic(file, 'x'.repeat(2 * 1024 * 1024)).then(
        () => null,
        (e: NodeJS.ErrnoException) => e.code,
      );
      expect(refused).toBe('ENOSPC');
      expect(readFileSync(file, 'utf8')).toBe('{"version":1}');
      const left = readdirSync(root).map((f) => `${f} (${statSync(join(root, f)).size} bytes)`);
      expect(left).toEqual([`state.json (13 bytes)`]);
    },
  );

  it("a finished run whose best branch a power cut left empty (git's loose ref): resume names it, the commit and the way out and exits 1, never 0 with a take-home command that fails; once the ref is removed, resume restores it", async () => {
    const root = attackTemp('best-ref');
    const repo = makeAttackRepo({ agent: "sh -c 'echo 5 > value.txt'", grader: CAT_GRADER, dir: root });
    try {
      const run = await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs: 60_000, env: envFor(root) });
      expect(run.exitCode, run.out).toBe(0);
      const state = newestRunState(repo.dir) as RunState;
      const best = bestBranch(state.id);
      expect(repo.git('rev-parse', best)).toBe(state.best?.commit);
      truncateSync(join(repo.dir, '.git', 'refs', 'heads', best), 0);

      const again = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000, env: envFor(root) });
      const merge = execFileSync('sh', ['-c', `git merge --no-edit ${best} 2>&1; echo "exit $?"`], {
        cwd: repo.dir,
        encoding: 'utf8',
      });
      const facts = `resume exit ${again.exitCode}; then \`git merge ${best}\`: ${merge.trim()}\n${again.out.slice(-400)}`;
      // git will not overwrite a broken ref: the resume names it, the commit and the way out.
      expect(again.exitCode, facts).toBe(1);
      expect(again.out, facts).toContain(
        `the best branch ${best} cannot be set to the best workspace, ${state.best?.commit}`,
      );
      expect(again.out, facts).toContain(`git merge --no-overwrite-ignore ${state.best?.commit}`);
      const file = repo.git('rev-parse', '--git-path', `refs/heads/${best}`);
      rmSync(join(repo.dir, file));
      const restored = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000, env: envFor(root) });
      expect(restored.exitCode, restored.out).toBe(0);
      expect(repo.git('rev-parse', best)).toBe(state.best?.commit);
    } finally {
      killProcessesUnder(root);
    }
  }, 90_000);
});
