// An agent that fills the disk: forkflush cannot tell whose the full disk is (a sibling's, the
// machine's), so it records nothing for the episode, stops the run with one clear line, and runs
// the episode again on resume. On a tmpfs of its own (mounting one needs root: skipped loudly
// otherwise), so the machine's disk is never filled. And one whose context costs disk and time
// without bytes: a context past its entries is emptied, as one past its bytes is.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { RunState } from '../../src/core/state.js';
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
} from './helpers.js';

const mounted: string[] = [];
afterAll(() => {
  for (const dir of mounted) execFileSync('umount', [dir]);
  cleanupAttackTemps();
});

const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn('\n!!!!!!!! the full-disk attack test needs root to mount a tmpfs: SKIPPED !!!!!!!!\n');

describeSandboxed('an agent that fills the disk', () => {
  it.skipIf(!isRoot)('stops the run with one line, records nothing for it, and it runs again on resume', async () => {
    const root = attackTemp('disk');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', root]);
    mounted.push(root);
    // The first time only (the logs folder is shared by both tries): all the space there is.
    const agent = `sh -c 'if [ ! -e {logs}/filled ]; then touch {logs}/filled; head -c 64M /dev/urandom > fill.bin; fi; echo 5 > value.txt'`;
    const repo = makeAttackRepo({ agent, grader: CAT_GRADER, dir: root });
    const env = { PATH: process.env.PATH, HOME: root, LANG: 'C.UTF-8' };
    const first = await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs: 60_000, env });
    expect(first.exitCode, first.out).not.toBe(0);
    expect(first.out).toMatch(
      /the disk is full \(.*no space left on device.*\): r0\.b0 was not recorded; free some space and resume the run/i,
    );
    expect(first.out).not.toMatch(/\n\s+at /);
    const stopped = newestRunState(repo.dir) as RunState;
    expect(stopped.rounds[0]?.episodes[0]?.result).toBeUndefined();

    const second = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000, env });
    expect(second.exitCode, second.out).toBe(0);
    const state = newestRunState(repo.dir) as RunState;
    expect(state.rounds[0]?.episodes[0]?.result?.score).toBe(5);
    expect(JSON.parse(readFileSync(join(repo.dir, '.forkflush', state.id, 'state.json'), 'utf8')).id).toBe(state.id);
  });

  it.skipIf(!isRoot)(
    'a disk full before a resume: one line that says so and how to go on, then it goes on',
    async () => {
      const root = attackTemp('disk-full-resume');
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', root]);
      mounted.push(root);
      // The first episode is stopped by Ctrl-C while it waits; then the machine's disk fills up.
      const agent = `sh -c 'if [ ! -e {logs}/waited ]; then touch {logs}/waited; sleep 60; fi; echo 5 > value.txt'`;
      const repo = makeAttackRepo({ agent, grader: CAT_GRADER, dir: root, agentTimeout: 120 });
      const env = { PATH: process.env.PATH, HOME: root, LANG: 'C.UTF-8' };
      const waited = join(root, 'logs', 'waited');
      const first = await runCli(['run', repo.dir, '--seed', '1'], {
        cwd: root,
        deadlineMs: 60_000,
        env,
        // Stopped once the agent waits (it prints nothing until the episode ends).
        onStart: onceExists(waited, (child) => child.kill('SIGINT')),
      });
      expect(first.exitCode, first.out).toBe(130);
      execFileSync('sh', ['-c', `cat /dev/zero > ${join(root, 'filler')} 2>/dev/null || true`]);

      const full = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000, env });
      expect(full.exitCode, full.out).toBe(1);
      expect(full.out).toMatch(/forkflush: the disk is full \(.*no space left on device.*\)/i);
      expect(full.out).toMatch(/then: forkflush resume .* --run \S+/);
      expect(full.out).not.toMatch(/\n\s+at /);

      rmSync(join(root, 'filler'));
      const again = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000, env });
      expect(again.exitCode, again.out).toBe(0);
      expect((newestRunState(repo.dir) as RunState).rounds[0]?.episodes[0]?.result?.score).toBe(5);
    },
  );
});

describeSandboxed('a context that costs disk and time without bytes', () => {
  // 300,000 empty folders in a context (10 s of mkdir) counted 0 bytes against its 1 GiB bound: a
  // run of two serial 6-token episodes sat silent for 725 s, each sweep walking them (~19 s) and
  // each carried copy taking ~117 s and 1.2 GB of disk, K copies per fork round (found by a review).
  it('120,000 empty folders in the context: emptied and said, and a two-episode serial run ends in minutes', async () => {
    const repo = makeAttackRepo({
      agent:
        'node -e \'const fs=require("fs"),c=process.env.FORKFLUSH_CONTEXT_DIR;for(let a=0;a<120;a++){fs.mkdirSync(c+"/d/"+a,{recursive:true});for(let b=0;b<1000;b++)fs.mkdirSync(c+"/d/"+a+"/"+b)}\' && ' +
        'echo 6 > value.txt && echo \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"',
      grader: CAT_GRADER,
      // Two serial episodes: the second carries the first one's context.
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      agentTimeout: 60,
    });
    const root = join(repo.dir, '..');
    try {
      // A hang check, not a timing: 725 s (300,000 folders) on an idle machine before the bound; with
      // 150,000, 86 s alone, 180 s beside a busy suite, and 220 s for the first episode alone on a
      // machine at a load of 9 (a full suite, helpers and CPU burners): 120,000 (just over the
      // bound, 100,000) and a bound of 540 s, still below what the fault took idle.
      const cli = await runCli(['run', repo.dir, '--seed', '1'], { cwd: root, deadlineMs: 540_000 });
      const state = newestRunState(repo.dir);
      expect(cli.timedOut, cli.out.slice(-800)).toBe(false);
      expect(state?.status, cli.out.slice(-800)).toBe('finished');
      const notes = state?.rounds.flatMap((r) => r.episodes.map((e) => e.result?.note ?? '')) ?? [];
      expect(notes.every((n) => n.includes('everything in a context of more than 100,000 files and folders'))).toBe(
        true,
      );
    } finally {
      killProcessesUnder(root);
    }
  }, 600_000);
});
