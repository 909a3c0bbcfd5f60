// Reviews of a run's pull request as directives (issue 21): a writer's review that requests
// changes, or whose text says `/autoresearch fork <what to try>`, opens one fork round whose
// branches are told the review's words; anyone else's, or one on another pull request, does
// nothing; a review delivered again, even to a restarted app, opens nothing more.
import { describe, expect, it } from 'vitest';
import { episodePrompt } from '../../src/core/prompts.js';
import { shown } from './fake-github.js';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const ASK = 'Try a tabu search over the packing order instead of the greedy pass.';

/** A finished run with its result pull request; returns its number. */
async function finishedRun(h: Harness): Promise<number> {
  await h.label(7);
  for (let guard = 0; guard < 50 && h.state(RUN).status !== 'finished'; guard++) {
    const state = h.state(RUN);
    const open = h.openEpisodes(RUN);
    for (const e of open) if (!e.result) h.pushResult(state, e, 10 + e.round);
    for (const e of open) await h.jobCompleted(RUN, e.id);
  }
  const pr = h.runFiles(RUN)?.finalPr;
  expect(pr).toEqual(expect.any(Number));
  return pr as number;
}

/** A review submitted on pull request `pr` (its head as GitHub has it), as GitHub delivers it. */
function reviewPayload(
  h: Harness,
  pr: number,
  body: string,
  state = 'changes_requested',
  user = 'maintainer',
  id = 9001,
) {
  const head = h.gh.pulls.find((p) => p.number === pr)?.head ?? 'feature/x';
  return h.box.payload('pull_request_review', 'submitted', (p) => {
    // GitHub's examples of this event are older than these fields; GitHub sends them today.
    Object.assign(p.pull_request, { draft: false, auto_merge: null, active_lock_reason: null });
    for (const r of [p.pull_request.base.repo, p.pull_request.head.repo])
      Object.assign(r, { has_discussions: false, topics: [], visibility: 'private' });
    p.review.id = id;
    p.review.state = state;
    p.review.body = body;
    p.review.user.login = user;
    p.pull_request.number = pr;
    p.pull_request.head.ref = head;
    p.sender.login = user;
    p.sender.type = 'User';
  });
}

const forkRounds = (h: Harness) => h.state(RUN).rounds.filter((r) => r.extra);

describe("a review of the run's pull request", () => {
  it("from a writer, requesting changes, opens one fork round whose branches are told the review's words, once whatever delivers it", async () => {
    const h = await new Harness().load();
    const pr = await finishedRun(h);
    const review = reviewPayload(h, pr, ASK);
    h.box.onDelivery = () => 'twice';
    await h.box.deliver('pull_request_review', review);
    h.box.onDelivery = null;
    await h.restart();
    await h.box.deliver('pull_request_review', review);
    expect(h.box.deliveries.filter((d) => d.event === 'pull_request_review').map((d) => d.status)).toEqual([200, 200]);
    const rounds = forkRounds(h);
    expect(rounds).toHaveLength(1);
    const episodes = rounds[0]?.episodes ?? [];
    expect(episodes.map((e) => [e.asked, e.directive])).toEqual(episodes.map(() => [ASK, false]));
    expect(h.gh.dispatches.at(-1)?.inputs.episodes).toBe(JSON.stringify(episodes.map((e) => e.id)));
    // The agent is told, quoted as data.
    const prompt = episodePrompt(h.state(RUN), episodes[0] as never, 'task', {});
    expect(prompt).toContain(`asked you to try this:\n\n> ${ASK}`);
    // The record says which review was taken; the pull request is answered once.
    expect(h.runFiles(RUN)?.seen).toContain('review:9001');
    const answers = h.gh.comments.filter((c) => c.issue === pr).map((c) => shown(c.body));
    expect(answers).toEqual([expect.stringMatching(/^forkflush opened a fork round for @maintainer's review/)]);
  });

  it('`/autoresearch fork <what>` in a review that only comments opens the round with those words', async () => {
    const h = await new Harness().load();
    const pr = await finishedRun(h);
    await h.box.deliver('pull_request_review', reviewPayload(h, pr, `Nice.\n\n/autoresearch fork ${ASK}`, 'commented'));
    expect(forkRounds(h)[0]?.episodes.map((e) => e.asked)).toEqual([ASK, ASK]);
    // A review that approves, or comments without the command, asks for nothing.
    await h.box.deliver('pull_request_review', reviewPayload(h, pr, 'Looks good', 'approved', 'maintainer', 9002));
    await h.box.deliver('pull_request_review', reviewPayload(h, pr, 'Hm.', 'commented', 'maintainer', 9003));
    expect(h.state(RUN).extraForks).toBe(1);
  });

  it('from someone without write access, or on another pull request, does nothing and says nothing', async () => {
    const h = await new Harness().load();
    const pr = await finishedRun(h);
    const said = h.gh.comments.length;
    await h.box.deliver('pull_request_review', reviewPayload(h, pr, ASK, 'changes_requested', 'reader'));
    h.gh.refs.set('refs/heads/feature/other', h.gh.branch('main') as string);
    const other = 4242;
    h.gh.pulls.push({ number: other, head: 'feature/other', base: 'main', title: 'Another', body: '', state: 'open' });
    await h.box.deliver('pull_request_review', reviewPayload(h, other, ASK, 'changes_requested', 'maintainer', 9004));
    expect(h.box.deliveries.map((d) => d.status).slice(-2)).toEqual([200, 200]);
    expect(h.state(RUN).extraForks).toBeUndefined();
    expect(h.gh.comments).toHaveLength(said);
  });

  it('on a stopped run opens nothing, and says so once', async () => {
    const h = await new Harness({ '.github/autoresearch.yml': CONFIG, 'grade.mjs': 'x' }).load();
    const pr = await finishedRun(h);
    await h.comment(7, '/autoresearch stop');
    const review = reviewPayload(h, pr, ASK);
    await h.box.deliver('pull_request_review', review);
    await h.box.deliver('pull_request_review', review);
    expect(h.state(RUN).extraForks).toBeUndefined();
    expect(h.gh.comments.filter((c) => c.issue === pr).map((c) => shown(c.body))).toEqual([
      'forkflush opened no fork round for this review: The run is stopped: `/autoresearch resume` on its issue first, then review again.',
    ]);
  });
});

describe('/autoresearch fork <what> on the issue', () => {
  it("opens one fork round whose branches are told the comment's words", async () => {
    const h = await new Harness().load();
    await finishedRun(h);
    await h.comment(7, `/autoresearch fork ${ASK}`);
    expect(forkRounds(h)[0]?.episodes.map((e) => e.asked)).toEqual([ASK, ASK]);
  });
});
