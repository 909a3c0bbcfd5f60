// A review of the GitHub fixes since ff0229d (settleRound's kept refs, the nightly switch read from
// the default branch), as a team's hands on a run. Every row failed before its fix; its
// comment says what went wrong then, what the right behaviour is, and where in src/.
import { describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { CONFIG, Harness, issueText } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const statusOf = (h: Harness) => h.gh.comments.find((c) => c.issue === 7)?.body ?? '';
const BRANCH0 = 'forkflush/issue-7/round-0/branch-0';

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

describe('self-review: round branches kept at settle', () => {
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
    const h = await episodePullRequests();
    const state = h.state(RUN);
    const [b0, b1] = h.openEpisodes(RUN);
    if (!b0 || !b1) throw new Error('expected an opening round of two branches');
    h.pushResult(state, b0, 20);
    await h.jobCompleted(RUN, b0.id);
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
    const h = await episodePullRequests();
    const state = h.state(RUN);
    const [b0, b1] = h.openEpisodes(RUN);
    if (!b0 || !b1) throw new Error('expected an opening round of two branches');
    h.pushResult(state, b0, 20);
    await h.jobCompleted(RUN, b0.id);
    const head = h.gh.refs.get(`refs/heads/${BRANCH0}`) as string;
    const fix = h.gh.commit({
      message: 'review: fix a typo',
      parents: [head],
      files: { ...h.gh.commits.get(head)?.files, 'REVIEW.md': 'fix\n' },
    });
    h.gh.refs.set(`refs/heads/${BRANCH0}`, fix);
    h.gh.branchesMoved();
    h.pushResult(state, b1, 10);
    await h.jobCompleted(RUN, b1.id);
    expect(statusOf(h)).toContain('Kept, not deleted with their round');
    // The team merges what it wants and deletes the branch, as the note asks.
    h.gh.refs.delete(`refs/heads/${BRANCH0}`);
    h.gh.branchesMoved();
    // The run goes on: the next rounds' events sync it.
    await h.playToEnd(RUN);
    expect(statusOf(h)).not.toContain(BRANCH0);
  });
});

describe('self-review: the nightly switch on the default branch', () => {
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
    const h = await new Harness({
      '.github/autoresearch.yml': `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 5 }\n`,
      'grade.mjs': 'x',
    }).load();
    await h.label(7);
    await h.playToEnd(RUN);
    const dispatched = h.gh.dispatches.length;
    h.gh.renameDefaultBranch('trunk');
    h.clock = new Date(h.clock.getTime() + 24 * 3_600_000);
    await nightlyTick(h.api(), h.clock);
    expect(issueText(h)).not.toMatch(/on `main` is gone/);
    expect(h.gh.dispatches.length).toBe(dispatched + 1);
  });
});
