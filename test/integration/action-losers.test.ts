// fork.losers: journal in the worker Action, built from src/ (whatever dist/ holds) and run as one
// job: the episode that starts from a fork round's winner gets, in its journal, the section the
// core renders from the notes the app recorded (core/losers.ts sectionFor), once, as the local
// runner appends it; its prompt says what the section is.
import { beforeAll, describe, expect, it } from 'vitest';
import { sectionFor } from '../../src/core/losers.js';
import { episodeBranch } from '../../src/core/names.js';
import type { RunState } from '../../src/core/state.js';
import { ActionRepo, buildActionFromSource, RUN } from './action-repo.js';

let action = '';

beforeAll(async () => {
  action = await buildActionFromSource();
}, 60_000);

/** The repository's run with its opening round won by r0.b2 and the losers' notes recorded. */
function withLosers(repo: ActionRepo): RunState {
  const state = repo.carriedState('r0.b2');
  const opening = state.rounds[0];
  if (!opening) throw new Error('no opening round');
  return {
    ...state,
    config: { ...state.config, fork: { ...state.config.fork, losers: 'journal' } },
    rounds: state.rounds.map((r) =>
      r.index === 0
        ? {
            ...r,
            losers: [
              { episode: 'r0.b0', entries: ['- tried walksat noise=0.2: score 3'], earlier: 2 },
              { episode: 'r0.b1', entries: [], earlier: 0 },
            ],
          }
        : r,
    ),
  };
}

describe('the worker Action with fork.losers: journal', () => {
  it("appends the round's section to the journal of the episode that starts from the winner, once", () => {
    const repo = new ActionRepo();
    const state = withLosers(repo);
    repo.publish(state);
    const episode = repo.episode(state, 'r1.b0');
    const section = sectionFor(state, episode);
    expect(section).toContain('> - tried walksat noise=0.2: score 3');

    const job = repo.runAction({ episode: 'r1.b0', action });

    expect(job.exitCode, job.stdout).toBe(0);
    expect(job.stdout).toContain('journal: the notes of the branches that lost added to NOTES.md');
    const head = repo.ref(`refs/heads/${episodeBranch(RUN, 1, 0)}`) ?? '';
    const journal = repo.show(head, 'NOTES.md');
    expect(journal.split(section as string)).toHaveLength(2);
    // The section comes before what the episode's agent and forkflush wrote after it.
    expect(journal.indexOf(section as string)).toBeLessThan(journal.indexOf('- r1.b0: tried +1'));
    expect(repo.calls()).toMatchObject([{ episode: 'r1.b0' }]);
  });
});
