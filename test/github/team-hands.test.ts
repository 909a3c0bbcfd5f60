// A real team's hands on a running GitHub run, overnight, with nobody watching: a reviewer's commit
// on a round's pull request, a push to a round's branch, the nightly rounds taken out of the config
// on the default branch, a round's workflow run cancelled in the Actions tab. Each row failed before its fix (found by
// a review); its comment says what a team saw go wrong and what the right behaviour is.
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { CONFIG, Harness, issueText } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const BRANCH0 = 'forkflush/issue-7/round-0/branch-0';
const statusLine = (h: Harness) =>
  (h.gh.comments.find((c) => c.issue === 7)?.body ?? '').split('\n').find((l) => l.startsWith('**Status:**')) ?? '';

/** A person's commit on top of branch `name`, pushed (GitHub updates its pull requests). */
function pushOn(h: Harness, name: string, message: string): string {
  const ref = `refs/heads/${name}`;
  const head = h.gh.refs.get(ref) as string;
  const files = { ...h.gh.commits.get(head)?.files, 'REVIEW.md': `${message}\n` };
  const sha = h.gh.commit({ message, parents: [head], files });
  h.gh.refs.set(ref, sha);
  h.gh.branchesMoved();
  return sha;
}

/** Whether some branch still holds `sha` (a person's commit that was not lost). */
const onSomeBranch = (h: Harness, sha: string) =>
  [...h.gh.refs].some(([ref, at]) => ref.startsWith('refs/heads/') && h.gh.isAncestor(sha, at));

/** A run with a pull request per episode (layout 1: every episode is a branch a team can push to). */
async function episodePullRequests(): Promise<Harness> {
  const h = await new Harness({
    '.github/autoresearch.yml': `${CONFIG}pull_requests: episodes\n`,
    'grade.mjs': 'x',
  }).load();
  await h.label(7);
  h.pushBase(h.state(RUN), 1);
  await h.jobCompleted(RUN, 'base');
  return h;
}

/** episodePullRequests, with r0.b0's result landed (20) and r0.b1 still running. */
async function leaderReported() {
  const h = await episodePullRequests();
  const state = h.state(RUN);
  const [b0, b1] = h.openEpisodes(RUN);
  if (!b0 || !b1) throw new Error('expected an opening round of two branches');
  h.pushResult(state, b0, 20);
  await h.jobCompleted(RUN, b0.id);
  return { h, state, b0, b1 };
}

