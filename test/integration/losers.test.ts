// fork.losers: journal in whole local runs: the lineage's journal holds, for every fork round
// with a winner, what each losing branch wrote, under its id and score, once, also when the run
// is stopped in the middle of a round and resumed.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sectionFor } from '../../src/core/losers.js';
import { allEpisodes, type Episode, type RunState } from '../../src/core/state.js';
import { drive } from '../../src/local/runner.js';
import { openRun, startRun } from '../../src/local/start.js';
import { cliWith } from './cli-io.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

const SHORT = 'fork: {branches: 2, at: [0.5], branch_budget: 0.15, losers: journal}';
const SHORT_BUDGET = 'total: 40\n  unit: tokens\n  episode: 6';

function repoWithLosers(): TaskRepo {
  return makeTaskRepo({ extra: SHORT, budget: SHORT_BUDGET });
}

async function start(repo: TaskRepo, concurrency?: number) {
  return startRun({
    dir: repo.dir,
    seed: 42,
    now: new Date('2026-11-30T10:00:00Z'),
    ...(concurrency ? { concurrency } : {}),
  });
}

/** The lineage's journal holds each fork round's section once, with each loser's entries. */
function expectSections(repo: TaskRepo, state: RunState) {
  const journal = repo.git('show', `forkflush/${state.id}/lineage:NOTES.md`);
  const forks = state.rounds.filter((r) => r.kind === 'fork' && r.decision?.winner);
  expect(forks.length).toBe(2);
  for (const round of forks) {
    const opens = journal
      .split('\n')
      .filter((l) => l.startsWith(`<!-- forkflush: branches that lost round ${round.index} `));
    expect(opens, `round ${round.index}`).toHaveLength(2 - 1);
    for (const loser of round.episodes.filter((e) => e.id !== round.decision?.winner)) {
      expect(journal).toContain(`### ${loser.id}: score ${loser.result?.score}; spent `);
      // The test agent writes "- <episode>: tried +1, score N"; it is quoted.
      expect(journal).toContain(`> - ${loser.id}: tried +1, score ${loser.result?.score}`);
    }
    // The episodes that started from the winner got exactly the section the core renders.
    const next = allEpisodes(state).find(
      (e) => e.base === round.episodes.find((x) => x.id === round.decision?.winner)?.result?.commit,
    );
    expect(journal).toContain(sectionFor(state, next as Episode) as string);
  }
  // The winners' own entries stay the lineage's: unquoted.
  expect(journal).toMatch(/^- r0\.b\d: tried \+1/m);
}

describe('fork.losers: journal', () => {
  it("keeps each fork round's losers in the lineage's journal, and the final result is the winner's", async () => {
    const repo = repoWithLosers();
    const run = await start(repo);
    const { state } = await drive(run.state, run);
    expect(state.status).toBe('finished');
    expectSections(repo, state);
    const best = repo.git('rev-parse', `forkflush/${state.id}/best`);
    expect(best).toBe(state.best?.commit);
  });

  it('adds each section once when the run is stopped in a fork round or while the winner goes on, then resumed', async () => {
    const repo = repoWithLosers();
    // One episode at a time: the stop after the first branch leaves the second one to run on resume.
    const run = await start(repo, 1);
    // 1. Stopped in the opening fork round, after its first branch: the round is decided on resume.
    const stop1 = new AbortController();
    const first = await drive(run.state, {
      ...run,
      signal: stop1.signal,
      onEvent: (e) => {
        if (e.type === 'episode-done') stop1.abort('interrupted');
      },
    });
    expect(first.interrupted).toBe(true);
    expect(first.state.rounds[0]?.decision).toBeUndefined();
    // 2. Stopped while the first episode that starts from the winner runs.
    const again = await openRun(repo.dir);
    const stop2 = new AbortController();
    const second = await drive(again.state, {
      ...again,
      signal: stop2.signal,
      onEvent: (e) => {
        if (e.type === 'episode-start' && e.episode.id === 'r1.b0') setTimeout(() => stop2.abort('interrupted'), 150);
      },
    });
    expect(second.interrupted).toBe(true);
    const losers = second.state.rounds[0]?.losers;
    expect(losers?.map((l) => l.episode)).toHaveLength(1);
    // 3. Resumed to the end: the notes recorded before are the ones used.
    const last = await openRun(repo.dir);
    const third = await drive(last.state, last);
    expect(third.state.status).toBe('finished');
    expect(third.state.rounds[0]?.losers).toEqual(losers);
    expectSections(repo, third.state);
  });
});

describe('forkflush compare with fork.losers as a variant', () => {
  it('compares the losers kept and dropped on the same seed, to the end', async () => {
    // The test task with K = 4, not the bundled example: its grader solves MaxSAT instances, and its
    // two runs took three minutes of a busy CI machine (compare.test.ts runs the example itself).
    const t = makeTaskRepo({ extra: 'fork: {branches: 4, at: [0.5], branch_budget: 0.1}', budget: SHORT_BUDGET });
    const variants = ['--variant', 'journal=fork.losers=journal', '--variant', 'drop=fork.losers=drop'];
    const c = await cliWith([
      'compare',
      t.dir,
      ...'--strategies fork-and-flush --seeds 1 --seed 2 --json'.split(' '),
      ...variants,
    ]);
    expect(c.code, c.err).toBe(0);
    const results = JSON.parse(c.out);
    expect(results.variants).toEqual(['journal', 'drop']);
    expect(results.complete).toBe(true);
    const states = results.runs.map(
      (r: { run: string }) =>
        JSON.parse(readFileSync(join(t.dir, '.forkflush', r.run, 'state.json'), 'utf8')) as RunState,
    );
    const [kept, dropped] = states;
    expect(kept.config.fork.losers).toBe('journal');
    expect(kept.rounds[0].losers?.length).toBe(3);
    expect(dropped.rounds.every((r: RunState['rounds'][number]) => r.losers === undefined)).toBe(true);
    // The report compares the two variants, with an interval.
    expect(results.comparisons).toEqual([
      expect.objectContaining({ a: { strategy: 'fork-and-flush', variant: 'drop' } }),
    ]);
  }, 360_000);
});
