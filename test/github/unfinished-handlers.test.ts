// Handlers that did not finish: overtaken by another's save, or dead half-way through a round's
// dispatch or its check runs. The one that comes next finds what was done and does the rest once.
import { describe, expect, it } from 'vitest';
import { Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

/**
 * The label's handler dies right after GitHub made the episodes' first check run: the run's check
 * and that one are there, the record holds the dispatch's claim and nothing else.
 */
async function labelDyingAtFirstCheck(h: Harness): Promise<void> {
  let dead = false;
  h.gh.inject = (method, path) => {
    if (dead) return 503;
    if (method !== 'POST' || !path.endsWith('/check-runs') || h.gh.checkRuns.length < 1) return null;
    dead = true;
    return { status: 503, applied: true };
  };
  await expect(h.label(7)).rejects.toThrow(/the app answered the issues.labeled delivery with 5/);
  h.gh.inject = null;
}

describe('a handler whose record was overtaken', () => {
  it('still records the work it did, merged into the newer record', async () => {
    const { Workflows } = await import('../../src/github/workflows.js');
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state('issue-7');
    for (const e of state.rounds[0]?.episodes ?? []) h.pushResult(state, e, 10 + e.branch);
    // While this handler dispatches round 1, another one saves the record (say, a comment edit).
    const original = Workflows.prototype.dispatch;
    Workflows.prototype.dispatch = async function (this: InstanceType<typeof Workflows>, ...args) {
      h.rewriteRecord('issue-7', (run) => {
        run.commentDigest = 'changed-by-another-handler';
      });
      return original.apply(this, args);
    };
    try {
      await h.jobCompleted('issue-7', 'r0.b1');
    } finally {
      Workflows.prototype.dispatch = original;
    }
    const sha = h.gh.refs.get('refs/forkflush/issue-7/state') as string;
    const files = JSON.parse(h.gh.commits.get(sha)?.files['run.json'] as string);
    expect(Object.keys(files.dispatched)).toEqual(['0', '1']);
    expect(files.settled).toEqual([0]);
    expect(files.claims).toEqual({});
    // So the next round's results are read, and nothing is done twice.
    const next = h.state('issue-7');
    for (const e of next.rounds[1]?.episodes ?? []) h.pushResult(next, e, 20);
    await h.jobCompleted('issue-7', 'r1.b0');
    expect(h.state('issue-7').rounds[1]?.episodes[0]?.result?.score).toBe(20);
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1', '2']);
  });
});

describe('a handler that died between dispatching a round and recording it', () => {
  /** The record as the dead handler left it: round 0 claimed long ago, its dispatch not recorded. */
  function dieAfterDispatch(h: Harness) {
    h.rewriteRecord(
      'issue-7',
      (run) => {
        delete run.dispatched['0'];
        run.claims['dispatch:0'] = h.clock.toISOString();
      },
      'the record a dead handler left',
    );
    h.clock = new Date(h.clock.getTime() + 11 * 60_000); // its claim is stale now
  }

  it('a dispatch taken over after a rename keeps the branch its live run is on: its failed job (on main) still ends the episode', async () => {
    // The handler that dispatched round 0 on main died before recording it, then the branch was
    // renamed: the handler that took the claim over recorded trunk, not the live run's main, and
    // the round's own jobs' events were ignored till its deadline (found by a review).
    const h = await new Harness().load();
    await h.label(7);
    dieAfterDispatch(h);
    h.gh.renameDefaultBranch('trunk');
    await h.comment(7, '/autoresearch status');
    expect(h.gh.dispatches.map((d) => d.ref)).toEqual(['main']); // not dispatched again: the live run is the round's
    const state = h.state('issue-7');
    const [b0, b1] = h.openEpisodes('issue-7');
    if (!b0 || !b1) throw new Error('no episodes');
    h.pushResult(state, b1, 50);
    await h.jobCompleted('issue-7', b1.id, 'success', 'main');
    await h.jobCompleted('issue-7', b0.id, 'failure', 'main');
    expect(h.state('issue-7').rounds[0]?.episodes.find((e) => e.id === b0.id)?.result).toBeDefined();
    expect(h.state('issue-7').rounds[0]?.decision?.winner).toBe('r0.b1');
    expect(h.runFiles('issue-7')?.dispatched['0']?.branch).toBe('main');
  });

  it('is followed by one that finds the run it started and does not dispatch the round again', async () => {
    const h = await new Harness().load();
    await h.label(7);
    dieAfterDispatch(h);
    await h.comment(7, '/autoresearch status');
    expect(h.gh.dispatches).toHaveLength(1);
    expect(Object.keys(h.runFiles('issue-7')?.dispatched ?? {})).toEqual(['0']);
    expect(h.runFiles('issue-7')?.claims).toEqual({});
  });

  it('dispatches it when no run of the round is there, or only a cancelled one', async () => {
    const h = await new Harness().load();
    await h.label(7);
    dieAfterDispatch(h);
    h.box.actions.cancel(h.box.actions.runs[0]?.id ?? 0);
    await h.comment(7, '/autoresearch status');
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '0']);
    expect(Object.keys(h.runFiles('issue-7')?.dispatched ?? {})).toEqual(['0']);
  });
});