describe("a person's commit on a round's branch (pull_requests: episodes)", () => {
  it("a reviewer's commit on the leading branch's pull request is not deleted with the round's branches", async () => {
    // With `pull_requests: episodes` each branch's pull request invites review, and a reviewer does
    // what reviewers do: pushes a small fix onto the leading branch's pull request while its sibling
    // still runs. When the round is decided the app fast-forwards the lineage to the result it read
    // (without the fix) and deletes the branch: the reviewer's commit is on no branch any more, its
    // pull request closed unmerged, and nothing on the issue or the pull request says so.
    // Expected: nothing lost: a round branch is deleted only while it is where forkflush left it
    // (else kept, and the issue says it holds commits forkflush did not make).
    // Fault: src/github/work.ts settleRound deletes every round ref unconditionally (api.deleteRef).
    const { h, state, b0, b1 } = await leaderReported();
    const branch = BRANCH0;
    expect(h.gh.pulls.find((p) => p.head === branch)?.state).toBe('open');
    const fix = pushOn(h, branch, 'review: fix a typo');
    h.pushResult(state, b1, 10);
    await h.jobCompleted(RUN, b1.id);
    // The round was decided as it should be: b0 won, with the result its job pushed.
    expect(h.state(RUN).rounds[0]?.decision?.winner).toBe(b0.id);
    expect({ reviewersCommitOnABranch: onSomeBranch(h, fix) }).toEqual({ reviewersCommitOnABranch: true });
    expect(issueText(h)).toContain(`Kept, not deleted with their round: \`${branch}\` (at ${fix.slice(0, 7)})`);
    // Its sibling, where forkflush left it, is deleted as ever.
    expect(h.gh.refs.has('refs/heads/forkflush/issue-7/round-0/branch-1')).toBe(false);
  });

  it("a teammate's commit pushed on a branch whose job still runs is not deleted with the round's branches", async () => {
    // A teammate pushes onto a round's branch while its agent works (to "help", or by mistake with
    // a `git push` of a checked-out forkflush branch). The app gives the episode no score ("its
    // branch moved to <sha>, which is not a result of this episode": fair, the agent's own result
    // can no longer land), and at the round's end deletes the branch: the teammate's commit is gone, silently. Expected: the branch that holds a
    // person's commit is kept, and the issue says so.
    // Fault: src/github/work.ts settleRound (deleteRef of a branch forkflush did not leave there).
    const h = await episodePullRequests();
    const state = h.state(RUN);
    const [b0, b1] = h.openEpisodes(RUN);
    if (!b0 || !b1) throw new Error('expected an opening round of two branches');
    const mine = pushOn(h, BRANCH0, "teammate's fix");
    h.pushResult(state, b1, 10);
    await h.jobCompleted(RUN, b1.id);
    await h.jobCompleted(RUN, b0.id, 'failure');
    expect(h.state(RUN).rounds[0]?.decision).toBeDefined();
    expect({ teammatesCommitOnABranch: onSomeBranch(h, mine) }).toEqual({ teammatesCommitOnABranch: true });
    expect(issueText(h)).toMatch(/Kept, not deleted with their round: `forkflush\/issue-7\/round-0\/branch-0`/);
  });

  // A reviewer on branch-0's pull request fixes the result the way one fixes a last commit:
  // `git commit --amend` (or GitHub's web editor on a rebased branch) and a force-push. The
  // amended commit keeps the result's message, Forkflush- trailers and parent (the episode's
  // base), so leftByForkflush's resultFromCommit reads it as "a result of this episode that
  // landed late", and settleRound deletes the branch: the reviewer's fix is on no branch, its pull
  // request closed, and the issue names nothing (no "Kept" line). Right: only the commits forkflush
  // recorded or can vouch for (the base, e.result.commit, a result not yet observed that observe
  // would adopt) count as "left by forkflush"; a commit whose tree is not the recorded result's,
  // at a ref whose episode already has a result, is a person's and is kept and named.
  // Where: src/github/work.ts leftByForkflush.
  it("a reviewer's amended result commit (trailers kept, force-pushed) is not deleted with the round", async () => {
    const { h, state, b0, b1 } = await leaderReported();
    const result = h.gh.refs.get(`refs/heads/${BRANCH0}`) as string;
    const original = h.gh.commits.get(result);
    if (!original) throw new Error('expected the result commit');
    // `git commit --amend --no-edit` with a fix, then `git push --force`.
    const amended = h.gh.commit({
      message: original.message,
      parents: original.parents,
      files: { ...original.files, 'REVIEW.md': 'a reviewer fixed a typo\n' },
    });
    h.gh.refs.set(`refs/heads/${BRANCH0}`, amended);
    h.gh.branchesMoved();
    h.pushResult(state, b1, 10);
    await h.jobCompleted(RUN, b1.id);
    expect(h.state(RUN).rounds[0]?.decision?.winner).toBe(b0.id);
    expect({ reviewersCommitOnABranch: onSomeBranch(h, amended) }).toEqual({ reviewersCommitOnABranch: true });
    expect(issueText(h)).toContain(`\`${BRANCH0}\` (at ${amended.slice(0, 7)})`);
  });

  // The issue tells the team "Kept, not deleted with their round: `...branch-0` ... Merge what you
  // want from them, then delete them." They do: the branch is merged and deleted. The note stays
  // in the status comment for the rest of the run (every round, every night): files.keptRefs is
  // only ever added to, never read against the repository again, so the issue keeps asking to
  // delete a branch that is gone. Right: a kept ref that is gone (or no longer at the kept commit)
  // drops out of the note at the next sync.
  // Where: src/github/sync.ts keptRefsNote / src/github/work.ts (keptRefs never pruned).
  it('the "Kept" note goes once the team has deleted the kept branch', async () => {
    const { h, state, b1 } = await leaderReported();
    pushOn(h, BRANCH0, 'review: fix a typo');
    h.pushResult(state, b1, 10);
    await h.jobCompleted(RUN, b1.id);
    expect(issueText(h)).toContain('Kept, not deleted with their round');
    // The team merges what it wants and deletes the branch, as the note asks.
    h.gh.refs.delete(`refs/heads/${BRANCH0}`);
    h.gh.branchesMoved();
    // The run goes on: the next rounds' events sync it.
    await h.playToEnd(RUN);
    expect(issueText(h)).not.toContain(BRANCH0);
  });
});

