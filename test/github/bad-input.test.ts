// The GitHub side from a new team's and a careless teammate's seat: bad input is acted on as meant
// or answered with what is wrong, and a setup that cannot work stops before it spends. Each row's
// comment says what happened before (found by a review).
import { describe, expect, it } from 'vitest';
import { shown } from './fake-github.js';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const said = (h: Harness) => h.gh.comments.filter((c) => c.issue === 7).map((c) => shown(c.body));

describe('a config that cannot work, found before anything is spent', () => {
  it('grader.command runs a file that is not on the default branch: no round is dispatched, and the issue names the file', async () => {
    // `node score.mjs` with no score.mjs committed (a teammate forgot `git add`). `forkflush run`
    // refuses this in its pre-flight. Before, on GitHub, the label started the run and dispatched
    // the opening round: every branch's agent spent its allowance, then no grading could score it.
    const config = CONFIG.replace('node grade.mjs', 'node score.mjs');
    const h = await new Harness({ '.github/autoresearch.yml': config, 'README.md': 'hi\n' }).load();
    await h.label(7);
    expect(h.gh.dispatches.map((d) => d.inputs.episodes)).toEqual([]);
    expect(said(h).join('\n')).toMatch(/grader\.command[\s\S]*score\.mjs/);
  });

  it('the first setup command runs a file that is not on the default branch: no round is dispatched, and the issue names it', async () => {
    // `setup: ./install.sh` with no install.sh committed. Before, setup commands turned the check
    // off (setup may make the grader's script), so every branch's setup failed after the label.
    const config = CONFIG.replace('grader:', 'setup: ./install.sh\ngrader:');
    const h = await new Harness({ '.github/autoresearch.yml': config, 'README.md': 'hi\n' }).load();
    await h.label(7);
    expect(h.gh.dispatches.map((d) => d.inputs.episodes)).toEqual([]);
    expect(said(h).join('\n')).toMatch(/setup\.commands\[0\][\s\S]*install\.sh/);
  });
});

describe('comment commands as a writer types them', () => {
  it('`/autoresearch stop now` is answered with what is wrong, and stops nothing', async () => {
    // One word too many. Before: the comment was not read as a command, so no 👀, no reply, and
    // the run's rounds went on spending while the writer believed it stopped.
    const h = await new Harness().load();
    await h.label(7);
    const before = h.gh.comments.length;
    await h.comment(7, '/autoresearch stop now');
    expect(h.runFiles(RUN)?.stopped).not.toBe(true);
    const reply = h.gh.comments.slice(before).map((c) => shown(c.body));
    expect(reply.join('\n')).toContain('`/autoresearch stop` takes nothing after it (got `now`)');
  });

  it('`/Autoresearch stop` (capitalised, as a phone keyboard writes it) stops the run', async () => {
    // Before: `/Autoresearch start budget=50` started a run (that pattern ignored case), and
    // `/Autoresearch stop` was passed over in silence while the run went on.
    const h = await new Harness().load();
    await h.label(7);
    await h.comment(7, '/Autoresearch stop');
    expect(h.runFiles(RUN)?.stopped).toBe(true);
  });
});

describe("a command's words, as pasted or written below it", () => {
  it('`/autoresearch fork` with what to try on the next line: the round is told those words', async () => {
    // Written as people write comments (the command, then the detail below it). Before: the fork
    // round opened with no words for its branches, was answered 👍, and the ask was lost.
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
    expect(told.length, explained ? 'explained, not told' : 'dropped').toBeGreaterThan(0);
    expect(told.every((a) => a === ASK)).toBe(true);
  });

  it('`/autoresearch stop` with an invisible character pasted after it stops the run', async () => {
    // Copied from a chat, `stop` carries a zero-width space (U+200B). Before, the reply read
    // "unknown command `stop`: use ..., `/autoresearch stop`, ...": the word it showed looked exactly
    // like the valid one, and nothing said why it was not.
    const h = await new Harness().load();
    await h.label(7);
    const before = h.gh.comments.length;
    await h.comment(7, '/autoresearch stop\u200b');
    const reply = h.gh.comments
      .slice(before)
      .map((c) => shown(c.body))
      .join('\n');
    expect(h.runFiles(RUN)?.stopped, reply).toBe(true);
  });
});

describe('the label', () => {
  it('a label named `Autoresearch` (GitHub takes label names regardless of case) starts a run', async () => {
    // A new team creates the label as `Autoresearch`; GitHub would refuse a second `autoresearch`
    // beside it. Before: labelling an issue with it did nothing and said nothing.
    const h = await new Harness().load();
    await h.label(7, 'maintainer', 'User', 'Autoresearch');
    expect(h.gh.dispatches.length).toBeGreaterThan(0);
  });

  it('the label on a closed issue starts nothing, and says to reopen it', async () => {
    // Before: a run started and dispatched its opening round on an issue whose closing would have
    // stopped it, and whose nightly rounds would be passed by (a bulk relabel of old issues, say).
    const h = await new Harness().load();
    h.gh.labels.set(7, new Set(['autoresearch']));
    await h.send('issues', 'labeled', (p) => {
      p.issue.number = 7;
      p.issue.state = 'closed';
      delete p.issue.pull_request;
      p.label.name = 'autoresearch';
      p.sender.login = 'maintainer';
      p.sender.type = 'User';
    });
    expect(h.gh.dispatches).toEqual([]);
    expect(said(h).join('\n')).toContain('This issue is closed, so forkflush did not start: reopen it');
  });
});

describe('a run whose scripts are committed starts', () => {
  it('grader.command `deno run --allow-read grade.ts` (grade.ts committed) starts the run', async () => {
    // Before, the interpreter's second word was taken for its script: for `deno run ...` (and `bun
    // run x.ts`, `bun test`) the subcommand `run`, and the run was refused for a file named `run`.
    const config = CONFIG.replace('node grade.mjs', 'deno run --allow-read grade.ts');
    const h = await new Harness({ '.github/autoresearch.yml': config, 'grade.ts': 'console.log(1)\n' }).load();
    await h.label(7);
    expect(h.gh.dispatches.length, said(h).join('\n')).toBeGreaterThan(0);
  });

  it('grader.command `python3 grader` (a committed package folder with __main__.py) starts the run', async () => {
    // The contents API answers a folder with a listing. Before, the check read it as a file that is
    // not there, and refused the run (the local pre-flight takes it: git finds the tree).
    const config = CONFIG.replace('node grade.mjs', 'python3 grader');
    const h = await new Harness({
      '.github/autoresearch.yml': config,
      'grader/__main__.py': 'print(1)\n',
    }).load();
    await h.label(7);
    expect(h.gh.dispatches.length, said(h).join('\n')).toBeGreaterThan(0);
  });
});
