// Per-run overrides on GitHub: `/autoresearch start budget=50 branches=2` on an issue without a run,
// or that line in the issue's text (from a writer), checked like the config, echoed in the status
// comment; a bad one gets one comment naming the key and what is valid, and no run.
import { describe, expect, it } from 'vitest';
import { shown } from './fake-github.js';
import { Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const status = (h: Harness) => h.gh.comments.find((c) => c.issue === 7 && c.body.includes('### forkflush'))?.body ?? '';

/** A comment delivered as GitHub sends it; `delivery` repeats the same delivery (a doubled webhook). */
function command(h: Harness, body: string, id = 501, user = 'maintainer') {
  return h.send('issue_comment', 'created', (p) => {
    p.issue.number = 7;
    delete p.issue.pull_request;
    p.comment.id = id;
    p.comment.body = body;
    p.sender.login = user;
    p.sender.type = 'User';
  });
}

/** The label, on an issue whose text has `body` and was written by `author`. */
function labelWith(h: Harness, body: string, author: string) {
  h.gh.labels.set(7, new Set(['autoresearch']));
  return h.send('issues', 'labeled', (p) => {
    p.issue.number = 7;
    p.issue.title = 'Pack it tighter';
    p.issue.body = body;
    p.issue.user.login = author;
    delete p.issue.pull_request;
    p.label.name = 'autoresearch';
    p.sender.login = 'maintainer';
    p.sender.type = 'User';
  });
}

describe('overrides', () => {
  it('`/autoresearch start budget=50 branches=3` starts a run with them, echoed in the status comment; a doubled delivery starts it once', async () => {
    const h = await new Harness().load();
    await command(h, '/autoresearch start budget=50 branches=3');
    await command(h, '/autoresearch start budget=50 branches=3');
    const c = h.state(RUN).config;
    expect([c.budget.total, c.fork.branches]).toEqual([50, 3]);
    expect(h.runFiles(RUN)?.overrides).toEqual({
      text: 'budget=50 branches=3',
      source: '`/autoresearch start` by @maintainer',
    });
    expect(status(h)).toContain(
      '**Overrides:** `budget=50 branches=3` (`/autoresearch start` by @maintainer), checked like the config',
    );
    expect(h.gh.dispatches).toHaveLength(1);
  });

  it('a bad one gets one comment naming each key and what is valid, and no run', async () => {
    const h = await new Harness().load();
    await command(h, '/autoresearch start budget=0 colour=red');
    expect(h.gh.refs.has('refs/forkflush/issue-7/state')).toBe(false);
    expect(h.gh.dispatches).toEqual([]);
    const said = h.gh.comments.filter((c) => c.issue === 7).map((c) => shown(c.body));
    expect(said).toEqual([
      'forkflush did not start: the overrides in `/autoresearch start` by @maintainer are not valid, so no run started. Fix these and start it again:\n\n' +
        '- `budget` is not a number above 0 (got `0`): it sets budget.total: a number above 0\n' +
        '- unknown key `colour`: valid keys are `budget`, `branches`, `strategy`, `model`',
    ]);
  });

  it('one the config does not accept is said with the config, and starts nothing', async () => {
    const h = await new Harness().load();
    // The config's episode budget (10) is above what a total of 5 leaves a branch round.
    await command(h, '/autoresearch start budget=5 branches=64');
    expect(h.gh.refs.has('refs/forkflush/issue-7/state')).toBe(false);
    const said = h.gh.comments.filter((c) => c.issue === 7).map((c) => shown(c.body));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(
      /^forkflush did not start: `\.github\/autoresearch\.yml` on `main` with the overrides `budget=5 branches=64` \(`\/autoresearch start` by @maintainer\) is not valid, so no run started\./,
    );
  });

  it("in the issue's text, from a writer, they start the labelled run", async () => {
    const h = await new Harness().load();
    await labelWith(h, 'Make the score go up.\n\n/autoresearch start budget=30\n', 'maintainer');
    expect(h.state(RUN).config.budget.total).toBe(30);
    expect(h.runFiles(RUN)?.overrides).toEqual({ text: 'budget=30', source: "the issue's text" });
  });

  it("in the issue's text from someone without write access, they start nothing, and a writer is told how", async () => {
    const h = await new Harness().load();
    await labelWith(h, 'Make the score go up.\n\n/autoresearch start budget=900\n', 'reader');
    expect(h.gh.refs.has('refs/forkflush/issue-7/state')).toBe(false);
    expect(h.gh.comments.filter((c) => c.issue === 7).map((c) => shown(c.body))).toEqual([
      "forkflush did not start: the issue's text asks for overrides (`budget=900`), and its author @reader has no write access to this repository, so they were not taken. A writer can start the run with them: `/autoresearch start budget=900`.",
    ]);
  });

  it('on an issue with a run, they change nothing and say so', async () => {
    const h = await new Harness().load();
    await h.label(7);
    await command(h, '/autoresearch start budget=5');
    expect(h.state(RUN).config.budget.total).toBe(100);
    expect(shown(h.gh.comments.at(-1)?.body ?? '')).toBe(
      'This issue has a forkflush run already: overrides (`budget=5`) apply only when a run starts. `/autoresearch resume` resumes it as it is.',
    );
  });
});
