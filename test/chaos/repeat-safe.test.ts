// Each GitHub write the app makes is repeat-safe or checked before it is repeated, with Octokit's
// retry and throttling plugins on as Probot ships them (timings shortened: test/github/harness.ts).
// The faults are the ones the chaos suite (chaos.ts) throws at whole runs, here one at a time: a
// server error or a connection reset, before or after GitHub did what the request asked.
import { describe, expect, it } from 'vitest';
import { GITHUB, stateRef } from '../../src/core/names.js';
import { ConflictError } from '../../src/github/requests.js';
import { RESET } from '../github/fake-github.js';
import { Harness } from '../github/harness.js';
import { useGitHubInABox } from '../github/use-box.js';

useGitHubInABox();

/** GitHub alone (no app), and a api on it with the plugins on; `topic` is one commit ahead of main. */
async function github() {
  const h = await new Harness().startGitHub();
  const main = h.gh.branch('main') as string;
  const topic = h.gh.commit({ message: 'a change', parents: [main], files: { 'a.txt': 'a\n' } });
  h.gh.refs.set('refs/heads/topic', topic);
  return { h, api: h.api(), main, topic };
}

/** Fails the first `times` requests that match with `status`; `applied`: after GitHub did the work. */
function failing(h: Harness, method: string, path: RegExp, status: number, applied = false, times = 1) {
  let left = times;
  h.gh.inject = (m, p) => {
    if (m !== method || !path.test(p) || left <= 0) return null;
    left--;
    return applied ? { status, applied: true } : status;
  };
}

describe('a pull request', () => {
  it('is opened once per head: one closed meanwhile is found, not opened again (the duplicate of seed 14)', async () => {
    const { h, api } = await github();
    const first = await api.pulls.open('topic', 'main', 'A change', 'body');
    // Closed while its branch is still there: a stop closes it, or a settle closes a loser just
    // before it deletes the branch. GitHub refuses a second pull request only while one is open,
    // so a handler that took the publish over from a stale claim used to open a second one here.
    await api.octokit.rest.pulls.update({
      owner: h.gh.owner,
      repo: h.gh.repo,
      pull_number: first as number,
      state: 'closed',
    });
    expect(await api.pulls.open('topic', 'main', 'A change', 'body')).toBe(first);
    expect(h.gh.pulls.map((p) => p.head)).toEqual(['topic']);
  });

  it.each([
    [502, 'a server error'],
    [RESET, 'a reset'],
  ])('made by GitHub though the answer was lost (%s, %s) is found, not made twice', async (status) => {
    const { h, api } = await github();
    failing(h, 'POST', /\/pulls$/, status, true);
    const pr = await api.pulls.open('topic', 'main', 'A change', 'body');
    expect(h.gh.injected).toHaveLength(1);
    expect(h.gh.pulls.map((p) => p.number)).toEqual([pr]);
  });

  it('not made (a reset before GitHub saw it) is made on the next try', async () => {
    const { h, api } = await github();
    failing(h, 'POST', /\/pulls$/, RESET);
    const pr = await api.pulls.open('topic', 'main', 'A change', 'body');
    expect(h.gh.pulls.map((p) => p.number)).toEqual([pr]);
  });

  it('through an outage: three tries, each checked first, then the handler fails', async () => {
    const { h, api } = await github();
    failing(h, 'POST', /\/pulls$/, 503, false, 10);
    await expect(api.pulls.open('topic', 'main', 'A change', 'body')).rejects.toMatchObject({ status: 503 });
    expect(h.gh.injected).toHaveLength(3);
    expect(h.gh.pulls).toEqual([]);
  });
});

describe('a check run', () => {
  it('made by GitHub though the answer was lost is found, not made twice', async () => {
    const { h, api, topic } = await github();
    failing(h, 'POST', /\/check-runs$/, RESET, true);
    const output = { title: 'score 1', summary: 's', text: 't' };
    const id = await api.checks.create({
      sha: topic,
      name: 'forkflush r0.b0',
      status: 'completed',
      conclusion: 'success',
      output,
      completedAt: '2026-11-30T12:00:00Z',
    });
    expect(h.gh.checkRuns.map((c) => c.id)).toEqual([id]);
  });
});

