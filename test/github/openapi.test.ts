// The OpenAPI check of the fake GitHub: the committed subset of GitHub's description is current
// and covers every call forkflush makes, and the validator does reject what GitHub would not take
// or give, in the validator itself and through the fake.
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ProbotOctokit } from 'probot';
import { afterEach, describe, expect, it } from 'vitest';
import { GitHubApi } from '../../src/github/api.js';
import { assertNoOpenApiViolations } from './fake-github.js';
import { closeHarnesses, Harness, TEST_TOKEN, TestOctokit } from './harness.js';
import subset from './openapi/github-subset.json' with { type: 'json' };
import { findRoute, validateExchange } from './openapi/validate.js';

const ROOT = join(import.meta.dirname, '../..');
const paths = subset.paths as unknown as Record<string, Record<string, { operationId: string }>>;
/** Operations forkflush's code does not call itself: Probot asks for an installation token. */
const CALLED_BY_PROBOT = ['apps/create-installation-access-token'];

/** An Octokit with the plugins as Probot ships them (timings shortened: harness.ts). */
function octokit(baseUrl?: string): InstanceType<typeof ProbotOctokit> {
  return new TestOctokit({ auth: { token: TEST_TOKEN }, ...(baseUrl ? { baseUrl } : {}) });
}

/** Every `<octokit>.rest.<namespace>.<method>` in src/, as "namespace.method". */
async function restCalls(): Promise<Map<string, string[]>> {
  const calls = new Map<string, string[]>();
  const files = (await readdir(join(ROOT, 'src'), { recursive: true })).filter((f) => f.endsWith('.ts'));
  for (const file of files) {
    const text = await readFile(join(ROOT, 'src', file), 'utf8');
    for (const m of text.matchAll(/\.rest\.(\w+)\.(\w+)\b/g)) {
      const name = `${m[1]}.${m[2]}`;
      calls.set(name, [...new Set([...(calls.get(name) ?? []), `src/${file}`])]);
    }
  }
  return calls;
}

