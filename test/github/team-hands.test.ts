// A real team's hands on a running GitHub run, overnight, with nobody watching: a reviewer's commit
// on a round's pull request, a push to a round's branch. Each row failed before its fix (found by
// a review); its comment says what a team saw go wrong and what the right behaviour is.
import { describe, expect, it } from 'vitest';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const issueText = (h: Harness) =>
  h.gh.comments
    .filter((c) => c.issue === 7)
    .map((c) => c.body)
    .join('\n');
const _statusLine = (h: Harness) =>
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
    const h = await episodePullRequests();
    const state = h.state(RUN);
    const [b0, b1] = h.openEpisodes(RUN);
    if (!b0 || !b1) throw new Error('expected an opening round of two branches');
    h.pushResult(state, b0, 20);
    await h.jobCompleted(RUN, b0.id);
    const branch = 'forkflush/issue-7/round-0/branch-0';
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
    const mine = pushOn(h, 'forkflush/issue-7/round-0/branch-0', "teammate's fix");
    h.pushResult(state, b1, 10);
    await h.jobCompleted(RUN, b1.id);
    await h.jobCompleted(RUN, b0.id, 'failure');
    expect(h.state(RUN).rounds[0]?.decision).toBeDefined();
    expect({ teammatesCommitOnABranch: onSomeBranch(h, mine) }).toEqual({ teammatesCommitOnABranch: true });
    expect(issueText(h)).toMatch(/Kept, not deleted with their round: `forkflush\/issue-7\/round-0\/branch-0`/);
  });
});
