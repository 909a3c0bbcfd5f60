// What could make a run hang for good, on real git: a git command that never answers becomes the
// episode's failure (a result with no score that says what stalled), and an episode that killed
// forkflush every time it ran is given up instead of being started on every resume.
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentFor } from '../../src/agents/specs.js';
import { MAX_UNFINISHED_STARTS } from '../../src/core/method.js';
import { allEpisodes } from '../../src/core/state.js';
import { advance } from '../../src/core/work.js';
import { drive } from '../../src/local/runner.js';
import { startRun } from '../../src/local/start.js';
import { runEpisode } from '../../src/worker/episode.js';
import { makeTaskRepo } from './task-repo.js';

const ONE_EPISODE = 'total: 6\n  unit: tokens\n  episode: 6';
const NOW = new Date('2026-11-30T10:00:00Z');
describe('a git command that never answers', () => {
  it("is the episode's failure: no score, a reason naming the command and what it waited for, within its bound", async () => {
    const repo = makeTaskRepo({
      budget: ONE_EPISODE,
      // The agent waits for the test (a file `go` in its workspace), then does its work.
      agentCommand: 'sh agent.sh',
      files: {
        'agent.sh':
          'while [ ! -e go ]; do sleep 0.05; done\necho 5 > value.txt\necho \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"\n',
      },
      extra: 'strategy: single-run\nsetup: "mkdir -p deps && echo x > deps/lib"',
    });
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    const state = advance(run.state).state;
    const episode = state.rounds[0]?.episodes[0];
    if (!episode) throw new Error('no episode');
    const prepared = await run.forge.prepareEpisode(state, episode);
    const started = Date.now();
    const running = runEpisode({
      runId: state.id,
      config: state.config,
      episode,
      phase: 'opening',
      own: prepared.own.with({ timeoutMs: 1_000 }),
      places: prepared.places,
      checkoutIndex: prepared.checkoutIndex,
      scratchDir: prepared.scratchDir,
      prompt: 'p',
      agent: agentFor(state.config),
      isolation: run.isolation,
    });
    // Once setup is done, the ignore file of what it made (forkflush's own, read by the snapshot's
    // git only) becomes a FIFO: no sweep of the workspace reaches it, as nothing the sweep misses would.
    const excludes = join(prepared.scratchDir, 'setup.exclude');
    for (let i = 0; i < 400 && !existsSync(excludes); i++) await new Promise((r) => setTimeout(r, 50));
    rmSync(excludes);
    execFileSync('mkfifo', [excludes]);
    writeFileSync(join(prepared.places.workspace, 'go'), '');
    const result = await running;
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(result.score).toBeNull();
    expect(result.reason).toBe(
      "the workspace could not be recorded (forkflush's git stalled: `git ls-files --others --modified --exclude-standard` did not answer in 1 s " +
        `(it was waiting to open ${JSON.stringify(excludes)}))`,
    );
    // The agent ran and is charged; the episode keeps its base's files.
    expect(result.exit).toBe('finished');
    expect(result.spent).toBe(6);
    expect(repo.git('rev-parse', `${result.commit}^`)).toBe(episode.base);
    expect(repo.git('show', `${result.commit}:value.txt`)).toBe('0');
  });
});

describe('an episode that killed forkflush every time it ran', () => {
  it(`is given up after ${MAX_UNFINISHED_STARTS} starts, with a result that says so, its agent not started again`, async () => {
    const repo = makeTaskRepo({ budget: ONE_EPISODE, extra: 'strategy: single-run' });
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    const opened = advance(run.state).state;
    // As three runs killed while it ran left it (the runner records each start before the agent).
    const killed = {
      ...opened,
      rounds: opened.rounds.map((r) => ({
        ...r,
        episodes: r.episodes.map((e) => ({ ...e, unfinishedStarts: MAX_UNFINISHED_STARTS, interruptedSpent: 2 })),
      })),
    };
    await run.store.save(killed);
    const { state } = await drive(killed, run);
    expect(state.status).toBe('finished');
    const [episode] = allEpisodes(state);
    expect(episode?.result).toMatchObject({ score: null, exit: 'crash', spent: 0, commit: episode?.base });
    // What the killed attempts spent died with them: each is charged its allowance, with what was reported.
    expect(episode).toMatchObject({ interruptedSpent: 2 + MAX_UNFINISHED_STARTS * (episode?.allowance ?? 0) });
    expect(episode?.result?.reason).toBe(
      'started 3 times, and each time forkflush was killed before the episode ended (out of memory, a reboot, or a stop that did not finish in time): it is not started again',
    );
    expect(repo.calls().map((c) => c.episode)).not.toContain('r0.b0');
  });

  it('counts a start while the episode runs, and takes it back when forkflush itself stops the episode', async () => {
    const repo = makeTaskRepo({ agent: 'hang', budget: ONE_EPISODE, extra: 'strategy: single-run' });
    const run = await startRun({ dir: repo.dir, seed: 1, now: NOW });
    const stop = new AbortController();
    const driving = drive(run.state, { ...run, signal: stop.signal });
    let counted: number | undefined;
    for (let i = 0; i < 200 && counted === undefined; i++) {
      await new Promise((r) => setTimeout(r, 50));
      counted = allEpisodes(await run.store.load().catch(() => run.state))[0]?.unfinishedStarts;
    }
    expect(counted).toBe(1);
    stop.abort('interrupted');
    const { state, interrupted } = await driving;
    expect(interrupted).toBe(true);
    expect(allEpisodes(state)[0]?.unfinishedStarts).toBeUndefined();
    expect(allEpisodes(await run.store.load())[0]?.unfinishedStarts).toBeUndefined();
  });
});
