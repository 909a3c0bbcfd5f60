// The worker workflow and the app drifting apart in the middle of a long GitHub run: overnight a
// teammate edits `.github/workflows/forkflush.yml` on the default branch (its `uses:` pin, its
// permissions, its timeout-minutes) after the run started. The app checks the workflow when a run
// starts (core/worker-drift.ts, core/worker-workflow.ts); each row is what happens after that, and
// each failed before its fix (found by a review); its comment says what went wrong then.
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { commitMessage } from '../../src/core/journal.js';
import { CONFIG, Harness, issueText } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';

/** A teammate's commit on main that changes the worker workflow's text. */
function editWorkflow(h: Harness, change: (text: string) => string, message = 'ci: tidy the worker'): void {
  const main = h.gh.branch('main') as string;
  const files = { ...h.gh.commits.get(main)?.files };
  files['.github/workflows/forkflush.yml'] = change(files['.github/workflows/forkflush.yml'] as string);
  h.gh.refs.set('refs/heads/main', h.gh.commit({ message, parents: [main], files }));
}

/** The job's permissions taken away: its jobs cannot push their results (a drift that stops a start). */
const noContentsWrite = (t: string) =>
  t.replace('permissions:\n  contents: write\n', 'permissions:\n  contents: read\n');
/** The Action pinned to another major release than the app's (0.1.0). */
const otherMajor = (t: string) => t.replaceAll('octo-org/forkflush@v0.1.0', 'octo-org/forkflush@v1.0.0');

/** The opening round's results land (b1 wins) and the base is graded. */
function openingRoundLanded(h: Harness) {
  const state = h.state(RUN);
  for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 10 + e.branch);
  h.pushBase(state, 1);
}

/** A run of issue 7 with nightly rounds, played to its end. */
async function finishedNightlyRun(): Promise<Harness> {
  const h = await new Harness({
    '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 5 }\n`,
    'grade.mjs': 'x',
  }).load();
  await h.label(7);
  await h.playToEnd(RUN);
  return h;
}

