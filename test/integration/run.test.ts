// Whole local runs on real git repositories in temp folders.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spent } from '../../src/core/budget.js';
import { parseCommitMessage } from '../../src/core/journal.js';
import { allEpisodes, type RunState } from '../../src/core/state.js';
import type { RunEvent } from '../../src/local/progress.js';
import { drive } from '../../src/local/runner.js';
import { type OpenRun, openRun, startRun } from '../../src/local/start.js';
import { makeTaskRepo, type TaskRepo } from './task-repo.js';

/** A short fork-and-flush schedule: K = 2, one fork point, about 8 episodes. */
const SHORT = 'fork: {branches: 2, at: [0.5], branch_budget: 0.15}';
const SHORT_BUDGET = 'total: 40\n  unit: tokens\n  episode: 6';

async function start(repo: TaskRepo, extra: Partial<Parameters<typeof startRun>[0]> = {}): Promise<OpenRun> {
  return startRun({ dir: repo.dir, seed: 42, now: new Date('2026-11-30T10:00:00Z'), ...extra });
}

async function runToEnd(repo: TaskRepo, extra: Partial<Parameters<typeof startRun>[0]> = {}) {
  const run = await start(repo, extra);
  const events: RunEvent[] = [];
  const result = await drive(run.state, { ...run, onEvent: (e) => events.push(e) });
  return { run, state: result.state, events, interrupted: result.interrupted };
}

function branches(repo: TaskRepo): string[] {
  return repo.git('branch', '--format=%(refname:short)').split('\n').sort();
}

describe('a whole run', () => {
  it('runs the fork-and-flush schedule in worktrees and keeps the winner and the best', async () => {
    const repo = makeTaskRepo();
    const { run, state, events } = await runToEnd(repo);
    expect(state.status).toBe('finished');
    // The agent spends 90% of each allowance; the remainders join the next stretch.
    expect(state.rounds.map((r) => r.phase)).toEqual([
      'opening',
      'solo 1',
      'solo 1',
      'fork 1',
      'solo 2',
      'solo 2',
      'fork 2',
      'final',
      'final',
    ]);
    expect(Math.abs(spent(state) - 100)).toBeLessThanOrEqual(6);

    // Refs: the lineage, the best, and nothing else of the run's.
    expect(branches(repo)).toEqual(['forkflush/20261130-100000/best', 'forkflush/20261130-100000/lineage', 'main']);
    const lineageHead = repo.git('rev-parse', 'forkflush/20261130-100000/lineage');
    expect(lineageHead).toBe(state.lineages[0]?.head);
    const best = repo.git('rev-parse', 'forkflush/20261130-100000/best');
    expect(best).toBe(state.best?.commit);
    const scores = allEpisodes(state).map((e) => e.result?.score ?? Number.NEGATIVE_INFINITY);
    expect(state.best?.score).toBe(Math.max(...scores));
    expect(repo.git('show', `${best}:value.txt`)).toBe(String(state.best?.score));
    // Worktrees are gone and the user's checkout is untouched and clean.
    expect(repo.git('worktree', 'list').split('\n')).toHaveLength(1);
    expect(repo.git('status', '--porcelain')).toBe('');
    expect(repo.git('rev-parse', '--abbrev-ref', 'HEAD')).toBe('main');

    // Every adopted commit records its episode's result; the journal has a line per episode.
    const log = repo.git('log', '--format=%H', 'main..forkflush/20261130-100000/lineage').split('\n');
    for (const commit of log) {
      const parsed = parseCommitMessage(repo.git('log', '-1', '--format=%B', commit), commit);
      expect(parsed?.runId).toBe('20261130-100000');
      const e = allEpisodes(state).find((x) => x.id === parsed?.episode);
      expect(e?.result).toEqual(parsed?.result);
    }
    const journal = repo.git('show', 'forkflush/20261130-100000/lineage:NOTES.md');
    expect(journal.match(/^- forkflush r\d+\.b\d+ /gm)).toHaveLength(log.length);

    // Reports are written; events were reported in order.
    expect(readFileSync(run.store.path('report.md'), 'utf8')).toContain('## Leaderboard');
    expect(readFileSync(run.store.path('chart.svg'), 'utf8')).toMatch(/^<svg/);
    expect(events.at(-1)?.type).toBe('finished');
    expect(events.filter((e) => e.type === 'episode-done')).toHaveLength(allEpisodes(state).length);
    // A whole run of 16 episodes: 54 s beside the whole suite, close to the 60 s default.
  }, 180_000);

  it('gives branches fresh contexts, carries the winner context, and hides GitHub tokens', async () => {
    const repo = makeTaskRepo({ extra: SHORT, budget: SHORT_BUDGET });
    process.env.GITHUB_TOKEN = 'ghs_secret';
    try {
      const { run, state } = await runToEnd(repo);
      // Only the contexts a lineage continues from are kept: each carried one holds those before it.
      const kept = readdirSync(run.store.path('contexts')).sort();
      expect(kept).toEqual(state.lineages.flatMap((l) => (l.context ? [l.context] : [])).sort());
      expect(kept.length).toBeGreaterThan(0);
      expect(allEpisodes(state).filter((e) => e.context === 'carry').length).toBeGreaterThan(1);
      const calls = repo.calls();
      const byId = new Map(calls.map((c) => [c.episode, c]));
      for (const e of allEpisodes(state)) {
        const call = byId.get(e.id);
        expect(call?.secrets).toEqual([]);
        expect(call?.promptFileSame).toBe(true);
        expect(call?.seed).toBe(String(e.seed));
        if (e.context === 'fresh') {
          expect(call?.memory).toEqual([]);
          expect(call?.promptStart).toMatch(/^You are working on an open-ended task/);
        } else {
          // The carried context is the parent's context: its memory ends with the parent's id.
          expect(call?.memory.at(-1)).toBe(e.contextFrom);
          expect(call?.promptStart).toMatch(/^Continue working/);
        }
      }
    } finally {
      delete process.env.GITHUB_TOKEN;
    }
  });

  it('keeps rejected branches when asked', async () => {
    const repo = makeTaskRepo({ extra: SHORT, budget: SHORT_BUDGET });
    const { state } = await runToEnd(repo, { keepRejected: true });
    const dropped = state.rounds.flatMap((r) =>
      r.kind === 'fork' ? r.episodes.filter((e) => !r.decision?.adopted.includes(e.id)) : [],
    );
    expect(dropped.length).toBeGreaterThan(0);
    for (const e of dropped)
      expect(branches(repo)).toContain(`forkflush/${state.id}/round-${e.round}/branch-${e.branch}`);
  });

  it('runs best-of-n as independent lineages with their own branches', async () => {
    const repo = makeTaskRepo({ extra: 'strategy: best-of-n\nfork: {branches: 2}', budget: SHORT_BUDGET });
    const { state } = await runToEnd(repo);
    expect(branches(repo)).toEqual(
      expect.arrayContaining([`forkflush/${state.id}/lineage-0`, `forkflush/${state.id}/lineage-1`]),
    );
    for (const l of state.lineages) expect(spent(state, l.index)).toBeGreaterThan(14);
  });

  it('works on a copy when the folder is not a git repository', async () => {
    const repo = makeTaskRepo({
      git: false,
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
    });
    const { run, state } = await runToEnd(repo);
    expect(run.info.scratch).toBe(true);
    expect(run.info.repo).toBe(run.store.path('repo'));
    expect(state.status).toBe('finished');
    expect(existsSync(join(repo.dir, '.git'))).toBe(false);
  });
});