describe('the subset of GitHub’s OpenAPI description', () => {
  it('is what scripts/extract-openapi.mjs makes from @octokit/openapi now', async (ctx) => {
    try {
      createRequire(import.meta.url).resolve('@octokit/openapi/generated/api.github.com.json');
    } catch {
      ctx.skip('@octokit/openapi is not installed: cannot compare github-subset.json with a fresh extraction');
    }
    const run = promisify(execFile);
    const { stdout } = await run(process.execPath, ['scripts/extract-openapi.mjs', '--check'], { cwd: ROOT }).catch(
      (e: { stderr?: string; message: string }) => {
        throw new Error(e.stderr || e.message);
      },
    );
    expect(stdout).toMatch(/is current/);
  });

  it('holds every operation forkflush calls, and no other', async () => {
    const calls = await restCalls();
    expect(calls.has('git.getRef')).toBe(true); // the scan finds api.ts's calls
    const o = octokit() as any;
    const called = new Set<string>();
    for (const [name, files] of calls) {
      const [ns, method] = name.split('.') as [string, string];
      const endpoint = o.rest[ns]?.[method]?.endpoint?.DEFAULTS as { method: string; url: string } | undefined;
      expect(endpoint, `${name} (${files.join(', ')}) is not an octokit REST method`).toBeDefined();
      const op = paths[endpoint?.url ?? '']?.[endpoint?.method.toLowerCase() ?? ''];
      expect(
        op,
        `${name} (${endpoint?.method} ${endpoint?.url}, called in ${files.join(', ')}) is not in github-subset.json: add its operation id to OPERATIONS in scripts/extract-openapi.mjs and run it`,
      ).toBeDefined();
      if (op) called.add(op.operationId);
    }
    const all = Object.values(paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
    expect(all.filter((id) => !called.has(id) && !CALLED_BY_PROBOT.includes(id)).sort()).toEqual([]);
  });
});

const REF = {
  ref: 'refs/heads/main',
  node_id: 'REF_kwDOAJy2KbFyZWZzL2hlYWRzL21haW4',
  url: 'https://api.github.com/repos/o/r/git/refs/heads/main',
  object: {
    type: 'commit',
    sha: 'aa218f56b14c9653891f9e74264a383fa43fefbd',
    url: 'https://api.github.com/repos/o/r/git/commits/aa218f56b14c9653891f9e74264a383fa43fefbd',
  },
};

describe('the validator', () => {
  it('accepts a request and response as GitHub takes and gives them', () => {
    const x = { method: 'POST', path: '/repos/o/r/git/refs', body: { ref: REF.ref, sha: REF.object.sha } };
    expect(validateExchange({ ...x, status: 201, responseBody: REF })).toEqual([]);
    expect(
      validateExchange({
        ...x,
        status: 422,
        responseBody: { message: 'Reference already exists', documentation_url: 'https://docs.github.com/rest' },
      }),
    ).toEqual([]);
  });

  it('rejects a request without a required field', () => {
    const violations = validateExchange({
      method: 'POST',
      path: '/repos/o/r/git/refs',
      body: { ref: 'refs/heads/x' },
      status: 201,
      responseBody: REF,
    });
    expect(violations.map((v) => v.message)).toEqual([
      "git/create-ref (POST /repos/{owner}/{repo}/git/refs): request body: must have required property 'sha'",
    ]);
    expect(violations[0]).toMatchObject({ operation: 'git/create-ref', where: 'request body' });
  });

  it('rejects request fields of the wrong type, outside an enum, or not in the operation', () => {
    const update = (body: unknown) =>
      validateExchange({
        method: 'PATCH',
        path: '/repos/o/r/git/refs/heads%2Fmain',
        body,
        status: 200,
        responseBody: REF,
      });
    expect(update({ sha: REF.object.sha, force: 'yes' }).map((v) => `${v.where}: ${v.what}`)).toEqual([
      'request body/force: must be boolean',
    ]);
    expect(
      validateExchange({
        method: 'PATCH',
        path: '/repos/o/r/pulls/12',
        body: { status: 'closed' },
        status: 200,
        responseBody: {},
      })
        .filter((v) => v.where.startsWith('request'))
        .map((v) => `${v.where}: ${v.what}`),
    ).toEqual(['request body: has "status", which the operation does not list']);
    const list = validateExchange({
      method: 'GET',
      path: '/repos/o/r/pulls',
      query: { state: 'opened', heads: 'o:x' },
      status: 200,
      responseBody: [],
    });
    expect(list.map((v) => `${v.where}: ${v.what}`)).toEqual([
      'query parameter state: must be equal to one of the allowed values ("open", "closed", "all")',
      'query parameter heads: is not a parameter of the operation',
    ]);
    expect(
      validateExchange({
        method: 'POST',
        path: '/repos/o/r/issues/seven/comments',
        body: { body: 'hi' },
        status: 404,
        responseBody: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' },
      }),
    ).toMatchObject([{ where: 'path parameter issue_number', what: 'must be integer' }]);
  });

  it('rejects a response without the fields GitHub always gives, or with a wrong type', () => {
    const violations = validateExchange({
      method: 'GET',
      path: '/repos/o/r/git/ref/heads/main',
      status: 200,
      responseBody: { ref: 'refs/heads/main', node_id: 7, object: { sha: REF.object.sha } },
    });
    expect(violations.map((v) => `${v.where}: ${v.what}`)).toEqual([
      "response 200 body: must have required property 'url'",
      'response 200 body/node_id: must be string',
      "response 200 body/object: must have required property 'type'",
      "response 200 body/object: must have required property 'url'",
    ]);
    expect(violations[0]?.message).toBe(
      "git/get-ref (GET /repos/{owner}/{repo}/git/ref/{ref}): response 200 body: must have required property 'url'",
    );
  });

  it('takes null only where GitHub may give it', () => {
    const comment = (body: unknown) =>
      validateExchange({
        method: 'GET',
        path: '/repos/o/r/contents/state.json',
        status: 200,
        responseBody: {
          type: 'file',
          encoding: 'base64',
          size: 2,
          name: 'state.json',
          path: 'state.json',
          content: 'e30=\n',
          sha: 'aa218f56b14c9653891f9e74264a383fa43fefbd',
          url: 'https://api.github.com/repos/o/r/contents/state.json',
          git_url: null,
          html_url: null,
          download_url: body,
          _links: { self: 'https://api.github.com/repos/o/r/contents/state.json', git: null, html: null },
        },
      });
    expect(comment(null)).toEqual([]);
    expect(comment('https://raw.githubusercontent.com/o/r/main/state.json')).toEqual([]);
    expect(comment(3).map((v) => `${v.where}: ${v.what}`)).toContain(
      'response 200 body/download_url: must be string or null',
    );
  });

  it('rejects a status the operation does not answer with, but lets any 5xx and error bodies through', () => {
    const get = (status: number, responseBody?: unknown) =>
      validateExchange({ method: 'GET', path: '/repos/o/r/git/ref/heads/main', status, responseBody });
    expect(get(201, REF).map((v) => v.what)).toEqual([
      'the status is not one the operation answers with (200, 404, 409)',
    ]);
    expect(get(502, 'Bad Gateway')).toEqual([]);
    expect(get(401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' })).toEqual([]);
    expect(
      validateExchange({ method: 'DELETE', path: '/repos/o/r/git/refs/heads/x', status: 204, responseBody: { ok: 1 } }),
    ).toMatchObject([{ where: 'response 204 body', what: 'the operation answers this status without one' }]);
  });

  it('finds the operation of a ref sent with slashes or with %2F, and says so when there is none', () => {
    for (const path of [
      '/repos/o/r/git/ref/heads/forkflush/issue-7/best',
      '/repos/o/r/git/ref/heads%2Fforkflush%2Fissue-7%2Fbest',
    ]) {
      expect(findRoute('GET', path)).toMatchObject({
        operationId: 'git/get-ref',
        params: { owner: 'o', repo: 'r', ref: 'heads/forkflush/issue-7/best' },
      });
    }
    expect(findRoute('PATCH', '/repos/o/r/issues/comments/12')?.operationId).toBe('issues/update-comment');
    expect(findRoute('POST', '/repos/o/r/issues/12/comments')?.operationId).toBe('issues/create-comment');
    expect(findRoute('GET', '/repos/o/r')?.operationId).toBe('repos/get');
    expect(
      validateExchange({ method: 'GET', path: '/repos/o/r/branches', status: 200, responseBody: [] }),
    ).toMatchObject([{ operation: 'unknown', where: 'path', what: 'no operation of github-subset.json matches' }]);
  });
});

describe('the fake GitHub checks every exchange', () => {
  afterEach(closeHarnesses);

  /** The box with a README, and an Octokit for it. */
  async function github() {
    const h = await new Harness({ 'README.md': 'hi\n' }).startGitHub();
    return { gh: h.gh, o: octokit(h.box.apiUrl) };
  }

  it('answers a request GitHub would refuse with a 599 that names the violation, and records it', async () => {
    const { gh, o } = await github();
    await expect(
      o.rest.git.createRef({ owner: gh.owner, repo: gh.repo, ref: 'refs/heads/x' } as never),
    ).rejects.toMatchObject({
      status: 599,
      message: expect.stringContaining(
        "OpenAPI violation: git/create-ref (POST /repos/{owner}/{repo}/git/refs): request body: must have required property 'sha'",
      ),
    });
    expect(gh.refs.has('refs/heads/x')).toBe(false);
    expect(gh.violations.map((v) => v.operation)).toEqual(['git/create-ref']);
    expect(() => gh.assertNoViolations()).toThrow(
      /1 violation\(s\) of GitHub's OpenAPI description:\n- git\/create-ref/,
    );
    // Every fake made since the last call is checked, so one afterEach covers a test file.
    expect(() => assertNoOpenApiViolations()).toThrow(/git\/create-ref/);
    expect(() => assertNoOpenApiViolations()).not.toThrow();
  });

  it('dispatches a workflow into a run with its matrix jobs, and says which run when asked', async () => {
    const h = await new Harness().startGitHub();
    const o = octokit(h.box.apiUrl);
    const w = { owner: h.gh.owner, repo: h.gh.repo, workflow_id: 'forkflush.yml' };
    const r = { ...w, ref: 'main' };
    const inputs = { run: 'issue-9', round: '2', episodes: '["r2.b0","r2.b1"]' };
    const plain = await o.rest.actions.createWorkflowDispatch({ ...r, inputs });
    expect(plain.status).toBe(204);
    const detailed = await o.rest.actions.createWorkflowDispatch({ ...r, inputs, return_run_details: true } as never);
    const [first, second] = h.box.actions.runs;
    expect(detailed.data).toEqual({
      workflow_run_id: second?.id,
      run_url: `https://api.github.com/repos/${h.gh.owner}/${h.gh.repo}/actions/runs/${second?.id}`,
      html_url: `https://github.com/${h.gh.owner}/${h.gh.repo}/actions/runs/${second?.id}`,
    });
    expect(first?.jobs.map((j) => [j.name, j.status])).toEqual([
      ['forkflush issue-9 r2.b0', 'queued'],
      ['forkflush issue-9 r2.b1', 'queued'],
    ]);
    const listed = await o.rest.actions.listWorkflowRuns({ ...w, status: 'queued' });
    expect(listed.data.workflow_runs.map((w) => w.display_title)).toEqual([
      'forkflush issue-9 round 2',
      'forkflush issue-9 round 2',
    ]);
    // GitHub refuses inputs the workflow does not declare, and a workflow that is not there.
    await expect(o.rest.actions.createWorkflowDispatch({ ...r, inputs: { run: 'x' } })).rejects.toMatchObject({
      status: 422,
    });
    await expect(
      o.rest.actions.createWorkflowDispatch({ ...r, workflow_id: 'missing.yml', inputs }),
    ).rejects.toMatchObject({ status: 404 });
    assertNoOpenApiViolations();
  });

  it('a branch the api must move is moved or the call fails: a refused update is never taken as done', async () => {
    const { gh, o } = await github();
    const api = new GitHubApi(o, gh.owner, gh.repo);
    const main = gh.branch('main') as string;
    const next = gh.commit({ message: 'next', parents: [main], files: { 'README.md': 'next\n' } });
    await api.setRef('refs/heads/best', main); // created
    gh.failNext = { method: 'PATCH', path: /heads%2Fbest$/, status: 422 };
    await expect(api.setRef('refs/heads/best', next)).rejects.toThrow(/best could not be moved/);
    expect(gh.branch('best')).toBe(main);
    await api.setRef('refs/heads/best', next);
    expect(gh.branch('best')).toBe(next);
    // Creating a branch: 422 is "already exists" only if it does exist.
    gh.failNext = { method: 'POST', path: /\/git\/refs$/, status: 422 };
    await expect(api.createRef('refs/heads/feature/b', main)).rejects.toMatchObject({ status: 422 });
    expect(gh.branch('feature/b')).toBeUndefined();
  });

  it('takes a refused pull request for "nothing to propose" only when GitHub says so', async () => {
    const { gh, o } = await github();
    const api = new GitHubApi(o, gh.owner, gh.repo);
    const main = gh.branch('main') as string;
    await api.createRef(
      'refs/heads/feature/a',
      gh.commit({ message: 'work', parents: [main], files: { 'README.md': 'x\n' } }),
    );
    // A body GitHub refuses, and a refusal of any other kind: failures, never "no pull request".
    await expect(api.pulls.open('feature/a', 'main', 'A', 'é'.repeat(65_537))).rejects.toMatchObject({
      status: 422,
      message: expect.stringContaining('body is too long (maximum is 65536 characters)'),
    });
    gh.failNext = { method: 'POST', path: /\/pulls$/, status: 422 };
    await expect(api.pulls.open('feature/a', 'main', 'A', 'body')).rejects.toMatchObject({ status: 422 });
    expect(gh.pulls).toEqual([]);
    // One made meanwhile (after the api looked, before it asked): GitHub refuses a second, and it is found.
    gh.inject = (method) => {
      if (method === 'POST' && gh.pulls.length === 0)
        gh.pulls.push({ number: 41, head: 'feature/a', base: 'main', title: 'A', body: '', state: 'open' });
      return null;
    };
    expect(await api.pulls.open('feature/a', 'main', 'A', 'body')).toBe(41);
    // Nothing to propose, and a head that is gone: null.
    gh.inject = null;
    await api.createRef('refs/heads/feature/b', main);
    expect(await api.pulls.open('feature/b', 'main', 'B', 'body')).toBeNull();
    expect(await api.pulls.open('feature/gone', 'main', 'C', 'body')).toBeNull();
    assertNoOpenApiViolations();
  });

  it("reads a file over 1 MB (a long run's state.json): the raw media type has it, the JSON form has not", async () => {
    const { gh, o } = await github();
    const api = new GitHubApi(o, gh.owner, gh.repo);
    const big = `${'{"a":"日本"}\n'.repeat(150_000)}`;
    const sha = gh.commit({ message: 'big', parents: [gh.branch('main') as string], files: { 'state.json': big } });
    expect(await api.readFile('state.json', sha)).toBe(big);
    const { data } = await o.rest.repos.getContent({ owner: gh.owner, repo: gh.repo, path: 'state.json', ref: sha });
    expect(data).toMatchObject({ type: 'file', encoding: 'none', content: '', size: Buffer.byteLength(big) });
    assertNoOpenApiViolations();
  });

  it("gives GitHub's shapes: the api's calls pass unchanged", async () => {
    const { gh, o } = await github();
    const api = new GitHubApi(o, gh.owner, gh.repo);
    const main = gh.branch('main') as string;
    expect(await api.repository()).toEqual({ defaultBranch: 'main', private: false });
    expect(await api.readFile('README.md', 'main')).toBe('hi\n');
    expect(await api.readFile('missing.md', 'main')).toBeNull();
    await api.createRef('refs/heads/feature/a', main);
    expect(await api.refSha('refs/heads/feature/a')).toBe(main);
    expect(await api.refHeads('refs/heads/feature/')).toEqual(new Map([['refs/heads/feature/a', main]]));
    // No commits between the branches: GitHub refuses the pull request, and there is none to find.
    expect(await api.pulls.open('feature/a', 'main', 'A', 'body')).toBeNull();
    const work = gh.commit({ message: 'work', parents: [main], files: { 'README.md': 'more\n' } });
    expect(await api.fastForward('refs/heads/feature/a', work)).toBe('moved');
    const pr = await api.pulls.open('feature/a', 'main', 'A', 'body');
    expect(pr).toBeGreaterThan(0);
    expect(await api.pulls.open('feature/a', 'main', 'A', 'body')).toBe(pr); // found, not made twice
    // main taking the branch's commit merges the pull request, as on GitHub.
    expect(await api.fastForward('refs/heads/main', work)).toBe('moved');
    expect(gh.pulls.find((p) => p.number === pr)).toMatchObject({ state: 'closed', merged: true });
    await api.deleteRef('refs/heads/feature/a');
    await api.issues.removeLabel(7, 'absent');
    assertNoOpenApiViolations();
  });
});
