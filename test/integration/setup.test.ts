// setup: in a local run, on real git repositories: it prepares the workspace before the agent and
// the judge's checkout before grading, its outputs stay out of the result, a failure is its own
// kind of result, and a round whose every setup failed stops the run.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { agentFor } from '../../src/agents/specs.js';
import { UserError } from '../../src/core/errors.js';
import { parseCommitMessage } from '../../src/core/journal.js';
import { episodeBranch } from '../../src/core/names.js';
import { renderReport } from '../../src/core/report.js';
import { allEpisodes, type EpisodeResult } from '../../src/core/state.js';
import { advance } from '../../src/core/work.js';
import { drive } from '../../src/local/runner.js';
import { retryStop, startRun } from '../../src/local/start.js';
import { runEpisode } from '../../src/worker/episode.js';
import { cli } from './cli-io.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

const ONE_EPISODE = 'total: 6\n  unit: tokens\n  episode: 6';
const NOW = new Date('2026-11-30T10:00:00Z');

/**
 * A task whose grader needs what setup makes: setup writes deps/lib.sh (the "installed
 * dependency") and build.txt, and changes a tracked file (which forkflush puts back); the
 * protected grader sources deps/lib.sh, so it fails wherever setup did not run.
 */
function setupTask(o: { setup?: string; extra?: string; budget?: string } = {}): TaskRepo {
  return makeTaskRepo({
    grader: 'sh grade.sh',
    budget: o.budget ?? ONE_EPISODE,
    files: {
      'grade.sh': '. ./deps/lib.sh\necho $(( $(cat value.txt) + BONUS ))\n',
      'setup.sh':
        'test -z "$FF_TEST_SETUP_FAIL" || { echo "Error: the registry is down" >&2; exit 3; }\n' +
        'mkdir -p deps && echo BONUS=0 > deps/lib.sh && echo built > build.txt && echo changed >> TASK.md\n',
    },
    extra: `setup: ${o.setup ?? 'sh setup.sh'}\n${o.extra ?? 'strategy: single-run'}`,
  });
}

/** An opening round of two branches, whose setups fail while FF_TEST_SETUP_FAIL is set. */
const TWO_BRANCHES = {
  setup: '{commands: [sh setup.sh], env: [FF_TEST_*]}',
  budget: 'total: 24\n  unit: tokens\n  episode: 6',
  extra: 'fork: {branches: 2, at: [0.5], branch_budget: 0.25}',
};

function tracked(repo: TaskRepo, commit: string): string[] {
  return repo.git('ls-tree', '-r', '--name-only', commit).split('\n');
}

afterEach(() => {
  delete process.env.FF_TEST_SETUP_FAIL;
});

