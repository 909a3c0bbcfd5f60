// GitHub's own size and count limits met by a long run or a large repository: a listing GitHub
// truncates, a list it pages, a comment it would refuse. Each must end in a clear word and nothing
// lost, never a sync that fails in silence nor a check that goes unchecked.
import { describe, expect, it } from 'vitest';
import { CheckRuns } from '../../src/github/checks.js';
import { RepoScope } from '../../src/github/requests.js';
import { shown } from './fake-github.js';
import { CONFIG, Harness } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
/** GitHub's most characters in an issue comment's body. */
const BODY_MAX = 65_536;

/** The result of an episode of the run. */
const resultOf = (h: Harness, id: string) =>
  h
    .state(RUN)
    .rounds.flatMap((r) => r.episodes)
    .find((e) => e.id === id)?.result;

/** Many small files in many folders: a data set, a vendored tree. */
const manyFiles = (folder: string, count: number) =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`${folder}/${i % 10}/f${i}.txt`, 'x']));

describe("a tree past GitHub's listing (100,000 entries; 40 here)", () => {
  it('a result with many files keeps its score: its protected paths are listed folder by folder', async () => {
    const h = await new Harness().load();
    h.gh.treeListingMax = 40;
    await h.label(7);
    const state = h.state(RUN);
    const [first, ...others] = h.openEpisodes(RUN);
    if (!first) throw new Error('no episode dispatched');
    expect(h.pushResult(state, first, 7, first.allowance, { files: manyFiles('data', 100) })).toBe(true);
    for (const e of others) h.pushResult(state, e, 1);
    for (const e of [first, ...others]) await h.jobCompleted(RUN, e.id);
    expect(resultOf(h, first.id)).toMatchObject({ score: 7 });
    // Only the folders a protected glob may reach are listed (the 10 of data/ are not).
    expect(h.gh.log.filter((l) => l.startsWith('GET /repos/octo-org/octo-repo/git/trees/')).length).toBeLessThan(20);
  });

  it('a run on such a repository still refuses a pushed result that rewrote the grader', async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': CONFIG,
      'grade.mjs': 'x',
      ...manyFiles('vendor', 100),
    }).load();
    h.gh.treeListingMax = 40;
    await h.label(7);
    expect(h.runFiles(RUN)?.protectedDigest).toEqual(expect.any(String));
    const state = h.state(RUN);
    const [first, ...others] = h.openEpisodes(RUN);
    if (!first) throw new Error('no episode dispatched');
    // A push with a leaked token: a high score, and the grader rewritten to give it.
    h.pushResult(state, first, 1000, first.allowance, { files: { 'grade.mjs': 'console.log(1000)' } });
    for (const e of others) h.pushResult(state, e, 1);
    for (const e of [first, ...others]) await h.jobCompleted(RUN, e.id);
    expect(resultOf(h, first.id)).toMatchObject({ score: null });
    expect(resultOf(h, first.id)?.reason).toMatch(/changes protected paths/);
  });

  it('a run whose protected globs reach into more of it than can be listed one by one does not start, and says why', async () => {
    const h = await new Harness({
      '.github/autoresearch.yml': CONFIG.replace('protected: [grade.mjs]', 'protected: ["**/*.mjs"]'),
      'grade.mjs': 'x',
      ...manyFiles('vendor', 100),
    }).load();
    h.gh.treeListingMax = 5;
    await h.label(7);
    expect(h.gh.dispatches).toEqual([]);
    expect(h.gh.comments.map((c) => shown(c.body)).join('\n')).toContain(
      "`main`'s tree is too large for GitHub to list whole, and `grader.protected` (with `.github/workflows/**`) reaches into too many of its folders",
    );
  });
});

describe('a refused start with a great many problems', () => {
  it("says why on the issue within GitHub's 65,536 characters: the first 20, and how many more", async () => {
    const h = await new Harness().load();
    // The task written on the start command's line: 900 words that are no override.
    const words = Array.from({ length: 900 }, (_, i) => `word${i}`).join(' ');
    h.gh.labels.set(7, new Set(['autoresearch']));
    await h.send('issues', 'labeled', (p) => {
      p.issue.number = 7;
      p.issue.title = 'Pack it tighter';
      p.issue.body = `/autoresearch start ${words}`;
      delete p.issue.pull_request;
      p.label.name = 'autoresearch';
      p.sender.login = 'maintainer';
      p.sender.type = 'User';
    });
    const said = h.gh.comments.filter((c) => c.issue === 7).map((c) => shown(c.body));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/^forkflush did not start: the overrides in the issue's text are not valid/);
    expect(said[0]).toContain('- and 880 more');
    expect(said[0]?.length).toBeLessThanOrEqual(BODY_MAX);
  });
});

describe("a check run past GitHub's first page", () => {
  it('is found among more check runs of its name on the commit than one page (30) holds', async () => {
    // Every run started from one commit of the default branch has its `forkflush r0.b0` check there.
    const all = Array.from({ length: 40 }, (_, i) => ({
      id: 1000 + i,
      name: 'forkflush r0.b0',
      external_id: `issue-${i + 1}/r0.b0`,
    })).reverse(); // newest first, as GitHub lists them
    // GitHub's "List check runs for a Git reference": 30 per page by default, 100 at most, then `page`.
    const listForRef = async (q: Record<string, unknown>) => {
      const per = Math.min(Number(q.per_page ?? 30), 100);
      const page = Number(q.page ?? 1);
      return { data: { total_count: all.length, check_runs: all.slice((page - 1) * per, page * per) } };
    };
    const octokit = {
      rest: { checks: { listForRef } },
      paginate: async (fn: typeof listForRef, q: Record<string, unknown>) => {
        const out: unknown[] = [];
        for (let page = 1; ; page++) {
          const { data } = await fn({ ...q, page });
          out.push(...data.check_runs);
          if (data.check_runs.length < Math.min(Number(q.per_page ?? 30), 100)) return out;
        }
      },
    };
    const checks = new CheckRuns(new RepoScope(octokit as never, 'octo-org', 'octo-repo'));
    expect(await checks.find('a'.repeat(40), 'forkflush r0.b0', 'issue-1/r0.b0')).toBe(1000);
  });
});
