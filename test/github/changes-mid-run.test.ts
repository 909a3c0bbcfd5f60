// The people and the repository around a run change things while it runs, overnight, with nobody
// watching: a stop landing during a dispatch, a locked issue, a finished run labelled again, a
// team's bot taking the label off. Each row failed before its fix (found by a review); its comment
// says what a team saw go wrong.
import { describe, expect, it } from 'vitest';
import { Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const statusOf = (h: Harness) => h.gh.comments.find((c) => c.issue === 7)?.body ?? '';

/** The opening round's results land (b1 wins), so that the next event settles it and dispatches round 1. */
function openingRoundLanded(h: Harness) {
  const state = h.state(RUN);
  for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 10 + e.branch);
  h.pushBase(state, 1);
}

/**
 * A maintainer locks issue `issue` (a heated thread, a spam wave): GitHub refuses the app's
 * comments on it, new ones and edits, as it refuses an app that is no collaborator
 * (403 "Unable to create comment because issue is locked."). Returns the unlock.
 */
function lockIssue(h: Harness, issue: number): () => void {
  const gh = h.gh;
  const handle = gh.handle.bind(gh);
  const own = (id: number) => gh.comments.find((c) => c.id === id)?.issue === issue;
  gh.handle = (method, uri, body, headers) => {
    const path = new URL(uri, 'https://api.github.com').pathname;
    const created = method === 'POST' && new RegExp(`/issues/${issue}/comments$`).test(path);
    const edit = /\/issues\/comments\/(\d+)$/.exec(path);
    if (created || (method === 'PATCH' && edit && own(Number(edit[1])))) {
      gh.log.push(`${method} ${path} (locked)`);
      return {
        status: 403,
        body: {
          message: 'Unable to create comment because issue is locked.',
          documentation_url: 'https://docs.github.com/articles/locking-conversations/',
        },
      };
    }
    return handle(method, uri, body, headers);
  };
  return () => {
    gh.handle = handle;
  };
}

describe('a stop that lands while a round is being dispatched', () => {
  it('removing the label while the next round is dispatched: no job of that round runs on, and the status says stopped', async () => {
    // 3 a.m.: a job's end settles round 0 and dispatches round 1. Just then a maintainer removes
    // the `autoresearch` label (or says `/autoresearch stop`): the stop is saved and its wind-down
    // cancels what runs, before the dispatch lands. The dispatch then starts round 1's jobs, which
    // nothing cancels (agents spend the budget after the stop), and the dispatching handler writes
    // its own view of the run (not stopped) over the status comment and the run's check: the issue
    // says "round 1 running" on a stopped run. Expected: round 1's workflow run is cancelled (or
    // never started) and the issue says stopped.
    const { Workflows } = await import('../../src/github/workflows.js');
    const h = await new Harness().load();
    await h.label(7);
    openingRoundLanded(h);
    const original = Workflows.prototype.dispatch;
    let stopped = false;
    Workflows.prototype.dispatch = async function (this: InstanceType<typeof Workflows>, ...args) {
      if (!stopped && args[2]?.round === '1') {
        stopped = true;
        await h.send('issues', 'unlabeled', (p) => {
          p.issue.number = 7;
          p.label.name = 'autoresearch';
          p.sender.login = 'maintainer';
          p.sender.type = 'User';
        });
      }
      return original.apply(this, args);
    };
    try {
      await h.jobCompleted(RUN, 'r0.b1');
    } finally {
      Workflows.prototype.dispatch = original;
    }
    expect(stopped).toBe(true);
    expect(h.runFiles(RUN)?.stopped).toBe(true);
    const live = h.box.actions.runs.filter(
      (r) => r.displayTitle === `forkflush ${RUN} round 1` && r.status !== 'completed',
    );
    expect({
      liveRound1Runs: live.length,
      status: /\*\*Status:\*\* stopped/.test(statusOf(h)),
      runCheck: h.gh.checkRuns.find((c) => c.name === 'forkflush')?.status,
    }).toEqual({ liveRound1Runs: 0, status: true, runCheck: 'completed' });
  });
});

describe('an issue locked mid-run', () => {
  it("a locked issue: when the run stops for its jobs' failures, the run's check says so instead of running for good", async () => {
    // Overnight a maintainer locks the run's issue (GitHub then refuses the app's comments there).
    // The opening round's jobs all fail (an expired agent key): the run stops, as it should. But the
    // status comment is written first and refused, and the sync gives up before it edits the run's
    // check: the `forkflush` check on the commit stays "in progress" for good (branch protection
    // waits on it, the team reads "running"), and every event's handler and every nightly tick fails
    // on the same comment. Expected: the check, the one voice the run has left, says it stopped.
    const h = await new Harness().load();
    await h.label(7);
    lockIssue(h, 7);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id, 'failure').catch(() => {});
    // The run did stop (the core decided), and nothing more is dispatched.
    expect(h.state(RUN).rounds[0]?.episodes.every((e) => e.result?.score === null)).toBe(true);
    expect(h.gh.dispatches).toHaveLength(1);
    const check = h.gh.checkRuns.find((c) => c.name === 'forkflush');
    expect({ status: check?.status, title: check?.output.title }).toEqual({
      status: 'completed',
      title: expect.stringMatching(/stopped/),
    });
  });
});

describe('a label put back on a finished run', () => {
  it('labelling a finished run `autoresearch` again is answered, not passed over in silence', async () => {
    // The morning after, a maintainer who wants "another go" puts the `autoresearch` label back on
    // the issue (the README: "label the issue again ... to go on"). The run is finished, not
    // stopped: the app records the label and says nothing at all. No round runs, no comment, and
    // the issue now carries both `autoresearch` and `autoresearch: done`, as if it were running.
    // `/autoresearch resume` on the same run is answered ("The run is finished: `/autoresearch
    // fork` runs one more fork round."). Expected: one answer on the issue saying what to do.
    const h = await new Harness().load();
    await h.label(7);
    await h.playToEnd(RUN);
    expect(h.state(RUN).status).toBe('finished');
    const before = h.gh.comments.filter((c) => c.issue === 7).length;
    const dispatched = h.gh.dispatches.length;
    await h.label(7);
    expect(h.gh.dispatches).toHaveLength(dispatched);
    const answers = h.gh.comments.filter((c) => c.issue === 7).slice(before);
    expect(answers.map((c) => c.body).join('\n')).toMatch(/`\/autoresearch fork`/);
  });
});

describe("the team's automation takes the label off", () => {
  it("the `autoresearch` label removed by the team's own workflow (github-actions[bot]) stops the run", async () => {
    // A team's issue-ops workflow clears labels when an issue leaves the sprint board, at night.
    // The README says removing the label stops the run; the app passes by every label event sent
    // by any bot (to skip its own label changes), so the run goes on dispatching rounds and
    // spending, while the issue no longer says `autoresearch`. Expected: only forkflush's own
    // label changes are passed by; another app's removal (it needed triage access) stops the run,
    // as a deletion by a bot already does.
    const h = await new Harness().load();
    await h.label(7);
    h.gh.labels.get(7)?.delete('autoresearch');
    await h.send('issues', 'unlabeled', (p) => {
      p.issue.number = 7;
      p.label.name = 'autoresearch';
      p.sender.login = 'github-actions[bot]';
      p.sender.type = 'Bot';
    });
    openingRoundLanded(h);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id);
    expect({ stopped: h.runFiles(RUN)?.stopped, rounds: h.gh.dispatches.map((d) => d.inputs.round) }).toEqual({
      stopped: true,
      rounds: ['0'],
    });
  });
});