describe('a workflow dispatch', () => {
  it('that GitHub started though the answer was lost is found by its run, not dispatched twice', async () => {
    const { h, api } = await github();
    failing(h, 'POST', /\/dispatches$/, 500, true);
    await api.workflows.dispatch(GITHUB.workflow, 'main', { run: 'issue-7', round: '0', episodes: '["r0.b0"]' });
    expect(h.gh.dispatches).toHaveLength(1);
  });

  it('that GitHub did not start is sent again', async () => {
    const { h, api } = await github();
    failing(h, 'POST', /\/dispatches$/, 500);
    await api.workflows.dispatch(GITHUB.workflow, 'main', { run: 'issue-7', round: '0', episodes: '["r0.b0"]' });
    expect(h.gh.injected).toHaveLength(1);
    expect(h.gh.dispatches).toHaveLength(1);
  });
});

describe('a comment', () => {
  it.each([
    ['a server error', 500],
    ['a reset', RESET],
  ])('written by GitHub though the answer was lost (%s) is found, not written twice', async (_what, status) => {
    const { h, api } = await github();
    failing(h, 'POST', /\/issues\/7\/comments$/, status, true);
    await api.issues.comment(7, 'hello');
    expect(h.gh.injected).toHaveLength(1);
    expect(h.gh.comments.map((c) => c.body)).toEqual(['hello']);
  });

  it('not written (a reset before GitHub saw it) is written on the next try, beside an older one with the same text', async () => {
    const { h, api } = await github();
    await api.issues.comment(7, 'hello');
    // Older than the lookup's window: a reply from earlier, not this try's.
    (h.gh.comments[0] as { updatedAt: string }).updatedAt = new Date(Date.now() - 10 * 60_000).toISOString();
    failing(h, 'POST', /\/issues\/7\/comments$/, RESET);
    await api.issues.comment(7, 'hello');
    expect(h.gh.comments.map((c) => c.body)).toEqual(['hello', 'hello']);
  });

  it("is not taken to be a person's comment with the same text", async () => {
    const { h, api } = await github();
    const at = new Date().toISOString();
    h.gh.comments.push({
      id: 9001,
      issue: 7,
      body: 'hello',
      edits: 0,
      createdAt: at,
      updatedAt: at,
      author: { login: 'octocat', id: 1, type: 'User' },
    });
    // The try is lost before GitHub saw it; the lookup must not take the person's comment for it.
    failing(h, 'POST', /\/issues\/7\/comments$/, RESET);
    await api.issues.comment(7, 'hello');
    expect(h.gh.comments.map((c) => c.author?.login ?? 'forkflush[bot]')).toEqual(['octocat', 'forkflush[bot]']);
  });
});