describe('interrupted and resumed', () => {
  it('does not redo finished episodes and loses no graded workspace', async () => {
    const repo = makeTaskRepo({ extra: SHORT, budget: SHORT_BUDGET });
    const run = await start(repo);
    const stop = new AbortController();
    let done = 0;
    const first = await drive(run.state, {
      ...run,
      signal: stop.signal,
      onEvent: (e) => {
        // Stop in the fork round, after its first branch: its sibling is cut off mid-episode.
        if (e.type === 'episode-done' && ++done === 5) stop.abort('interrupted');
      },
    });
    expect(first.interrupted).toBe(true);
    const finishedBefore = allEpisodes(first.state).filter((e) => e.result);
    expect(finishedBefore.length).toBeGreaterThanOrEqual(5);

    // A crash right after an episode's commit, before its result was saved: the commit has it.
    const saved: RunState = JSON.parse(readFileSync(run.store.path('state.json'), 'utf8'));
    const lost = allEpisodes(saved)
      .filter((e) => e.result && !saved.rounds[e.round]?.decision)
      .at(-1);
    if (lost) {
      delete lost.result;
      writeFileSync(run.store.path('state.json'), JSON.stringify(saved));
    }

    const again = await openRun(repo.dir);
    const second = await drive(again.state, again);
    expect(second.interrupted).toBe(false);
    expect(second.state.status).toBe('finished');
    const runs = new Map<string, number>();
    for (const c of repo.calls()) runs.set(c.episode, (runs.get(c.episode) ?? 0) + 1);
    for (const e of finishedBefore) expect(runs.get(e.id), e.id).toBe(1);
    for (const e of finishedBefore) {
      expect(allEpisodes(second.state).find((x) => x.id === e.id)?.result).toEqual(e.result);
    }
    expect(second.state.best?.score).toBe(Math.max(...allEpisodes(second.state).map((e) => e.result?.score ?? 0)));
    expect(repo.git('worktree', 'list').split('\n')).toHaveLength(1);
  });

  it('charges what an interrupted episode spent, as the agent reported it, and keeps it on resume', async () => {
    const repo = makeTaskRepo({
      agent: 'hang',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
    });
    const run = await start(repo);
    const stop = new AbortController();
    const marker = `${repo.callsLog}.child-marker`;
    // The hanging agent reports 1 token, then writes the marker, then waits to be stopped.
    const waiting = (async () => {
      while (!existsSync(marker)) await new Promise((r) => setTimeout(r, 50));
      stop.abort('interrupted');
    })();
    const first = await drive(run.state, { ...run, signal: stop.signal });
    await waiting;
    expect(first.interrupted).toBe(true);
    const episode = first.state.rounds[0]?.episodes[0];
    expect(episode?.result).toBeUndefined();
    expect(episode?.interruptedSpent).toBe(1);
    expect(spent(first.state)).toBe(1);
    const saved: RunState = JSON.parse(readFileSync(run.store.path('state.json'), 'utf8'));
    expect(spent(saved)).toBe(1);
    const again = await openRun(repo.dir);
    expect(spent(again.state)).toBe(1);
  });
});