describe('setup in a local run', () => {
  it('prepares the workspace before the agent and the judge checkout before grading; its outputs are not committed', async () => {
    const repo = setupTask();
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    // The initial workspace was graded after setup too.
    expect(run.state.base).toMatchObject({ score: 0 });
    const { state } = await drive(run.state, run);
    expect(state.status).toBe('finished');
    const [episode] = allEpisodes(state);
    const result = episode?.result as EpisodeResult;
    // The agent graded its workspace with FORKFLUSH_GRADE (which needs deps/lib.sh) and finished.
    expect(result).toMatchObject({ exit: 'finished', spent: 5.4 });
    const value = Number(repo.git('show', `${result.commit}:value.txt`));
    expect(value).toBeGreaterThan(0);
    expect(result.score).toBe(value);
    expect(repo.calls()).toHaveLength(1);
    const files = tracked(repo, result.commit);
    expect(files).toContain('value.txt');
    expect(files).not.toContain('deps/lib.sh');
    expect(files).not.toContain('build.txt');
    // What setup did to a tracked file was undone before the agent started.
    expect(repo.git('show', `${result.commit}:TASK.md`)).toBe('Make the number in value.txt as large as you can.');
    const scratch = run.store.scratch(episode?.id ?? '');
    expect(readFileSync(join(scratch, 'setup.log'), 'utf8')).toMatch(
      /\$ sh setup\.sh\n[\s\S]*put back 1 tracked file\(s\) setup changed: TASK\.md[\s\S]*setup ran in the workspace: 2 untracked path\(s\)/,
    );
    // The judge ran setup in its own checkout before grading.
    expect(readFileSync(join(scratch, 'grader.log'), 'utf8')).toMatch(
      new RegExp(
        `^\\$ sh setup\\.sh\\n[\\s\\S]*\\(setup in the judge's checkout: done\\)\\n\\$ sh grade\\.sh\\n${value}\\n$`,
      ),
    );
  });

  it("runs setup outside the agent's time budget", async () => {
    // An agent that works until its time is up: 1.2 s, after 2 s of setup in its workspace.
    const repo = makeTaskRepo({
      agent: 'hang',
      budget: 'total: 0.02\n  unit: minutes\n  episode: 0.02',
      files: { 'slow-setup.sh': 'sleep 2\n' },
      extra: 'setup: sh slow-setup.sh\nstrategy: single-run',
    });
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    const { state } = await drive(run.state, run);
    const result = allEpisodes(state)[0]?.result as EpisodeResult;
    // Charged its 1.2 s, not the setup's 2 s: with them it would be past 0.05 minutes.
    expect(result.exit).toBe('budget');
    expect(result.spent).toBeGreaterThanOrEqual(0.02);
    expect(result.spent).toBeLessThan(0.04);
    // Setup ran twice (the workspace, the judge's checkout), outside the agent's time.
    expect(result.wallSeconds).toBeGreaterThan(4 + 1.2);
  });

  it('refuses to start when setup fails on the initial workspace (exit 2), and leaves no run folder', async () => {
    // FF_TEST_SETUP_FAIL reaches setup only because setup.env names it.
    const repo = setupTask({ setup: '{commands: [sh setup.sh], env: [FF_TEST_*]}' });
    process.env.FF_TEST_SETUP_FAIL = '1';
    const started = startRun({ dir: repo.dir, seed: 1, now: NOW });
    await expect(started).rejects.toThrow(UserError);
    await expect(started).rejects.toThrow(
      /^setup failed: `sh setup\.sh` exited with code 3: Error: the registry is down, in a clean checkout of the initial workspace/,
    );
    expect(readdirSync(join(repo.dir, '.forkflush'))).toEqual([]);
  });

  it('a setup failure is a result of its own: no agent, nothing spent; when every branch fails the run stops (exit 2)', async () => {
    const repo = setupTask(TWO_BRANCHES);
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    // The episodes' setups fail (the initial one did not).
    process.env.FF_TEST_SETUP_FAIL = '1';
    const { state, stopped } = await drive(run.state, run);
    expect(stopped?.code).toBe(2);
    expect(stopped?.message).toMatch(
      /^setup failed in every branch of round 0 \(opening\) on commit [0-9a-f]{10} \(setup failed: `sh setup\.sh` exited with code 3: Error: the registry is down\), so no agent could work and the run stopped/,
    );
    expect(repo.calls()).toEqual([]);
    const episodes = allEpisodes(state);
    expect(episodes).toHaveLength(2);
    for (const e of episodes) {
      expect(e.result).toMatchObject({
        exit: 'setup',
        score: null,
        spent: 0,
        reason: 'setup failed: `sh setup.sh` exited with code 3: Error: the registry is down',
      });
      // Committed on the base, with the base's files and the journal line.
      const commit = e.result?.commit ?? '';
      expect(repo.git('rev-parse', `${commit}^`)).toBe(e.base);
      expect(repo.git('diff', '--name-only', e.base, commit)).toBe('NOTES.md');
    }
    // The round is not decided: no branch tried, so none can win or lose it.
    expect(state.rounds[0]?.decision).toBeUndefined();
    expect(state.status).toBe('running');
    const report = renderReport(state);
    expect(report).toContain('setup-failed');
    expect(report).toContain('| setup |');
  });

  it('after the cause is fixed, a resume runs the round its setup stopped again, from the same bases', async () => {
    const repo = setupTask(TWO_BRANCHES);
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    process.env.FF_TEST_SETUP_FAIL = '1';
    const first = await drive(run.state, run);
    expect(first.stopped?.code).toBe(2);
    const failed = allEpisodes(first.state).map((e) => ({
      id: e.id,
      base: e.base,
      commit: e.result?.commit,
      branch: `refs/heads/${episodeBranch(first.state.id, e.round, e.branch)}`,
    }));
    // The registry is back.
    delete process.env.FF_TEST_SETUP_FAIL;
    const open = { ...run, state: first.state };
    expect(await retryStop(open)).toBe(0);
    expect(await retryStop(open)).toBeNull(); // nothing more to retry
    for (const e of failed) expect(repo.git('rev-parse', e.branch)).toBe(e.base);
    const second = await drive(open.state, open);
    expect(second.stopped).toBeUndefined();
    expect(second.state.status).toBe('finished');
    const round0 = second.state.rounds[0]?.episodes ?? [];
    expect(round0.map((e) => e.result?.exit)).toEqual(['finished', 'finished']);
    for (const e of round0) {
      expect(failed.find((f) => f.id === e.id)?.commit).not.toBe(e.result?.commit);
      expect(repo.git('rev-parse', `${e.result?.commit}^`)).toBe(e.base);
    }
    // Every episode ran its agent once: the retried ones and the rounds after them.
    expect(repo.calls()).toHaveLength(allEpisodes(second.state).length);
  });

  it('says how to resume after a setup stop, and says so when it runs the round again', async () => {
    const repo = setupTask(TWO_BRANCHES);
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    process.env.FF_TEST_SETUP_FAIL = '1';
    const stopped = await cli('resume', repo.dir);
    expect(stopped.code).toBe(2);
    expect(stopped.err).toContain('resume the run: its round runs again');
    expect(stopped.err).toContain(`after the fix: forkflush resume ${run.info.taskDir} --run ${run.state.id}`);
    delete process.env.FF_TEST_SETUP_FAIL;
    const again = await cli('resume', repo.dir, '--run', run.state.id);
    expect(again.code).toBe(0);
    expect(again.out).toContain("round 0: every branch's setup failed last time; running it again");
    expect(again.err).not.toContain('after the fix');
  });

  it('says when setup runs out of its time', async () => {
    const repo = makeTaskRepo({
      grader: 'sh grade.sh',
      budget: ONE_EPISODE,
      files: { 'setup.sh': 'test -z "$FF_TEST_SETUP_FAIL" || sleep 30\n' },
      extra: 'setup: {commands: [sh setup.sh], timeout: 1, env: [FF_TEST_SETUP_FAIL]}\nstrategy: single-run',
    });
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    process.env.FF_TEST_SETUP_FAIL = '1';
    const started = Date.now();
    const { state, stopped } = await drive(run.state, run);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(stopped?.code).toBe(2);
    expect(allEpisodes(state)[0]?.result).toMatchObject({
      exit: 'setup',
      reason: 'setup timed out after 1 s (setup.timeout), in `sh setup.sh`',
    });
  });

  it('with setup.cache, the episodes of one base share one setup; the judge still runs its own', async () => {
    const repo = setupTask({
      setup: '{commands: [sh setup.sh], cache: true}',
      budget: 'total: 24\n  unit: tokens\n  episode: 6',
      extra: 'fork: {branches: 2, at: [0.5], branch_budget: 0.25}',
    });
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    const { state } = await drive(run.state, run);
    expect(state.status).toBe('finished');
    const forks = state.rounds.filter((r) => r.kind === 'fork');
    expect(forks).toHaveLength(2);
    const byRound = forks.map((r) =>
      r.episodes.map((e) => readFileSync(join(run.store.scratch(e.id), 'setup.log'), 'utf8')),
    );
    for (const logs of byRound) {
      // One episode of each round's base ran setup; the other got a copy of what it made.
      expect(logs.filter((l) => l.includes('setup ran in the workspace'))).toHaveLength(1);
      expect(
        logs.filter((l) => /setup was copied from the setup cache \(made in r\d\.b\d, of the same base\)/.test(l)),
      ).toHaveLength(1);
    }
    for (const e of allEpisodes(state)) {
      // Every agent had deps/lib.sh (its FORKFLUSH_GRADE needs it) and finished; none committed it.
      expect(e.result).toMatchObject({ exit: 'finished' });
      expect(tracked(repo, e.result?.commit ?? '')).not.toContain('deps/lib.sh');
      expect(readFileSync(join(run.store.scratch(e.id), 'grader.log'), 'utf8')).toContain(
        "(setup in the judge's checkout: done)",
      );
    }
  });

  it("an agent CLI that could not be installed (the Action's setupProblem) is a setup result: no setup, no agent", async () => {
    const repo = setupTask();
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    const state = advance(run.state).state;
    const episode = state.rounds[0]?.episodes[0];
    if (!episode) throw new Error('no episode');
    const prepared = await run.forge.prepareEpisode(state, episode);
    const problem =
      "the agent's CLI @openai/codex@0.171.0 could not be installed: npm exited with code 1: npm error 404";
    const result = await runEpisode({
      runId: state.id,
      config: state.config,
      episode,
      phase: 'opening',
      own: prepared.own,
      places: prepared.places,
      checkoutIndex: prepared.checkoutIndex,
      scratchDir: prepared.scratchDir,
      prompt: 'p',
      agent: agentFor(state.config),
      isolation: run.isolation,
      setupProblem: problem,
    });
    expect(result).toMatchObject({ exit: 'setup', score: null, spent: 0, reason: problem, agentSeconds: 0 });
    expect(repo.calls()).toEqual([]);
    // Setup never ran there either: nothing was made in the workspace.
    expect(readdirSync(prepared.places.workspace)).not.toContain('deps');
    const message = repo.git('log', '-1', '--format=%B', result.commit);
    expect(parseCommitMessage(message, result.commit)?.result).toMatchObject({ exit: 'setup', reason: problem });
  });
});