describe('a handler that died while making check runs', () => {
  it("making the round's: the one that takes its claim over finds them and makes no second one", async () => {
    const h = await new Harness().load();
    await labelDyingAtFirstCheck(h);
    expect(h.gh.checkRuns.map((c) => c.name)).toEqual(['forkflush', 'forkflush r0.b0']);
    expect(h.gh.dispatches).toEqual([]);
    expect(h.runFiles('issue-7')?.claims).toHaveProperty('dispatch:0');
    await h.restart();
    h.clock = new Date(h.clock.getTime() + 11 * 60_000); // the claim is stale
    await h.comment(7, '/autoresearch status');
    expect(h.gh.checkRuns.map((c) => c.name)).toEqual(['forkflush', 'forkflush r0.b0', 'forkflush r0.b1']);
    expect(h.gh.dispatches).toHaveLength(1);
    expect(h.runFiles('issue-7')?.checks).toEqual({
      'r0.b0': h.gh.checkRuns[1]?.id,
      'r0.b1': h.gh.checkRuns[2]?.id,
    });
  });

  it("making the round's, then a stop and a resume: the stop ends the check the dead handler made", async () => {
    const h = await new Harness().load();
    await labelDyingAtFirstCheck(h);
    await h.restart();
    // Stopped before the claim is stale: nobody took the dispatch over, the record names no check.
    await h.comment(7, '/autoresearch stop');
    await h.comment(7, '/autoresearch resume');
    const mine = h.gh.checkRuns.filter((c) => c.name === 'forkflush r0.b0');
    expect(mine.map((c) => [c.status, c.conclusion])).toEqual([
      ['completed', 'cancelled'],
      ['queued', null],
    ]);
    expect(h.runFiles('issue-7')?.checks?.['r0.b0']).toBe(mine[1]?.id);
  });

  it('publishing a result: the one that takes its claim over completes the same check run', async () => {
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state('issue-7');
    const [e] = state.rounds[0]?.episodes ?? [];
    if (!e) throw new Error('no episode');
    h.pushResult(state, e, 42);
    // The first handler dies right after GitHub completed the check run.
    let dead = false;
    h.gh.inject = (method, path) => {
      if (dead) return 503;
      if (method !== 'PATCH' || !/\/check-runs\/\d+$/.test(path)) return null;
      dead = true;
      return { status: 503, applied: true };
    };
    await expect(h.jobCompleted('issue-7', e.id)).rejects.toThrow(
      /the app answered the workflow_job.completed delivery with 5/,
    );
    h.gh.inject = null;
    expect(h.runFiles('issue-7')?.claims).toHaveProperty(`publish:${e.id}`);
    await h.restart();
    h.clock = new Date(h.clock.getTime() + 11 * 60_000); // the claim is stale
    await h.comment(7, '/autoresearch status');
    const mine = h.gh.checkRuns.filter((c) => c.name === `forkflush ${e.id}`);
    expect(mine.map((c) => [c.head_sha, c.status, c.conclusion, c.output.title])).toEqual([
      [e.base, 'completed', 'success', `${e.id}: score 42`],
    ]);
    expect(h.runFiles('issue-7')?.published[e.id]).toMatchObject({ check: mine[0]?.id });
  });
});