const NIGHTLY = `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 5 }\n`;

/** A run with nightly rounds, played to its end. */
async function finishedWithNightlyRounds(): Promise<Harness> {
  const h = await new Harness({ '.github/autoresearch.yml': NIGHTLY, 'grade.mjs': 'x' }).load();
  await h.label(7);
  await h.playToEnd(RUN);
  return h;
}

/** A day later, the nightly tick. */
async function nextNight(h: Harness): Promise<void> {
  h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
  await nightlyTick(h.api(), h.clock);
}

describe('the config edited on the default branch mid-run', () => {
  it('turning the nightly rounds off in .github/autoresearch.yml on main stops them, and the issue says why', async () => {
    // A finished run has nightly rounds (`schedule: { nightly: true, budget: 100, rounds: 5 }`). A
    // teammate, to stop the nightly spend, takes `schedule:` out of the config on main. Before, that
    // night the tick opened a round all the same, and every night after while schedule.budget
    // lasted, and the issue said nothing (the run keeps the config it started with).
    // Now the nightly switch is read from the default branch each night: off there, no round
    // runs and the issue is told once why; on again, the rounds go on.
    const h = await finishedWithNightlyRounds();
    const dispatched = h.gh.dispatches.length;
    const main = h.gh.refs.get('refs/heads/main') as string;
    const files = { ...h.gh.commits.get(main)?.files, '.github/autoresearch.yml': CONFIG };
    h.gh.refs.set('refs/heads/main', h.gh.commit({ message: 'no more nightly rounds', parents: [main], files }));
    await nextNight(h);
    expect(h.gh.dispatches.length).toBe(dispatched);
    expect(issueText(h)).toContain(
      'forkflush ran no nightly round: `.github/autoresearch.yml` on `main` no longer asks for nightly rounds',
    );
    // Asked for again on main: the next night's round runs.
    const off = h.gh.refs.get('refs/heads/main') as string;
    const again = {
      ...h.gh.commits.get(off)?.files,
      '.github/autoresearch.yml': NIGHTLY,
    };
    h.gh.refs.set('refs/heads/main', h.gh.commit({ message: 'nightly rounds again', parents: [off], files: again }));
    await nextNight(h);
    expect(h.gh.dispatches.length).toBe(dispatched + 1);
  });

  // The repository's default branch is renamed (main -> trunk, in Settings) after the run
  // started; the config on trunk still asks for nightly rounds. The app follows the rename
  // everywhere else (dispatches and pull requests read the default branch now), but
  // nightlyOffOnDefaultBranch reads the config from files.defaultBranch, the name recorded when
  // the run started: `main` is gone, readFile says null, and the tick runs no nightly round and
  // tells the issue "`.github/autoresearch.yml` on `main` is gone", every night, though nobody
  // touched the config. Right: the switch is read from the default branch as it is now
  // (api.defaultBranch()), and the night's round runs.
  // Where: src/github/nightly.ts nightlyOffOnDefaultBranch.
  it('after the default branch is renamed (main -> trunk), the nightly round still runs on the config there', async () => {
    const h = await finishedWithNightlyRounds();
    const dispatched = h.gh.dispatches.length;
    h.gh.renameDefaultBranch('trunk');
    await nextNight(h);
    expect(issueText(h)).not.toMatch(/on `main` is gone/);
    expect(h.gh.dispatches.length).toBe(dispatched + 1);
  });
});

