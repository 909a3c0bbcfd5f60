// The initial workspace is graded once per run on GitHub, by a job of the opening round's dispatch
// (its matrix value `base`), as the local runner grades it: the result pull request then says how
// much the run gained over it. A grade on anything but the base's tree, a failed job, or a job
// that never reports leave the run going without it, said in the status comment.
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { baseGradeRef } from '../../src/core/names.js';
import { Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';

/** Plays the open round: each job pushes a score, then reports completed. */
async function playRound(h: Harness, score: (id: string) => number | null) {
  const state = h.state(RUN);
  const open = h.openEpisodes(RUN);
  for (const e of open) if (!e.result) h.pushResult(state, e, score(e.id));
  for (const e of open) await h.jobCompleted(RUN, e.id);
}

async function playToEnd(h: Harness, score: (id: string) => number | null) {
  for (let guard = 0; guard < 50 && h.state(RUN).status !== 'finished'; guard++) await playRound(h, score);
}

const comment = (h: Harness) => h.gh.comments.find((c) => c.issue === 7)?.body ?? '';
const episodesOf = (h: Harness) => h.gh.dispatches.map((d) => JSON.parse(d.inputs.episodes ?? '[]') as string[]);

describe('the initial workspace on GitHub', () => {
  it('is graded once, beside the opening round, and the result pull request says the gain over it', async () => {
    const h = await new Harness().load();
    await h.label(7);
    expect(episodesOf(h)).toEqual([['r0.b0', 'r0.b1', 'base']]);
    expect(comment(h)).toContain('being graded, in a job of the opening round');
    expect(h.pushBase(h.state(RUN), 20)).toBe(true);
    await h.jobCompleted(RUN, 'base');
    expect(h.state(RUN).base.score).toBe(20);
    expect(h.runFiles(RUN)?.baseGrade).toBe('done');
    await playRound(h, (id) => (id === 'r0.b1' ? 50 : 40));
    // Later rounds grade only their episodes.
    expect(episodesOf(h).slice(1)).toEqual([['r1.b0']]);
    await playToEnd(h, () => 45);
    const state = h.state(RUN);
    expect(state.status).toBe('finished');
    expect(state.best?.score).toBe(50);
    const [result] = h.gh.pulls;
    expect(result?.title).toBe('forkflush issue-7: best score 50 (+30 over the initial workspace)');
    expect(result?.body).toContain('| initial workspace | 20 |');
    expect(result?.body).toContain('| gain | **+30** | maximize |');
    expect(
      episodesOf(h)
        .flat()
        .filter((e) => e === 'base'),
    ).toHaveLength(1);
  });

  it('landing after the opening round, is read then; a base no episode beats stays the best', async () => {
    const h = await new Harness().load();
    await h.label(7);
    // The episodes report first: the round is decided without the base's grade.
    await playRound(h, (id) => (id === 'r0.b1' ? 50 : 40));
    expect(h.state(RUN).base.score).toBeNull();
    expect(h.runFiles(RUN)?.baseGrade).toBe('asked');
    h.pushBase(h.state(RUN), 50);
    await h.jobCompleted(RUN, 'base');
    // A tie keeps the initial workspace, as locally: the run gained nothing over it.
    const state = h.state(RUN);
    expect(state.base.score).toBe(50);
    expect(state.best).toEqual({ episode: 'base', commit: state.base.commit, score: 50 });
    await playToEnd(h, () => 30);
    expect(h.gh.pulls[0]?.title).toBe('forkflush issue-7: best score 50 (±0 over the initial workspace)');
    expect(h.gh.pulls[0]?.body).toContain('initial workspace, on `refs/forkflush/issue-7/best`');
  });

  it('graded on another tree, gets no score, and the run goes on', async () => {
    const h = await new Harness().load();
    await h.label(7);
    // A grade of a workspace with the grader changed: not the initial workspace's.
    h.pushBase(h.state(RUN), 99, { files: { 'grade.mjs': 'console.log(99)' } });
    await h.jobCompleted(RUN, 'base');
    const state = h.state(RUN);
    expect(state.base.score).toBeNull();
    expect(state.base.reason).toMatch(/is not the initial workspace's tree/);
    expect(h.runFiles(RUN)?.baseGrade).toBe('done');
    expect(comment(h)).toContain("is not the initial workspace's tree");
    await playToEnd(h, () => 10);
    expect(h.state(RUN).status).toBe('finished');
    expect(h.gh.pulls[0]?.title).toBe('forkflush issue-7: best score 10');
  });

  it('whose job failed or never reported, has no score, and is not asked again', async () => {
    const h = await new Harness().load();
    await h.label(7);
    await h.jobCompleted(RUN, 'base', 'failure');
    expect(h.state(RUN).base.score).toBeNull();
    expect(h.state(RUN).base.reason).toMatch(/^its job ended: failure/);
    expect(h.runFiles(RUN)?.baseGrade).toBe('done');
    // A grade pushed after that changes nothing.
    h.pushBase(h.state(RUN), 5);
    await playRound(h, () => 40);
    expect(h.state(RUN).base.score).toBeNull();

    // As in Actions mode (no job events): the opening round's workflow run completed, its
    // episodes' results on their refs, and no grade on the base's.
    const silent = await new Harness().load();
    await silent.label(7);
    const state = silent.state(RUN);
    for (const e of silent.openEpisodes(RUN)) silent.pushResult(state, e, 40);
    await silent.runCompleted(RUN, 0);
    expect(silent.state(RUN).rounds[0]?.decision).toBeDefined();
    expect(silent.state(RUN).base.reason).toBe('its job gave no grade by the end of the opening round');
    expect(silent.runFiles(RUN)?.baseGrade).toBe('done');
    expect(silent.gh.refs.get(baseGradeRef(RUN))).toBeUndefined();
  });

  it("without a grade by the opening round's deadline, is given up at the next trigger after it", async () => {
    const h = await new Harness().load();
    await h.label(7);
    // The episodes' job events decide the round; the base's job said it succeeded but pushed nothing.
    await playRound(h, () => 40);
    await h.jobCompleted(RUN, 'base');
    expect(h.runFiles(RUN)?.baseGrade).toBe('asked');
    h.clock = new Date(h.clock.getTime() + 3 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    expect(h.runFiles(RUN)?.baseGrade).toBe('done');
    expect(h.state(RUN).base).toMatchObject({
      score: null,
      reason: 'its job gave no grade by the end of the opening round',
    });
  });
});