describe('the worker workflow edited after the run started', () => {
  it('the next round is not dispatched into a workflow whose jobs can no longer push, and the issue says what to fix', async () => {
    // Before: the start checks the workflow (a job without `contents: write` starts no run), but after
    // a teammate drops the permission mid-run, round 1 is dispatched all the same: every job would
    // fail its push, be charged its allowance, and the run stops later on "jobs ended without a
    // result". Expected: no dispatch into it, and the issue names the workflow's problem and the fix.
    const h = await new Harness().load();
    await h.label(7);
    openingRoundLanded(h);
    editWorkflow(h, noContentsWrite);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id).catch(() => {});
    await h.jobCompleted(RUN, 'base').catch(() => {});
    expect({
      rounds: h.gh.dispatches.map((d) => d.inputs.round),
      said: /contents: write/.test(issueText(h)),
    }).toEqual({ rounds: ['0'], said: true });
  });

  it("tonight's round is not dispatched into a workflow pinned to another major release, and the issue says why", async () => {
    // Before: the nightly tick forks a finished run into a round that runs the Action at `v1.0.0`
    // while the app is `v0.1.0` (a start would refuse this workflow: "another major release than
    // the app's"). Every job of the round runs a worker that may read the record wrong, and the
    // issue says nothing. Expected: no round tonight, and one word on the issue naming the pin.
    const h = await finishedNightlyRun();
    const dispatched = h.gh.dispatches.length;
    editWorkflow(h, otherMajor, 'ci: bump forkflush to v1');
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock).catch(() => {});
    expect({
      dispatches: h.gh.dispatches.length - dispatched,
      said: /v1\.0\.0/.test(issueText(h)),
    }).toEqual({ dispatches: 0, said: true });
  });

  it('a resume of a stopped run into a workflow whose jobs can no longer push is refused with the fix, not dispatched', async () => {
    // Before: the run stops (its opening round's jobs failed), the team "fixes" the workflow and in
    // doing so drops `contents: write`, then says `/autoresearch resume`: the round is dispatched
    // again with no check, every job fails again and is charged again. Expected: the resume is
    // answered with what is wrong in the workflow (as a start is), and nothing is dispatched.
    const h = await new Harness().load();
    await h.label(7);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id, 'failure');
    expect(h.gh.dispatches).toHaveLength(1);
    editWorkflow(h, noContentsWrite);
    await h.comment(7, '/autoresearch resume').catch(() => {});
    expect({
      dispatches: h.gh.dispatches.length,
      said: /contents: write/.test(issueText(h)),
    }).toEqual({ dispatches: 1, said: true });
  });

  it('`/autoresearch fork` on a finished run is not dispatched into a workflow pinned to another major release', async () => {
    // Before: a finished run, the workflow pinned to `v1.0.0` meanwhile (the app is `v0.1.0`), and
    // `/autoresearch fork` dispatches a round into it without a word. Expected: refused, with the
    // pin named and the fix, as a start into that workflow is.
    const h = await new Harness().load();
    await h.label(7);
    await h.playToEnd(RUN);
    const dispatched = h.gh.dispatches.length;
    editWorkflow(h, otherMajor, 'ci: bump forkflush to v1');
    await h.comment(7, '/autoresearch fork').catch(() => {});
    expect({
      dispatches: h.gh.dispatches.length - dispatched,
      said: /v1\.0\.0/.test(issueText(h)),
    }).toEqual({ dispatches: 0, said: true });
  });

  it("a timeout-minutes lowered after the start below an episode's time is warned before the next round runs", async () => {
    // Before: the warning about a short `timeout-minutes` is made once, from the workflow read at the
    // start. A teammate lowers it to 5 mid-run; tonight's round runs under it, Actions cancels each
    // job before it is graded (charged its allowance) and the issue never said why. Expected: the
    // round's dispatch comes with the warning naming the job's `timeout-minutes: 5`.
    const h = await finishedNightlyRun();
    expect(issueText(h)).not.toContain('timeout-minutes');
    const dispatched = h.gh.dispatches.length;
    editWorkflow(h, (t) => t.replace('timeout-minutes: 100', 'timeout-minutes: 5'), 'ci: shorter jobs');
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock).catch(() => {});
    // The round ran (a warning, not a stop)...
    expect(h.gh.dispatches.length).toBe(dispatched + 1);
    // ...and the issue says why its jobs may be cancelled.
    expect(issueText(h)).toContain('timeout-minutes: 5');
  });
});

describe("a result's unit against the run's", () => {
  it("a result whose Forkflush-Unit is not the run's unit is not charged as if it were", async () => {
    // Before: the run counts tokens; a result commit says `Forkflush-Spent: 0.4` and `Forkflush-Unit:
    // usd` (a worker of another release, or one that read the config on the branch): the app never
    // reads the unit trailer and charges 0.4 tokens, a silent wrong count. Expected: such a result
    // is not charged in the wrong unit (it is refused or charged its allowance), and the issue says so.
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state(RUN);
    const [e] = h.openEpisodes(RUN);
    if (!e) throw new Error('no episode');
    const message = commitMessage(RUN, 'usd', e, {
      score: 12,
      spent: 0.4,
      exit: 'finished',
      protectedChanged: [],
      agentSeconds: 1,
      graderSeconds: 0.5,
      wallSeconds: 2,
    });
    const parent = h.gh.commits.get(e.base);
    const sha = h.gh.commit({ message, parents: [e.base], files: { ...parent?.files, 'NOTES.md': 'x\n' } });
    h.gh.refs.set(h.refs(RUN).episode(e.round, e.branch), sha);
    expect(state.config.budget.unit).toBe('tokens');
    await h.jobCompleted(RUN, e.id);
    const got = h.state(RUN).rounds[0]?.episodes.find((x) => x.id === e.id)?.result;
    expect({
      spent: got?.spent,
      score: got?.score,
      chargedAsTokens: got?.spent === 0.4 && got?.score === 12,
    }).toMatchObject({
      chargedAsTokens: false,
    });
  });
});