describe("a round's workflow run cancelled in the Actions tab", () => {
  it('cancelling a serial round\'s run stops the run, not "failed, next round" at once', async () => {
    // At night a teammate sees the run spending and cancels its workflow run in the Actions tab
    // (the button GitHub shows on the run). Before, the app read the cancelled job as an episode that
    // failed (charged its whole allowance) and dispatched the next round within the same second:
    // a new run appeared, the teammate cancelled it, and so on until 3 in a row stopped the run
    // with a status that blamed the token, timeout-minutes or billing.
    // Now a cancel of the round's own run (not the app's: its stops and deadlines cancel runs of
    // stopped runs or decided rounds) stops the run as a person's stop: no next round, nothing
    // charged, the status says the round's run was cancelled in Actions, and a resume goes on.
    const h = await new Harness().load();
    await h.label(7);
    const state = h.state(RUN);
    h.pushBase(state, 1);
    for (const e of h.openEpisodes(RUN)) h.pushResult(state, e, 5 + e.branch);
    for (const e of h.openEpisodes(RUN)) await h.jobCompleted(RUN, e.id);
    // Round 1 is a serial round of one branch, its job running.
    expect(h.openEpisodes(RUN).map((e) => e.id)).toEqual(['r1.b0']);
    await h.jobStarted(RUN, 'r1.b0');
    const runId = h.runFiles(RUN)?.dispatched['1']?.runId;
    const workflowRun = h.box.actions.runs.find((r) => r.id === runId);
    if (!workflowRun) throw new Error("expected round 1's workflow run");
    // The teammate's cancel: GitHub ends each job, then the run, as cancelled.
    h.box.actions.cancel(workflowRun.id);
    for (const job of workflowRun.jobs) await h.box.jobEvent(job);
    await h.box.runEvent(workflowRun);
    expect(workflowRun.conclusion).toBe('cancelled');
    expect({
      dispatchedAfterTheCancel: h.gh.dispatches.map((d) => d.inputs.round),
      status: statusLine(h).match(/^\*\*Status:\*\* (stopped|\w+)/)?.[1],
      saysCancelled: /cancel/i.test(statusLine(h)),
    }).toEqual({ dispatchedAfterTheCancel: ['0', '1'], status: 'stopped', saysCancelled: true });
    // Nothing was charged for the cancelled episode, and a resume runs it again.
    expect(h.state(RUN).rounds[1]?.episodes[0]?.result).toBeUndefined();
    await h.comment(7, '/autoresearch resume');
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0', '1', '1']);
    expect(statusLine(h)).not.toMatch(/cancel/i);
  });

  it("the same in the opening round: stopped as cancelled, not as every branch's failure with a permission or billing hint", async () => {
    const h = await new Harness().load();
    await h.label(7);
    const workflowRun = h.box.actions.runs.find((r) => r.id === h.runFiles(RUN)?.dispatched['0']?.runId);
    if (!workflowRun) throw new Error("expected the opening round's workflow run");
    h.box.actions.cancel(workflowRun.id);
    for (const job of workflowRun.jobs) await h.box.jobEvent(job);
    await h.box.runEvent(workflowRun);
    expect(h.gh.dispatches.map((d) => d.inputs.round)).toEqual(['0']);
    expect(statusLine(h)).toMatch(/^\*\*Status:\*\* stopped: round 0's workflow run \d+ was cancelled in Actions/);
    expect(statusLine(h)).not.toMatch(/billing|permission/i);
    expect(h.state(RUN).rounds[0]?.episodes.every((e) => e.result === undefined)).toBe(true);
  });
});
