// Round 2: forkflush killed mid-run (SIGKILL of `forkflush run`, a child process), the run
// folder and the repository tampered as an agent would if it could reach them, and the run
// resumed (`forkflush resume`). The honest outcome: nothing of the killed attempt survives (its
// processes, its workspace files, its context), a forged result on the episode's branch is not
// taken for forkflush's, and the resumed run records the second attempt's work, sealed. A kill
// before the agent started (in setup) is charged nothing, and an unconfined agent dies with it.

import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { commitMessage as trailers } from '../../src/core/journal.js';
import { episodeBranch } from '../../src/core/names.js';
import { newSealKey, sealMessage, verifySeal } from '../../src/worker/seal.js';
import {
  attackTemp,
  CAT_GRADER,
  cleanRegrade,
  cleanupAttackTemps,
  commitHolds,
  commitMessage,
  currentCli,
  describeSandboxed,
  fingerprint,
  killProcessesUnder,
  makeAttackRepo,
  newestRunState,
  processesWith,
  runCli,
  showFile,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** `forkflush run` of the repository, started to be killed (SIGKILL) while it runs. */
function killableRun(dir: string, cwd: string, deadlineMs: number) {
  let cli: ChildProcess | undefined;
  const ended = runCli(['run', dir, '--seed', '1'], {
    cwd,
    deadlineMs,
    onStart: (child) => {
      cli = child;
    },
  });
  return { ended, kill: () => cli?.kill('SIGKILL') };
}
const size = (file: string) => (existsSync(file) ? statSync(file).size : -1);
const waitFor = async (ok: () => boolean, ms: number) => {
  for (let t = 0; t < ms && !ok(); t += 50) await sleep(50);
  return ok();
};

describeSandboxed('killed mid-run, tampered, resumed', () => {
  it('the resumed run records the second attempt only, and no forged result', async () => {
    const marker = unique('ff-resume');
    const repo = makeAttackRepo({
      agent: `sh {fx}/round2-resume.sh {logs} ${marker}`,
      grader: CAT_GRADER,
      agentTimeout: 20,
    });
    const root = join(repo.dir, '..');
    const gitDir = join(repo.dir, '.git');
    const base = repo.git('rev-parse', 'main');
    try {
      // 1. The first attempt: forkflush is killed (-9) once the agent has planted its things.
      // Bounds against a hang: idle, the agent is ready in 2 s; CI's busiest minutes take many times that.
      const first = killableRun(repo.dir, root, 120_000);
      expect(await waitFor(() => existsSync(join(repo.logs, 'ready')), 60_000), 'the first attempt got going').toBe(
        true,
      );
      first.kill();
      const killed = await first.ended;
      expect(killed.signal).toBe('SIGKILL');
      // Its agent and daemon went with it (bwrap dies with its parent, the namespace with bwrap).
      await sleep(500);
      expect(processesWith(marker)).toEqual([]);
      const beat = fingerprint(join(repo.logs, 'beat'));
      await sleep(400);
      expect(fingerprint(join(repo.logs, 'beat'))).toBe(beat);

      // 2. What an agent would do to the records if it could: a result of its own on the episode's
      //    branch, with trailers claiming 999 and a seal made with a key of its own.
      const state = newestRunState(repo.dir);
      if (!state) throw new Error('the first attempt left no state');
      expect(state.rounds[0]?.episodes[0]?.result).toBeUndefined();
      // Its start was saved before the agent ran, and nothing took it back: forkflush died with it.
      expect(state.rounds[0]?.episodes[0]?.unfinishedStarts).toBe(1);
      const episode = state.rounds[0]?.episodes[0];
      if (!episode) throw new Error('no episode');
      const tree = execFileSync('git', ['-C', repo.dir, 'mktree'], {
        input: `100644 blob ${execFileSync('git', ['-C', repo.dir, 'hash-object', '-w', '--stdin'], { input: '999\n' }).toString().trim()}\tvalue.txt\n`,
      })
        .toString()
        .trim();
      const forgedMessage = sealMessage(
        newSealKey(),
        trailers(state.id, state.config.budget.unit, episode, {
          score: 999,
          spent: 1,
          exit: 'finished',
          protectedChanged: [],
          agentSeconds: 1,
          graderSeconds: 1,
          wallSeconds: 2,
        }),
        tree,
        base,
      );
      const forged = execFileSync('git', ['-C', repo.dir, 'commit-tree', tree, '-p', base, '-F', '-'], {
        input: forgedMessage,
      })
        .toString()
        .trim();
      repo.git('update-ref', `refs/heads/${episodeBranch(state.id, 0, 0)}`, forged);

      // 3. Resumed.
      const resumed = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 25_000 });
      const after = newestRunState(repo.dir);
      expect(resumed.exitCode, resumed.out.slice(-1500)).toBe(0);
      expect(after?.status).toBe('finished');
      const result = after?.rounds[0]?.episodes[0]?.result;
      if (!result) throw new Error('no result after the resume');
      expect(readFileSync(join(repo.logs, 'attempts'), 'utf8').trim()).toBe('2');
      // The second start ended with its result; the killed one is counted, and charged its allowance.
      expect(after?.rounds[0]?.episodes[0]).toMatchObject({ killedStarts: 1, interruptedSpent: episode.allowance });
      expect(after?.rounds[0]?.episodes[0]).not.toHaveProperty('unfinishedStarts');
      expect(result.commit).not.toBe(forged);
      expect(result.score).toBe(5);
      expect(result.score).toBe(cleanRegrade(gitDir, result.commit, repo.grader));
      expect(repo.git('rev-parse', `${result.commit}^`)).toBe(base);
      const key = readFileSync(join(repo.dir, '.forkflush', state.id, 'seal.key'));
      expect(
        verifySeal(key, commitMessage(gitDir, result.commit), repo.git('rev-parse', `${result.commit}^{tree}`), base),
      ).toBe(true);
      // The second attempt started from a clean checkout and an empty context...
      const workspace = readFileSync(join(repo.logs, 'workspace-2'), 'latin1').split('\n').filter(Boolean);
      expect.soft(workspace.filter((f) => f.startsWith('planted'))).toEqual([]);
      expect.soft(readFileSync(join(repo.logs, 'context-2'), 'utf8').trim()).toBe('');
      // ...and its commit holds nothing of the first.
      expect.soft(showFile(gitDir, result.commit, 'planted.txt')).toBeNull();
      expect
        .soft(commitHolds(gitDir, result.commit, 'planted'), 'a file of the killed attempt in the commit')
        .toBe(false);
      expect(processesWith(marker)).toEqual([]);
    } finally {
      killProcessesUnder(root);
    }
  }, 240_000);

  it('charges nothing for the killed attempt whose agent never started', async () => {
    // The start was saved before setup (often the longest step: npm ci, pip install), so a kill
    // there was charged a whole allowance on resume, though no agent ran: a fork round killed in
    // its setups was charged K of them, past budget.total (found by a review).
    const gate = attackTemp('gate');
    const marker = `170.${Date.now() % 100000}${process.pid % 1000}`;
    // Setup sleeps in the episode's workspace (not in the initial grade's, nor once `skip` exists).
    const setup = `case "$PWD" in */workspaces/base) ;; *) test -f ${gate}/skip || sleep ${marker} ;; esac; true`;
    const repo = makeAttackRepo({
      agent: 'sh a.sh {logs}',
      grader: CAT_GRADER,
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      files: {
        'a.sh':
          'echo x >> "$1/starts"\necho $(( $(cat value.txt) + 1 )) > value.txt\necho \'{"spent": 1}\' > "$FORKFLUSH_USAGE_FILE"\n',
      },
      extra: `setup:\n  commands: [${JSON.stringify(setup)}]\n  cache: false\n  timeout: 120\n`,
    });
    const root = join(repo.dir, '..');
    try {
      const first = killableRun(repo.dir, root, 180_000);
      const inSetup = () => {
        try {
          return (
            // The sleep itself: the setup's shell names the marker too, also where it sleeps not.
            execFileSync('pgrep', ['-f', `^sleep ${marker}`])
              .toString()
              .trim() !== ''
          );
        } catch {
          return false;
        }
      };
      // A forkflush that ended first says why (a failure before any episode, not a slow machine).
      let ended: string | null = null;
      void first.ended.then((r) => {
        ended = `forkflush ended (${r.exitCode}) before the setup ran: ${r.out.slice(-1500)}`;
      });
      const reached = await waitFor(() => ended !== null || inSetup(), 150_000);
      expect(reached && inSetup(), ended ?? "the first episode's setup is running").toBe(true);
      first.kill();
      expect((await first.ended).signal).toBe('SIGKILL');
      expect(existsSync(join(repo.logs, 'starts')), 'no agent ran before the kill').toBe(false);
      // No start is saved before the agent runs: a kill in setup spent nothing.
      expect(newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.unfinishedStarts).toBeUndefined();
      killProcessesUnder(root);

      writeFileSync(join(gate, 'skip'), '');
      const resumed = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 90_000 });
      expect(resumed.exitCode, resumed.out.slice(-1500)).toBe(0);
      const after = newestRunState(repo.dir);
      expect(after?.status).toBe('finished');
      const episodes = after?.rounds.flatMap((r) => r.episodes) ?? [];
      const starts = readFileSync(join(repo.logs, 'starts'), 'utf8').trim().split('\n').length;
      expect(starts, 'each episode ran its agent once').toBe(episodes.length);
      // What the agents said they spent (1 each) is all the run spent: the killed setup cost nothing.
      expect(episodes.map((e) => e.interruptedSpent ?? 0)).toEqual(episodes.map(() => 0));
      expect(episodes.reduce((s, e) => s + (e.result?.spent ?? 0) + (e.interruptedSpent ?? 0), 0)).toBe(
        episodes.length,
      );
    } finally {
      killProcessesUnder(root);
      for (const p of processesWith(`sleep ${marker}`)) process.kill(p, 'SIGKILL');
    }
  }, 400_000);

  it('an unconfined agent (sandbox: off) does not outlive its killed forkflush', async () => {
    // Every command runs in a process group of its own, stopped by an 'exit' handler that a SIGKILL
    // never runs; outside bubblewrap (no --die-with-parent) the agent ran on, spending on its
    // provider and writing the workspace (found by a review; io/group-keeper.ts).
    const marker = unique('ff-orphan');
    const repo = makeAttackRepo({
      agent: `sh {repo}/../orphan.sh {logs} ${marker}`,
      grader: CAT_GRADER,
      agentTimeout: 60,
    });
    // The agent: says it is ready, then beats (a file that grows) for a minute.
    writeFileSync(
      join(repo.dir, '..', 'orphan.sh'),
      'echo $$ > "$1/pid"; touch "$1/ready"; i=0; while [ $i -lt 600 ]; do echo "$2" >> "$1/beat"; sleep 0.1; i=$((i+1)); done\n',
    );
    // The same run, unconfined: what `sandbox: auto` gives on a machine without bubblewrap.
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(config, readFileSync(config, 'utf8').replace('mode: required', 'mode: off'));
    repo.git('commit', '-qam', 'unconfined');
    const root = join(repo.dir, '..');
    try {
      const first = killableRun(repo.dir, root, 60_000);
      expect(await waitFor(() => existsSync(join(repo.logs, 'ready')), 30_000), 'the agent started').toBe(true);
      first.kill();
      expect((await first.ended).signal).toBe('SIGKILL');
      await sleep(1000);
      const beat = size(join(repo.logs, 'beat'));
      await sleep(800);
      const pid = readFileSync(join(repo.logs, 'pid'), 'utf8').trim();
      expect(
        size(join(repo.logs, 'beat')),
        `the killed run's agent (pid ${pid}) still writes its workspace 1.8 s after forkflush died`,
      ).toBe(beat);
      expect(processesWith(marker)).toEqual([]);
    } finally {
      killProcessesUnder(root);
      for (const p of processesWith(marker)) process.kill(p, 'SIGKILL');
    }
  }, 90_000);
});
