// The idea map on GitHub in words (core/github-map.ts): when a map may be asked for, where its
// picture is, and what the issue is told; and `/autoresearch map` read from a comment.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { mapAskProblem, mapFailedComment, mapImageUrl } from '../../src/core/github-map.js';
import { parseCommand } from '../../src/core/github-text.js';
import { applyDecision, applyOpen, applyResult, decide, reconcile } from '../../src/core/reconcile.js';
import { type EpisodeResult, newRunState, type RunState } from '../../src/core/state.js';

const CONFIG = parseConfig(
  'grader:\n  command: node grade.mjs\nagent:\n  command: node agent.mjs\nbudget:\n  total: 100\n  unit: tokens\n  episode: 10\nfork:\n  branches: 3\n  at: [0.5]\n',
  '.github/autoresearch.yml',
);
const BASE = 'b'.repeat(40);

function result(commit: string, score: number | null): EpisodeResult {
  return {
    commit,
    score,
    spent: 5,
    exit: 'finished',
    protectedChanged: [],
    agentSeconds: 1,
    graderSeconds: 0,
    wallSeconds: 1,
  };
}

/** A run with its opening round open, and `scored` of its episodes graded on commits of their own. */
function run(scored: number, score: number | null = 10): RunState {
  let state = newRunState({ id: 'issue-7', seed: 1, config: CONFIG, baseCommit: BASE, baseScore: null });
  const [open] = reconcile(state);
  if (open?.type !== 'open') throw new Error('no round to open');
  state = applyOpen(state, open.round);
  const episodes = state.rounds[0]?.episodes ?? [];
  episodes.forEach((e, i) => {
    state = applyResult(state, e.id, i < scored ? result(String(i + 1).repeat(40), score) : result(BASE, null));
  });
  return applyDecision(state, 0, decide(state, state.rounds[0] as never));
}

describe('/autoresearch map', () => {
  it('is a command', () => {
    expect(parseCommand('/autoresearch map')).toEqual({ command: 'map' });
    expect(parseCommand('please\n/autoresearch MAP\n')).toEqual({ command: 'map' });
  });

  it('is refused before an episode has a score, and with fewer than 3 snapshots', () => {
    expect(mapAskProblem(run(0), CONFIG)).toMatch(/^the run has no graded episode yet/);
    expect(mapAskProblem(run(3, null), CONFIG)).toMatch(/^the run has no graded episode yet/);
    expect(mapAskProblem(run(2), CONFIG)).toBe(
      'the run has 2 snapshots (episodes with a workspace of their own): a map needs 3; ask again after another round.',
    );
    expect(mapAskProblem(run(3), CONFIG)).toBeNull();
  });

  it("shows the picture from the map commit's blob, the PNG when there is one", () => {
    const sha = 'c'.repeat(40);
    expect(mapImageUrl('https://github.com/o/r/', sha, false)).toBe(
      `https://github.com/o/r/blob/${sha}/map.svg?raw=true`,
    );
    expect(mapImageUrl('https://ghe.example/o/r', sha, true)).toBe(
      `https://ghe.example/o/r/blob/${sha}/map.png?raw=true`,
    );
  });

  it('says a failed map in one line, its reason as text', () => {
    const text = mapFailedComment(
      'the judge failed 5 judgments in a row; the last: `[x](http://evil)`',
      'https://github.com/o/r/actions/runs/1',
    );
    expect(text.split('\n')).toHaveLength(1);
    // Inert: the judge's words as a code span, not a link.
    expect(text).toContain(
      'forkflush drew no idea map: `` the judge failed 5 judgments in a row; the last: `[x](http://evil)` `` (',
    );
  });
});
