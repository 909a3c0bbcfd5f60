// A review of the GitHub side from a new team's and a careless teammate's seat: bad input that the
// app passes over in silence, answers without saying what is wrong, or lets spend before a setup
// that cannot work is found. Every row here failed when it was written (nothing is fixed in src/).
import { describe, expect, it } from 'vitest';
import { shown } from './fake-github.js';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const said = (h: Harness) => h.gh.comments.filter((c) => c.issue === 7).map((c) => shown(c.body));

describe('a config that cannot work, found before anything is spent', () => {
  it('grader.command runs a file that is not on the default branch: no round is dispatched, and the issue names the file', async () => {
    // `node grade.mjs` with no grade.mjs committed (a teammate forgot `git add`). `forkflush run`
    // refuses this in its pre-flight ("grader.command: grade.mjs, the file `node grade.mjs` runs,
    // does not exist in the repository"). On GitHub the label starts the run and dispatches the
    // opening round: every branch's agent spends its allowance, then no grading can score it.
    const h = await new Harness({ '.github/autoresearch.yml': CONFIG, 'README.md': 'hi\n' }).load();
    await h.label(7);
    expect(h.gh.dispatches.map((d) => d.inputs.episodes)).toEqual([]);
    expect(said(h).join('\n')).toMatch(/grader\.command[\s\S]*grade\.mjs/);
  });
});

describe('comment commands from a writer that get no answer at all', () => {
  it('`/autoresearch stop now` neither stops the run nor is answered', async () => {
    // One word too many: the comment is not read as a command, so no 👀, no reply, and the
    // run's rounds go on spending while the writer believes it stopped.
    const h = await new Harness().load();
    await h.label(7);
    const before = h.gh.comments.length;
    await h.comment(7, '/autoresearch stop now');
    const stopped = h.runFiles(RUN)?.stopped === true;
    const answered = h.gh.comments.length > before;
    expect({ stopped, answered }).not.toEqual({ stopped: false, answered: false });
  });

  it('`/Autoresearch stop` (capitalised, as a phone keyboard writes it) neither stops the run nor is answered', async () => {
    // `/Autoresearch start budget=50` starts a run (that pattern ignores case); `/Autoresearch stop` is
    // passed over in silence, and the run goes on.
    const h = await new Harness().load();
    await h.label(7);
    const before = h.gh.comments.length;
    await h.comment(7, '/Autoresearch stop');
    const stopped = h.runFiles(RUN)?.stopped === true;
    const answered = h.gh.comments.length > before;
    expect({ stopped, answered }).not.toEqual({ stopped: false, answered: false });
  });
});

describe("a command's words that are dropped or not explained", () => {
  it('`/autoresearch fork` with what to try on the next line: the round is told those words, or the reply says they were not taken', async () => {
    // Written as people write comments (the command, then the detail below it), the fork round
    // opens with no words for its branches, is answered 👍, and the ask is lost without a word.
    const ASK = 'Try a tabu search over the packing order instead of the greedy pass.';
    const h = await new Harness().load();
    await h.label(7);
    await h.playToEnd(RUN);
    const before = h.gh.comments.length;
    await h.comment(7, `/autoresearch fork\n${ASK}`);
    const round = h.state(RUN).rounds.find((r) => r.extra);
    const told = round?.episodes.map((e) => e.asked) ?? [];
    const explained = h.gh.comments
      .slice(before)
      .some((c) => c.body.includes('tabu') || /next line|same line/.test(c.body));
    expect(told.length > 0 && told.every((a) => a === ASK) ? 'told' : explained ? 'explained' : 'dropped').not.toBe(
      'dropped',
    );
  });

  it('`/autoresearch stop` with an invisible character pasted after it: the reply says what is wrong with the word', async () => {
    // Copied from a chat, `stop` carries a zero-width space (U+200B). The reply reads
    // "unknown command `stop`: use ..., `/autoresearch stop`, ...": the word it shows looks exactly like
    // the valid one, and nothing says why it is not.
    const h = await new Harness().load();
    await h.label(7);
    const before = h.gh.comments.length;
    await h.comment(7, '/autoresearch stop\u200b');
    const reply = h.gh.comments
      .slice(before)
      .map((c) => shown(c.body))
      .join('\n');
    const stopped = h.runFiles(RUN)?.stopped === true;
    expect(stopped || /U\+200B|invisible|zero-width|non-ASCII|not ASCII/i.test(reply)).toBe(true);
  });
});

describe('the label', () => {
  it('a label named `Autoresearch` (GitHub takes label names regardless of case) starts a run or is answered', async () => {
    // A new team creates the label as `Autoresearch`; GitHub would refuse a second `autoresearch`
    // beside it. Labelling an issue with it does nothing and says nothing: no run, no comment.
    const h = await new Harness().load();
    await h.label(7, 'maintainer', 'User', 'Autoresearch');
    expect(h.gh.dispatches.length + h.gh.comments.length).toBeGreaterThan(0);
  });
});