describe("forkflush's status comment", () => {
  const marker = '<!-- forkflush:issue-7 -->';
  const someone = (id: number, body: string, type: 'User' | 'Bot') => {
    const at = new Date().toISOString();
    const login = type === 'Bot' ? 'echo[bot]' : 'octocat';
    return { id, issue: 7, body, edits: 0, createdAt: at, updatedAt: at, author: { login, id: 1, type } };
  };

  it('is found by its marker when the record lost its id: edited, not written again', async () => {
    const { h, api } = await github();
    await api.issues.comment(7, 'someone else');
    const first = await api.issues.upsertComment(7, null, `${marker}\nround 0`, marker);
    const again = await api.issues.upsertComment(7, null, `${marker}\nround 1`, marker);
    expect(again).toBe(first);
    expect(h.gh.comments.map((c) => c.body)).toEqual(['someone else', `${marker}\nround 1`]);
  });

  it("is not a person's comment that copies the marker, nor another bot's that quotes it", async () => {
    const { h, api } = await github();
    h.gh.comments.push(someone(9001, `${marker}\nforged by a person`, 'User'), someone(9002, `> ${marker}`, 'Bot'));
    const id = await api.issues.upsertComment(7, null, `${marker}\nround 0`, marker);
    expect([9001, 9002]).not.toContain(id);
    expect(h.gh.comments.filter((c) => c.edits > 0)).toEqual([]);
    expect(h.gh.comments.at(-1)).toMatchObject({ id, body: `${marker}\nround 0` });
  });

  it('is not written twice when an edit answers 404 after it was made (seed 179)', async () => {
    const { h, api } = await github();
    const id = await api.issues.upsertComment(7, null, `${marker}\nround 0`, marker);
    failing(h, 'PATCH', /\/issues\/comments\/\d+$/, 404, true);
    expect(await api.issues.upsertComment(7, id, `${marker}\nround 1`, marker)).toBe(id);
    expect(h.gh.injected).toHaveLength(1);
    expect(h.gh.comments.map((c) => c.body)).toEqual([`${marker}\nround 1`]);
  });

  it('is written anew when a person deleted it', async () => {
    const { h, api } = await github();
    const id = await api.issues.upsertComment(7, null, `${marker}\nround 0`, marker);
    h.gh.comments.splice(0);
    const again = await api.issues.upsertComment(7, id, `${marker}\nround 1`, marker);
    expect(again).not.toBe(id);
    expect(h.gh.comments.map((c) => c.body)).toEqual([`${marker}\nround 1`]);
  });

  it("is written anew when another app's comment starts with the marker and cannot be edited (403)", async () => {
    const { h, api } = await github();
    h.gh.comments.push(someone(9002, `${marker}\nan echo`, 'Bot'));
    const id = await api.issues.upsertComment(7, null, `${marker}\nround 0`, marker);
    expect(id).not.toBe(9002);
    expect(h.gh.comments.map((c) => [c.id === id, c.body])).toEqual([
      [false, `${marker}\nan echo`],
      [true, `${marker}\nround 0`],
    ]);
  });
});

describe("the run's record", () => {
  /** A run the app started, and its record as stored. */
  async function started() {
    const h = await new Harness().load();
    await h.label(7);
    const api = h.api();
    const stored = await api.loadRun(stateRef('issue-7'));
    if (!stored) throw new Error('no record');
    return { h, api, stored };
  }

  it('saved though the answer was lost: the retry plugin sends it again, and the save stands', async () => {
    const { h, api, stored } = await started();
    failing(h, 'PATCH', /\/git\/refs\/forkflush/, 502, true);
    const sha = await api.saveRun(stateRef('issue-7'), stored.state, stored.files, stored.sha, 'a save');
    expect(h.gh.refs.get(stateRef('issue-7'))).toBe(sha);
    expect(h.gh.injected).toHaveLength(1);
  });

  it('created though the answer was lost (a reset): the repeat is refused, and the ref at this commit is the save', async () => {
    const { h, api, stored } = await started();
    failing(h, 'POST', /\/git\/refs$/, RESET, true);
    const sha = await api.saveRun(stateRef('issue-8'), stored.state, stored.files, null, 'a new run');
    expect(h.gh.refs.get(stateRef('issue-8'))).toBe(sha);
    expect(h.gh.injected).toHaveLength(1);
  });

  it('changed by another handler meanwhile: a conflict, as before', async () => {
    const { h, api, stored } = await started();
    h.rewriteRecord('issue-7', (files) => {
      files.lastNightly = '2026-11-30';
    });
    await expect(
      api.saveRun(stateRef('issue-7'), stored.state, stored.files, stored.sha, 'late'),
    ).rejects.toBeInstanceOf(ConflictError);
  });
});

describe('a read', () => {
  it('whose connection was reset is sent again by the retry plugin', async () => {
    const { h, api, main } = await github();
    failing(h, 'GET', /\/git\/ref\//, RESET, false, 2);
    expect(await api.refSha('refs/heads/main')).toBe(main);
    expect(h.gh.injected).toHaveLength(2);
  });
});
