// The REST API of the fake GitHub (served over HTTP by box.ts): a stateful fake of the endpoints
// forkflush calls, over a real git repository (git-store.ts). Its rules are the ones forkflush relies on: a ref update without force must be a fast-forward, a ref or pull
// request that exists is a 422, a missing one a 404. Its shapes are GitHub's: every request and
// every response is checked against GitHub's OpenAPI description (openapi/validate.ts), and one
// that breaks it is answered with a 599 naming the violation, so the app's call fails loudly.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { AppAuth } from './app-auth.js';
import type { FakeActions, FakeRun } from './fake-actions.js';
import { type FakeCommit, GitStore } from './git-store.js';
import { checkRequest, checkResponse, type Violation, violation } from './openapi/validate.js';

export type { FakeCommit } from './git-store.js';

export interface FakePull {
  number: number;
  head: string;
  base: string;
  title: string;
  body: string;
  state: 'open' | 'closed';
  /** Closed by GitHub because its base branch came to contain its head. */
  merged?: boolean;
  draft?: boolean;
  /** How many times it was edited (title, body, state). */
  edits?: number;
}

const API = 'https://api.github.com';
const WEB = 'https://github.com';
/** When every object the fake makes was created and last updated: GitHub always says. */
const WHEN = '2026-11-30T12:00:00Z';
/** GitHub's timestamps: whole seconds, in UTC. */
const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
/** A GitHub global node id (opaque to clients), stable for the same kind and key. */
const nodeId = (kind: string, key: string | number) =>
  `${kind}_kwDO${createHash('sha1').update(`${kind}:${key}`).digest('base64url').slice(0, 12)}`;
/** A git blob's object id, as git computes it. */
const blobSha = (content: string) => sha1(`blob ${Buffer.byteLength(content)}\0${content}`);

/** GitHub's error body. */
/** A comment's text as GitHub shows it: its hidden lines (HTML comments, such as forkflush's answer markers) left out. */
export function shown(body: string): string {
  return body.replace(/\s*<!--[\s\S]*?-->/g, '').trimEnd();
}

function error(status: number, message: string) {
  return { message, documentation_url: 'https://docs.github.com/rest', status: String(status) };
}

/** GitHub's 422 for a request it read and refused: "Validation Failed", and why in `errors`. */
function validationFailed(...errors: { resource: string; code: string; field?: string; message?: string }[]) {
  return { ...error(422, 'Validation Failed'), errors };
}

/** GitHub's most characters (code points) in an issue, pull request or comment body. */
const BODY_MAX = 65_536;
/** GitHub's most bytes in a check run's output summary or text (github/docs#35252). */
const CHECK_OUTPUT_MAX_BYTES = 65_535;
/** Past 1 MB the contents API's JSON form has no content (the raw media type still has it). */
const CONTENT_JSON_MAX = 1024 * 1024;

/** A body GitHub answers as it is, not as JSON: a file's bytes under the raw media type. */
export class RawBody {
  constructor(
    readonly text: string,
    readonly contentType: string,
  ) {}
}

/** GitHub's refusal of a check run's output over its size (it counts bytes, though its docs say characters), or null. */
function checkOutputRefusal(body: any) {
  for (const field of ['summary', 'text'] as const) {
    const value = body.output?.[field];
    if (typeof value === 'string' && Buffer.byteLength(value) > CHECK_OUTPUT_MAX_BYTES) {
      const message = `${field} exceeds a maximum bytesize of ${CHECK_OUTPUT_MAX_BYTES}`;
      return validationFailed({ resource: 'CheckRun', code: 'custom', field, message });
    }
  }
  return null;
}

/** The body-too-long refusal of an issue, a pull request (resource Issue) or a comment, or null. */
function tooLong(resource: 'Issue' | 'IssueComment', body: unknown) {
  if (typeof body !== 'string' || [...body].length <= BODY_MAX) return null;
  const message = `body is too long (maximum is ${BODY_MAX} characters)`;
  return validationFailed({ resource, code: 'custom', field: 'body', message });
}

/** A user or organization as GitHub embeds one (`simple-user`). */
function user(login: string, id: number, type: 'User' | 'Organization' | 'Bot' = 'User') {
  const url = `${API}/users/${encodeURIComponent(login)}`;
  return {
    login,
    id,
    node_id: nodeId(type === 'Organization' ? 'O' : type === 'Bot' ? 'BOT' : 'U', id),
    avatar_url: `https://avatars.githubusercontent.com/u/${id}?v=4`,
    gravatar_id: '',
    url,
    html_url: `${WEB}/${encodeURIComponent(login)}`,
    followers_url: `${url}/followers`,
    following_url: `${url}/following{/other_user}`,
    gists_url: `${url}/gists{/gist_id}`,
    starred_url: `${url}/starred{/owner}{/repo}`,
    subscriptions_url: `${url}/subscriptions`,
    organizations_url: `${url}/orgs`,
    repos_url: `${url}/repos`,
    events_url: `${url}/events{/privacy}`,
    received_events_url: `${url}/received_events`,
    type,
    user_view_type: 'public',
    site_admin: false,
  };
}

/** The app as its manifest (app.yml) registers it: what installations grant it and send it. */
const APP = (() => {
  const manifest = parse(readFileSync(join(import.meta.dirname, '../../app.yml'), 'utf8'));
  return {
    permissions: manifest.default_permissions as Record<string, string>,
    events: manifest.default_events as string[],
  };
})();

/** The app's bot: the author of what forkflush writes with an installation token. */
const BOT = user('forkflush[bot]', 41898282, 'Bot');
/** The repository's id, which a rename keeps (the app keys its records' seal to it). */
export const FAKE_REPOSITORY_ID = 1296269;
const BOT_IDENTITY = { name: 'forkflush[bot]', email: '41898282+forkflush[bot]@users.noreply.github.com', date: WHEN };

/** The fakes made since the last assertNoOpenApiViolations(). */
const mounted = new Set<FakeGitHub>();

/**
 * Throws if a fake GitHub made since the last call saw a request or response that breaks
 * GitHub's OpenAPI description (each was also answered with a 599); for a test file's afterEach.
 */
export function assertNoOpenApiViolations(): void {
  const fakes = [...mounted];
  mounted.clear();
  for (const fake of fakes) fake.assertNoViolations();
}

/** A route's answer to a request: its path's match, the JSON body, the query, the Accept header. */
type Handler = (m: RegExpExecArray, body: any, query: URLSearchParams, accept: string) => [number, unknown?];

export interface Reply {
  /** 0 with `reset`: no answer at all. */
  status: number;
  /** JSON, or a RawBody sent as it is. */
  body?: unknown;
  headers?: Record<string, string>;
  /** The connection is reset instead of answered (the client sees ECONNRESET). */
  reset?: true;
}

/** What `inject` asks for in place of an HTTP status: the connection is reset, no answer is sent. */
export const RESET = 0;

export class FakeGitHub {
  readonly owner: string;
  readonly repo: string;
  /** The repository's objects and refs (a real bare repository). */
  readonly store: GitStore;
  /** Every commit, by id (commits pushed over git are read on first use). */
  readonly commits: { get(sha: string): FakeCommit | undefined; values(): IterableIterator<FakeCommit> };
  readonly refs: Map<string, string>;
  readonly pulls: FakePull[] = [];
  readonly comments: {
    id: number;
    issue: number;
    body: string;
    edits: number;
    createdAt: string;
    updatedAt: string;
    /** Someone else's comment (a person's, another app's), put here by a test; else the app's. */
    author?: { login: string; id: number; type: 'User' | 'Bot' };
  }[] = [];
  readonly checkRuns: {
    id: number;
    head_sha: string;
    name: string;
    status: string;
    conclusion: string | null;
    output: { title: string; summary?: string };
    /** The body that created it, and its updates since, for its shape when listed. */
    request: any;
    /** How many times it was updated. */
    updates: number;
  }[] = [];
  /** Issues a test made, with their state (an issue GitHub knows by its comments or labels is open). */
  readonly issues = new Map<number, { state: 'open' | 'closed' }>();
  /** Comments people wrote (the tests' deliveries), which the app may react to. */
  readonly personComments = new Map<number, { id: number; issue: number; body: string }>();
  readonly reactions: { id: number; comment: number; content: string }[] = [];
  /** Workflows enabled or disabled through the API, in order ("enable autoresearch-tick.yml"). */
  readonly workflowToggles: string[] = [];
  readonly workflowStates = new Map<string, 'active' | 'disabled_manually'>();
  readonly dispatches: { workflow: string; ref: string; inputs: Record<string, string> }[] = [];
  /** Issues an admin deleted (deleteIssue): GitHub answers 410 for each, its comments are gone. */
  readonly deletedIssues = new Set<number>();
  /** Issues moved to another repository (transferIssue): the issue each became there. */
  readonly transferredIssues = new Map<number, { repository: string; id: number; number: number }>();
  /** The repository's default branch (renameDefaultBranch moves it as GitHub's settings do). */
  defaultBranch = 'main';
  readonly labels = new Map<number, Set<string>>();
  readonly log: string[] = [];
  /** Requests and responses that broke GitHub's OpenAPI description; each was answered with a 599. */
  readonly violations: Violation[] = [];
  /** Whether requests and responses are checked against GitHub's OpenAPI description. */
  validate = true;
  /** When set, every request must carry a credential it accepts: a JWT for /app, a token otherwise. */
  auth: AppAuth | null = null;
  /** When set, a workflow dispatch starts a workflow run with its jobs here. */
  actions: FakeActions | null = null;
  /** Called after a request changed what GitHub sends the app a webhook for (the box sends it). */
  onEvent: ((event: string, action: string, subject: any) => void) | null = null;
  permissions: Record<string, string> = {};
  /** Fails the next matching request once with this status (e.g. a ref update, to simulate a race). */
  failNext: { method: string; path: RegExp; status: number } | null = null;
  /**
   * Fault injection: asked before each valid request is answered; a status fails that request with
   * GitHub's error body (a 403 or 429 is a secondary rate limit, with `retry-after`), RESET resets
   * the connection instead of answering, null answers it. `{ status, applied: true }` fails it
   * after GitHub did what it asked (the answer was lost).
   */
  inject: ((method: string, path: string) => number | { status: number; applied: true } | null) | null = null;
  /**
   * A permission the app lost (an owner edited the installation): true refuses a request as GitHub
   * refuses one the installation's permissions do not cover.
   */
  denied: ((method: string, path: string) => boolean) | null = null;
  /** The requests `inject` failed, in order. */
  readonly injected: { method: string; path: string; status: number }[] = [];
  private nextId = 100;
  /** Each pull request's head and base commits, as last seen while their branches existed. */
  private readonly pullShas = new Map<number, { head: string; base: string }>();

  constructor(files: Record<string, string>, where: { owner?: string; repo?: string } = {}) {
    this.owner = where.owner ?? 'octo-org';
    this.repo = where.repo ?? 'octo-repo';
    this.store = GitStore.temp(this.owner, this.repo);
    this.refs = this.store.refs;
    this.commits = { get: (sha) => this.store.get(sha), values: () => this.store.commits.values() };
    mounted.add(this);
    const root = this.commit({ message: 'initial', parents: [], files });
    this.refs.set('refs/heads/main', root);
  }

  commit(c: Omit<FakeCommit, 'sha' | 'tree'>): string {
    return this.store.commit(c);
  }

  isAncestor(a: string, b: string): boolean {
    return this.store.isAncestor(a, b);
  }

  /**
   * What GitHub does to open pull requests when branches move (through the API or a push): one
   * whose base now contains its head is merged, one whose head branch is gone is closed.
   */
  branchesMoved(): void {
    for (const pr of this.pulls.filter((p) => p.state === 'open')) {
      const head = this.branch(pr.head);
      const base = this.branch(pr.base);
      if (head && base && !this.isAncestor(head, base)) continue;
      if (head && !base) continue;
      pr.state = 'closed';
      pr.merged = head !== undefined;
      this.onEvent?.('pull_request', 'closed', pr);
    }
  }

  branch(name: string): string | undefined {
    return this.refs.get(`refs/heads/${name}`);
  }

  /** Throws, listing them, if any request or response broke GitHub's OpenAPI description. */
  assertNoViolations(): void {
    if (this.violations.length === 0) return;
    const list = this.violations.map((v) => `- ${v.message}`).join('\n');
    throw new Error(`${this.violations.length} violation(s) of GitHub's OpenAPI description:\n${list}`);
  }

  /** Records violations and answers with them, so that the app's call throws with the reason. */
  private reject(violations: Violation[]): Reply {
    this.violations.push(...violations);
    const message = `OpenAPI violation: ${violations.map((v) => v.message).join('; ')}`;
    return { status: 599, body: { message, documentation_url: 'test/github/openapi/validate.ts' } };
  }

  /** A failure `inject` asked for, as GitHub answers it. */
  private injectedReply(method: string, path: string, status: number): Reply {
    this.injected.push({ method, path, status });
    if (status === RESET) return { status, reset: true };
    if (status === 403 || status === 429) {
      // GitHub's secondary rate limit, with either status.
      const message = 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.';
      return { status, body: error(status, message), headers: { 'retry-after': '60' } };
    }
    return { status, body: error(status, 'injected failure') };
  }

  // GitHub's shapes: every field its OpenAPI description requires, with the values GitHub gives.

  private get repoUrl(): string {
    return `${API}/repos/${this.owner}/${this.repo}`;
  }

  private get htmlUrl(): string {
    return `${WEB}/${this.owner}/${this.repo}`;
  }

  /** An admin deletes an issue: its comments and labels go with it, and GitHub answers 410 Gone for it. */
  deleteIssue(issue: number): void {
    this.deletedIssues.add(issue);
    this.issues.delete(issue);
    this.labels.delete(issue);
    for (let i = this.comments.length - 1; i >= 0; i--)
      if (this.comments[i]?.issue === issue) this.comments.splice(i, 1);
  }

  /**
   * A person moves an issue to another repository (`owner/name`), where it becomes issue `number`:
   * its comments go with it. GitHub answers 301 for it here, to the issue it became, which this
   * installation can read; writes to it here answer 404.
   */
  transferIssue(issue: number, to: { repository: string; number: number }): void {
    this.transferredIssues.set(issue, { ...to, id: FAKE_REPOSITORY_ID + 1 });
    for (let i = this.comments.length - 1; i >= 0; i--)
      if (this.comments[i]?.issue === issue) this.comments.splice(i, 1);
  }

  /** The answer for a moved issue (transferIssue), here or where it went; null for any other request. */
  private movedIssue(method: string, path: string): Reply | null {
    const there = /^\/repositories\/(\d+)\/issues\/(\d+)(\/.*)?$/.exec(path);
    if (there) {
      const [from, to] =
        [...this.transferredIssues].find(([, t]) => t.id === Number(there[1]) && t.number === Number(there[2])) ?? [];
      if (from === undefined || !to || method !== 'GET') return { status: 404, body: error(404, 'Not Found') };
      if (there[3] === '/comments') return { status: 200, body: [] };
      if (there[3]) return { status: 404, body: error(404, 'Not Found') };
      const url = `${API}/repos/${to.repository}`;
      const issue = { ...this.issue(from), number: to.number, repository_url: url, url: `${url}/issues/${to.number}` };
      return { status: 200, body: { ...issue, html_url: `${WEB}/${to.repository}/issues/${to.number}` } };
    }
    const here = /^\/repos\/[^/]+\/[^/]+\/issues\/(\d+)(\/.*)?$/.exec(path);
    const to = here && this.transferredIssues.get(Number(here[1]));
    if (!here || !to) return null;
    if (method !== 'GET') return { status: 404, body: error(404, 'Not Found') };
    // Relative to the box's API root (box.ts serves the fake under /api/v3).
    const location = `/api/v3/repositories/${to.id}/issues/${to.number}${here[2] ?? ''}`;
    return { status: 301, body: error(301, 'Moved Permanently'), headers: { location } };
  }

  /** The default branch renamed, as GitHub's settings do: the old name is gone, its commits now under the new. */
  renameDefaultBranch(to: string): void {
    const sha = this.refs.get(`refs/heads/${this.defaultBranch}`);
    if (sha === undefined) throw new Error(`no branch ${this.defaultBranch}`);
    this.refs.delete(`refs/heads/${this.defaultBranch}`);
    this.refs.set(`refs/heads/${to}`, sha);
    this.defaultBranch = to;
  }

  /** The repository (`repository`; `full-repository` adds the counts GET /repos/{owner}/{repo} gives). */
  /** The repository as webhooks and events show it. */
  repositoryPayload(): Record<string, unknown> {
    return this.repository();
  }

  private repository(full = false) {
    const r = this.repoUrl;
    const fullName = `${this.owner}/${this.repo}`;
    return {
      id: FAKE_REPOSITORY_ID,
      node_id: nodeId('R', fullName),
      name: this.repo,
      full_name: fullName,
      private: false,
      owner: user(this.owner, 9919, 'Organization'),
      html_url: this.htmlUrl,
      description: 'A repository forkflush runs in',
      fork: false,
      url: r,
      archive_url: `${r}/{archive_format}{/ref}`,
      assignees_url: `${r}/assignees{/user}`,
      blobs_url: `${r}/git/blobs{/sha}`,
      branches_url: `${r}/branches{/branch}`,
      collaborators_url: `${r}/collaborators{/collaborator}`,
      comments_url: `${r}/comments{/number}`,
      commits_url: `${r}/commits{/sha}`,
      compare_url: `${r}/compare/{base}...{head}`,
      contents_url: `${r}/contents/{+path}`,
      contributors_url: `${r}/contributors`,
      deployments_url: `${r}/deployments`,
      downloads_url: `${r}/downloads`,
      events_url: `${r}/events`,
      forks_url: `${r}/forks`,
      git_commits_url: `${r}/git/commits{/sha}`,
      git_refs_url: `${r}/git/refs{/sha}`,
      git_tags_url: `${r}/git/tags{/sha}`,
      git_url: `git://github.com/${fullName}.git`,
      issue_comment_url: `${r}/issues/comments{/number}`,
      issue_events_url: `${r}/issues/events{/number}`,
      issues_url: `${r}/issues{/number}`,
      keys_url: `${r}/keys{/key_id}`,
      labels_url: `${r}/labels{/name}`,
      languages_url: `${r}/languages`,
      merges_url: `${r}/merges`,
      milestones_url: `${r}/milestones{/number}`,
      notifications_url: `${r}/notifications{?since,all,participating}`,
      pulls_url: `${r}/pulls{/number}`,
      releases_url: `${r}/releases{/id}`,
      ssh_url: `git@github.com:${fullName}.git`,
      stargazers_url: `${r}/stargazers`,
      statuses_url: `${r}/statuses/{sha}`,
      subscribers_url: `${r}/subscribers`,
      subscription_url: `${r}/subscription`,
      tags_url: `${r}/tags`,
      teams_url: `${r}/teams`,
      trees_url: `${r}/git/trees{/sha}`,
      clone_url: `${this.htmlUrl}.git`,
      mirror_url: null,
      hooks_url: `${r}/hooks`,
      svn_url: this.htmlUrl,
      homepage: null,
      language: 'JavaScript',
      forks_count: 0,
      stargazers_count: 0,
      watchers_count: 0,
      size: 108,
      default_branch: this.defaultBranch,
      open_issues_count: 1,
      is_template: false,
      topics: [],
      has_issues: true,
      has_projects: true,
      has_wiki: true,
      has_pages: false,
      has_downloads: true,
      has_discussions: false,
      archived: false,
      disabled: false,
      visibility: 'public',
      pushed_at: WHEN,
      created_at: WHEN,
      updated_at: WHEN,
      permissions: { admin: false, maintain: false, push: true, triage: true, pull: true },
      allow_forking: true,
      web_commit_signoff_required: false,
      license: null,
      forks: 0,
      open_issues: 1,
      watchers: 0,
      ...(full ? { network_count: 0, subscribers_count: 1 } : {}),
    };
  }

  private gitRef(ref: string, sha: string) {
    return {
      ref,
      node_id: nodeId('REF', ref),
      url: `${this.repoUrl}/git/${ref}`,
      object: { sha, type: 'commit', url: `${this.repoUrl}/git/commits/${sha}` },
    };
  }

  private gitCommit(c: FakeCommit) {
    const { tree } = c;
    return {
      sha: c.sha,
      node_id: nodeId('C', c.sha),
      url: `${this.repoUrl}/git/commits/${c.sha}`,
      html_url: `${this.htmlUrl}/commit/${c.sha}`,
      author: BOT_IDENTITY,
      committer: BOT_IDENTITY,
      tree: { sha: tree, url: `${this.repoUrl}/git/trees/${tree}` },
      message: c.message,
      parents: c.parents.map((sha) => ({
        sha,
        url: `${this.repoUrl}/git/commits/${sha}`,
        html_url: `${this.htmlUrl}/commit/${sha}`,
      })),
      verification: { verified: false, reason: 'unsigned', signature: null, payload: null, verified_at: null },
    };
  }

  /** The entries of the folder `path` in a commit's files (none: no such folder), as the contents API lists them. */
  private folderEntries(files: Record<string, string>, path: string, ref: string) {
    const prefix = `${path.replace(/\/+$/, '')}/`;
    const names = new Map<string, 'file' | 'dir'>();
    for (const f of Object.keys(files)) {
      if (!f.startsWith(prefix)) continue;
      const [name, ...below] = f.slice(prefix.length).split('/');
      if (name) names.set(name, below.length > 0 ? 'dir' : 'file');
    }
    return [...names].map(([name, type]) => {
      const inner = `${prefix}${name}`;
      if (type === 'file') {
        const { encoding: _e, content: _c, ...entry } = this.contentFile(inner, ref, files[inner] as string);
        return entry;
      }
      const url = `${this.repoUrl}/contents/${inner}?ref=${encodeURIComponent(ref)}`;
      const gitUrl = `${this.repoUrl}/git/trees/${blobSha(inner)}`;
      const htmlUrl = `${this.htmlUrl}/tree/${ref}/${inner}`;
      return {
        type,
        size: 0,
        name,
        path: inner,
        sha: blobSha(inner),
        url,
        git_url: gitUrl,
        html_url: htmlUrl,
        download_url: null,
        _links: { self: url, git: gitUrl, html: htmlUrl },
      };
    });
  }

  private contentFile(path: string, ref: string, content: string) {
    const sha = blobSha(content);
    const url = `${this.repoUrl}/contents/${path}?ref=${encodeURIComponent(ref)}`;
    const gitUrl = `${this.repoUrl}/git/blobs/${sha}`;
    const htmlUrl = `${this.htmlUrl}/blob/${ref}/${path}`;
    // GitHub wraps the base64 text at 60 characters; past 1 MB it gives none ("encoding": "none").
    const size = Buffer.byteLength(content);
    const base64 = Buffer.from(content).toString('base64');
    const large = size > CONTENT_JSON_MAX;
    return {
      type: 'file',
      encoding: large ? 'none' : 'base64',
      size,
      name: path.split('/').at(-1) as string,
      path,
      content: large ? '' : `${base64.match(/.{1,60}/g)?.join('\n') ?? ''}\n`,
      sha,
      url,
      git_url: gitUrl,
      html_url: htmlUrl,
      download_url: `https://raw.githubusercontent.com/${this.owner}/${this.repo}/${ref}/${path}`,
      _links: { self: url, git: gitUrl, html: htmlUrl },
    };
  }

  private pullRequest(pr: FakePull) {
    const head = this.branch(pr.head);
    const base = this.branch(pr.base);
    const known = this.pullShas.get(pr.number);
    const shas = { head: head ?? known?.head ?? '', base: base ?? known?.base ?? '' };
    this.pullShas.set(pr.number, shas);
    const r = this.repoUrl;
    const url = `${r}/pulls/${pr.number}`;
    const htmlUrl = `${this.htmlUrl}/pull/${pr.number}`;
    const end = (ref: string, sha: string) => ({
      label: `${this.owner}:${ref}`,
      ref,
      sha,
      user: user(this.owner, 9919, 'Organization'),
      repo: this.repository(),
    });
    return {
      url,
      id: 2_000_000_000 + pr.number,
      node_id: nodeId('PR', pr.number),
      html_url: htmlUrl,
      diff_url: `${htmlUrl}.diff`,
      patch_url: `${htmlUrl}.patch`,
      issue_url: `${r}/issues/${pr.number}`,
      number: pr.number,
      state: pr.state,
      locked: false,
      title: pr.title,
      user: BOT,
      body: pr.body === '' ? null : pr.body,
      labels: [],
      milestone: null,
      active_lock_reason: null,
      created_at: WHEN,
      updated_at: WHEN,
      closed_at: pr.state === 'closed' ? WHEN : null,
      merged_at: pr.merged ? WHEN : null,
      merge_commit_sha: null,
      assignee: null,
      assignees: [],
      requested_reviewers: [],
      requested_teams: [],
      draft: pr.draft ?? false,
      commits_url: `${url}/commits`,
      review_comments_url: `${url}/comments`,
      review_comment_url: `${r}/pulls/comments{/number}`,
      comments_url: `${r}/issues/${pr.number}/comments`,
      statuses_url: `${r}/statuses/${shas.head}`,
      head: end(pr.head, shas.head),
      base: end(pr.base, shas.base),
      _links: {
        self: { href: url },
        html: { href: htmlUrl },
        issue: { href: `${r}/issues/${pr.number}` },
        comments: { href: `${r}/issues/${pr.number}/comments` },
        review_comments: { href: `${url}/comments` },
        review_comment: { href: `${r}/pulls/comments{/number}` },
        commits: { href: `${url}/commits` },
        statuses: { href: `${r}/statuses/${shas.head}` },
      },
      author_association: 'NONE',
      auto_merge: null,
      // GitHub works out mergeability after it answers: a new pull request says null and unknown.
      merged: pr.merged ?? false,
      mergeable: null,
      rebaseable: null,
      mergeable_state: 'unknown',
      merged_by: null,
      comments: this.comments.filter((c) => c.issue === pr.number).length,
      review_comments: 0,
      maintainer_can_modify: false,
      commits: 1,
      additions: 2,
      deletions: 0,
      changed_files: 1,
    };
  }

  /** A workflow run (`workflow-run`). */
  workflowRun(run: FakeRun) {
    const r = this.repoUrl;
    const url = `${r}/actions/runs/${run.id}`;
    const commit = this.commits.get(run.headSha);
    const identity = { name: BOT_IDENTITY.name, email: BOT_IDENTITY.email };
    const repo = this.repository();
    return {
      id: run.id,
      name: run.name,
      node_id: nodeId('WFR', run.id),
      head_branch: run.ref,
      head_sha: run.headSha,
      path: `.github/workflows/${run.workflowId}`,
      display_title: run.displayTitle,
      run_number: run.id - 9_000_000,
      run_attempt: run.attempt,
      event: 'workflow_dispatch',
      status: run.status,
      conclusion: run.conclusion,
      workflow_id: 161335,
      url,
      html_url: `${this.htmlUrl}/actions/runs/${run.id}`,
      pull_requests: [],
      created_at: WHEN,
      updated_at: WHEN,
      run_started_at: WHEN,
      actor: BOT,
      triggering_actor: BOT,
      jobs_url: `${url}/jobs`,
      logs_url: `${url}/logs`,
      check_suite_url: `${r}/check-suites/${run.id}`,
      artifacts_url: `${url}/artifacts`,
      cancel_url: `${url}/cancel`,
      rerun_url: `${url}/rerun`,
      workflow_url: `${r}/actions/workflows/161335`,
      head_commit: commit
        ? {
            id: commit.sha,
            tree_id: commit.tree,
            message: commit.message,
            timestamp: WHEN,
            author: identity,
            committer: identity,
          }
        : null,
      repository: repo,
      head_repository: repo,
    };
  }

  private issueComment(c: FakeGitHub['comments'][number]) {
    return {
      id: c.id,
      node_id: nodeId('IC', c.id),
      url: `${this.repoUrl}/issues/comments/${c.id}`,
      html_url: `${this.htmlUrl}/issues/${c.issue}#issuecomment-${c.id}`,
      body: c.body,
      user: c.author ? user(c.author.login, c.author.id, c.author.type) : BOT,
      created_at: c.createdAt,
      updated_at: c.updatedAt,
      issue_url: `${this.repoUrl}/issues/${c.issue}`,
      author_association: 'NONE',
    };
  }

  private label(name: string) {
    return {
      id: Number.parseInt(sha1(name).slice(0, 8), 16),
      node_id: nodeId('LA', name),
      url: `${this.repoUrl}/labels/${encodeURIComponent(name)}`,
      name,
      description: null,
      color: 'ededed',
      default: false,
    };
  }

  /** An issue (`issue`), or a pull request seen as one. */
  private issue(n: number) {
    const r = this.repoUrl;
    const pr = this.pulls.find((p) => p.number === n);
    const state = pr ? pr.state : (this.issues.get(n)?.state ?? 'open');
    return {
      id: 3_000_000_000 + n,
      node_id: nodeId('I', n),
      url: `${r}/issues/${n}`,
      repository_url: r,
      labels_url: `${r}/issues/${n}/labels{/name}`,
      comments_url: `${r}/issues/${n}/comments`,
      events_url: `${r}/issues/${n}/events`,
      html_url: `${this.htmlUrl}/${pr ? 'pull' : 'issues'}/${n}`,
      number: n,
      state,
      title: pr ? pr.title : 'Pack it tighter',
      body: pr ? pr.body : 'Make the score go up.',
      user: pr ? BOT : user('maintainer', 5000),
      labels: [...(this.labels.get(n) ?? [])].map((name) => this.label(name)),
      assignee: null,
      assignees: [],
      milestone: null,
      locked: false,
      active_lock_reason: null,
      comments: this.comments.filter((c) => c.issue === n).length,
      closed_at: state === 'closed' ? WHEN : null,
      created_at: WHEN,
      updated_at: WHEN,
      author_association: 'OWNER',
      ...(pr
        ? {
            pull_request: {
              url: `${r}/pulls/${n}`,
              html_url: `${this.htmlUrl}/pull/${n}`,
              diff_url: null,
              patch_url: null,
            },
          }
        : {}),
    };
  }

  private reaction(r: FakeGitHub['reactions'][number]) {
    return {
      id: r.id,
      node_id: nodeId('RE', r.id),
      user: BOT,
      content: r.content,
      created_at: WHEN,
    };
  }

  private checkRun(run: FakeGitHub['checkRuns'][number], body: any) {
    return {
      id: run.id,
      head_sha: run.head_sha,
      node_id: nodeId('CR', run.id),
      external_id: body.external_id ?? '',
      url: `${this.repoUrl}/check-runs/${run.id}`,
      html_url: `${this.htmlUrl}/runs/${run.id}`,
      details_url: body.details_url ?? `${WEB}/apps/forkflush`,
      status: body.status ?? 'queued',
      conclusion: body.conclusion ?? null,
      started_at: body.started_at ?? WHEN,
      completed_at: body.completed_at ?? null,
      output: {
        title: body.output?.title ?? null,
        summary: body.output?.summary ?? null,
        text: body.output?.text ?? null,
        annotations_count: 0,
        annotations_url: `${this.repoUrl}/check-runs/${run.id}/annotations`,
      },
      name: run.name,
      check_suite: { id: 5_000_000 + run.id },
      app: {
        id: 1,
        slug: 'forkflush',
        node_id: nodeId('A', 1),
        client_id: 'Iv1.forkflush0000000',
        owner: user(this.owner, 9919, 'Organization'),
        name: 'forkflush',
        description: 'Runs long-lived coding agents with the fork-and-flush method',
        external_url: `${WEB}/apps/forkflush`,
        html_url: `${WEB}/apps/forkflush`,
        created_at: WHEN,
        updated_at: WHEN,
        permissions: APP.permissions,
        events: APP.events,
      },
      pull_requests: [],
    };
  }

  private readonly routes: {
    method: string;
    path: RegExp;
    handler: Handler;
  }[] = [];

  /**
   * Answers one REST request (`uri` is the path and query below the API's root): checks it against
   * GitHub's OpenAPI description, applies injected faults, runs the route, checks the response.
   */
  handle(
    method: string,
    uri: string,
    body: unknown,
    headers: Record<string, string | string[] | undefined> = {},
  ): Reply {
    if (this.routes.length === 0) this.defineRoutes();
    const url = new URL(uri, API);
    this.log.push(`${method} ${url.pathname}`);
    const refused = this.authenticate(url.pathname, headers.authorization);
    if (refused) return refused;
    const moved = this.movedIssue(method, url.pathname);
    if (moved) return moved;
    const parsed = typeof body === 'string' && body !== '' ? JSON.parse(body) : body === '' ? undefined : body;
    const checked = this.validate
      ? checkRequest({ method, path: url.pathname, query: url.searchParams, body: parsed })
      : { route: null, violations: [] };
    if (checked.violations.length > 0) return this.reject(checked.violations);
    const route = this.routes.find((r) => r.method === method && r.path.test(url.pathname));
    if (!route) {
      // An operation GitHub has that this fake does not answer: a 404 would pass for "absent".
      if (!checked.route) return { status: 404, body: error(404, 'Not Found') };
      return this.reject([violation(checked.route, 'path', 'the fake GitHub does not answer this operation')]);
    }
    const m = route.path.exec(url.pathname) as RegExpExecArray;
    if (this.denied?.(method, url.pathname)) {
      return {
        status: 403,
        body: { message: 'Resource not accessible by integration', documentation_url: 'https://docs.github.com/rest' },
      };
    }
    const issue = /\/issues\/(\d+)(\/|$)/.exec(url.pathname)?.[1];
    if (issue !== undefined && this.deletedIssues.has(Number(issue))) {
      return { status: 410, body: error(410, 'This issue was deleted') };
    }
    const accept = [headers.accept ?? ''].flat().join(', ');
    const injected = this.inject?.(method, url.pathname) ?? null;
    if (typeof injected === 'number') return this.injectedReply(method, url.pathname, injected);
    if (injected !== null) {
      route.handler(m, parsed, url.searchParams, accept);
      return this.injectedReply(method, url.pathname, injected.status);
    }
    let reply: [number, unknown?];
    if (this.failNext && this.failNext.method === method && this.failNext.path.test(url.pathname)) {
      reply = [this.failNext.status, error(this.failNext.status, 'injected failure')];
      this.failNext = null;
    } else {
      reply = route.handler(m, parsed, url.searchParams, accept);
    }
    const raw = reply[1] instanceof RawBody ? reply[1] : null;
    const wrong = checked.route
      ? checkResponse(checked.route, reply[0], raw ? raw.text : reply[1], raw?.contentType)
      : [];
    return wrong.length > 0 ? this.reject(wrong) : { status: reply[0], body: reply[1] };
  }

  /** GitHub's answer to a request without a credential it accepts, or null to go on. */
  private authenticate(path: string, header: string | string[] | undefined): Reply | null {
    if (!this.auth) return null;
    const value = Array.isArray(header) ? header[0] : header;
    if (path.startsWith('/app/') || path === '/app') {
      if (this.auth.jwt(value)) return null;
      return { status: 401, body: error(401, 'A JSON web token could not be decoded') };
    }
    const token = this.auth.token(value);
    if (!token) return { status: 401, body: error(401, 'Bad credentials') };
    if (path.startsWith('/installation/') && token.installation === null) {
      return { status: 403, body: error(403, 'This endpoint is only for installation tokens') };
    }
    // An installation token sees the repositories of its installation's account only.
    const account = this.auth.installations.find((i) => i.id === token.installation)?.account;
    if (token.installation !== null && path.startsWith('/repos/') && account !== this.owner) {
      return { status: 404, body: error(404, 'Not Found') };
    }
    this.tokenInstallation = token.installation;
    return null;
  }

  /**
   * The most entries one tree listing holds: GitHub's is 100,000 (REST "Get a tree": past it,
   * `truncated` is true); a test sets a small one to meet a truncated listing without that many files.
   */
  treeListingMax = 100_000;

  /** The installation of the token that authenticated the request being answered. */
  private tokenInstallation: number | null = null;

  private installation(inst: { id: number; account: string; suspended?: boolean }) {
    const account = { ...user(inst.account, 9919, 'Organization'), name: inst.account, slug: inst.account };
    return {
      id: inst.id,
      account: { ...account, created_at: WHEN, updated_at: WHEN },
      app_id: this.auth?.appId ?? 1,
      app_slug: 'forkflush',
      target_id: 9919,
      target_type: 'Organization',
      single_file_name: null,
      repository_selection: 'selected',
      access_tokens_url: `${API}/app/installations/${inst.id}/access_tokens`,
      html_url: `${WEB}/organizations/${inst.account}/settings/installations/${inst.id}`,
      repositories_url: `${API}/installation/repositories`,
      events: APP.events,
      permissions: APP.permissions,
      created_at: WHEN,
      updated_at: WHEN,
      suspended_by: null,
      suspended_at: inst.suspended ? WHEN : null,
    };
  }

  private defineRoutes(): void {
    const absolute = (method: string, path: RegExp, handler: Handler) => this.routes.push({ method, path, handler });
    absolute('GET', /^\/app\/installations$/, () => [
      200,
      (this.auth?.installations ?? []).map((i) => this.installation(i)),
    ]);
    absolute('POST', /^\/app\/installations\/(\d+)\/access_tokens$/, (m) => {
      const inst = this.auth?.installations.find((i) => i.id === Number(m[1]));
      if (!inst || !this.auth) return [404, error(404, 'Not Found')];
      if (inst.suspended) return [403, error(403, 'This installation has been suspended')];
      const minted = this.auth.mint(inst.id);
      const expires = new Date(minted.expiresAt).toISOString().replace(/\.\d+Z$/, 'Z');
      return [
        201,
        {
          token: minted.token,
          expires_at: expires,
          permissions: this.installation(inst).permissions,
          repository_selection: 'selected',
        },
      ];
    });
    absolute('GET', /^\/installation\/repositories$/, () => {
      const mine = this.auth?.installations.find((i) => i.id === this.tokenInstallation && i.account === this.owner);
      const repositories = mine ? [this.repository(true)] : [];
      return [200, { total_count: repositories.length, repository_selection: 'selected', repositories }];
    });
    const base = `/repos/${this.owner}/${this.repo}`;
    const route = (method: string, path: RegExp, handler: Handler) => {
      this.routes.push({ method, path: new RegExp(`^${base}${path.source}$`), handler });
    };
    const refPath = (m: RegExpExecArray) => `refs/${decodeURIComponent(m[1] as string)}`;

    route('GET', /$/, () => [200, this.repository(true)]);
    route('GET', /\/collaborators\/([^/]+)\/permission/, (m) => {
      const login = decodeURIComponent(m[1] as string);
      const role = this.permissions[login] ?? 'none';
      // `permission` is the older scale: maintain reads as write, triage as read.
      const permission = role === 'maintain' ? 'write' : role === 'triage' ? 'read' : role;
      const rank = ['none', 'read', 'triage', 'write', 'maintain', 'admin'].indexOf(role);
      const permissions = {
        pull: rank >= 1,
        triage: rank >= 2,
        push: rank >= 3,
        maintain: rank >= 4,
        admin: rank >= 5,
      };
      return [200, { permission, role_name: role, user: { ...user(login, 5000), permissions, role_name: role } }];
    });
    route('GET', /\/contents\/(.+)/, (m, _b, q, accept) => {
      const ref = q.get('ref') ?? 'main';
      const sha = this.refs.get(`refs/heads/${ref}`) ?? this.refs.get(ref) ?? ref;
      const path = decodeURIComponent(m[1] as string);
      const files = this.commits.get(sha)?.files ?? {};
      const content = files[path];
      // A folder: its entries, as JSON whatever the media type asked for.
      if (content === undefined) {
        const entries = this.folderEntries(files, path, ref);
        return entries.length > 0 ? [200, entries] : [404, error(404, 'Not Found')];
      }
      // The raw media type (Octokit's `format: 'raw'` asks for application/vnd.github.v3.raw): the file's bytes.
      if (/application\/vnd\.github(\.v3)?\.raw\b/.test(accept))
        return [200, new RawBody(content, 'application/vnd.github.raw; charset=utf-8')];
      return [200, this.contentFile(path, ref, content)];
    });
    route('GET', /\/git\/ref\/(.+)/, (m) => {
      const sha = this.refs.get(refPath(m));
      return sha ? [200, this.gitRef(refPath(m), sha)] : [404, error(404, 'Not Found')];
    });
    route('GET', /\/git\/matching-refs\/(.+)/, (m) => {
      const prefix = refPath(m);
      return [200, [...this.refs].filter(([r]) => r.startsWith(prefix)).map(([ref, sha]) => this.gitRef(ref, sha))];
    });
    route('POST', /\/git\/refs/, (_m, body) => {
      if (this.refs.has(body.ref)) return [422, error(422, 'Reference already exists')];
      if (!this.commits.get(body.sha)) return [422, error(422, 'Object does not exist')];
      this.refs.set(body.ref, body.sha);
      return [201, this.gitRef(body.ref, body.sha)];
    });
    route('PATCH', /\/git\/refs\/(.+)/, (m, body) => {
      const ref = refPath(m);
      const old = this.refs.get(ref);
      if (!old) return [422, error(422, 'Reference does not exist')];
      if (!this.commits.get(body.sha)) return [422, error(422, 'Object does not exist')];
      if (!body.force && !this.isAncestor(old, body.sha)) return [422, error(422, 'Update is not a fast forward')];
      this.refs.set(ref, body.sha);
      this.branchesMoved();
      return [200, this.gitRef(ref, body.sha)];
    });
    route('DELETE', /\/git\/refs\/(.+)/, (m) => {
      if (!this.refs.delete(refPath(m))) return [422, error(422, 'Reference does not exist')];
      this.branchesMoved();
      return [204];
    });
    const trees = new Map<string, Record<string, string>>();
    route('POST', /\/git\/trees/, (_m, body) => {
      const entries = body.tree as { path: string; mode: string; type: string; content: string }[];
      const files = Object.fromEntries(entries.map((t) => [t.path, t.content]));
      const sha = this.store.writeTree(files);
      trees.set(sha, files);
      const tree = entries.map((t) => {
        const blob = blobSha(t.content);
        const url = `${this.repoUrl}/git/blobs/${blob}`;
        return { path: t.path, mode: t.mode, type: t.type, sha: blob, size: Buffer.byteLength(t.content), url };
      });
      return [201, { sha, url: `${this.repoUrl}/git/trees/${sha}`, tree, truncated: false }];
    });
    route('POST', /\/git\/commits$/, (_m, body) => {
      const sha = this.commit({ message: body.message, parents: body.parents, files: trees.get(body.tree) ?? {} });
      return [201, this.gitCommit(this.commits.get(sha) as FakeCommit)];
    });
    route('GET', /\/git\/trees\/([0-9a-f]+)/, (m, _b, q) => {
      const sha = m[1] as string;
      const entries = this.store.treeEntries(sha, q.has('recursive'));
      if (!entries) return [404, error(404, 'Not Found')];
      // GitHub lists at most so many entries, then says the listing is truncated ("Get a tree").
      const truncated = entries.length > this.treeListingMax;
      const tree = entries
        .slice(0, this.treeListingMax)
        .map((t) => ({ ...t, url: `${this.repoUrl}/git/${t.type}s/${t.sha}` }));
      return [200, { sha, url: `${this.repoUrl}/git/trees/${sha}`, tree, truncated }];
    });
    route('GET', /\/git\/commits\/([0-9a-f]+)/, (m) => {
      const c = this.commits.get(m[1] as string);
      return c ? [200, this.gitCommit(c)] : [404, error(404, 'Not Found')];
    });
    route('POST', /\/pulls$/, (_m, body) => {
      const refused = (message: string) => validationFailed({ resource: 'PullRequest', code: 'custom', message });
      if (this.pulls.some((p) => p.head === body.head && p.state === 'open'))
        return [422, refused(`A pull request already exists for ${this.owner}:${body.head}.`)];
      const head = this.branch(body.head);
      const base = this.branch(body.base);
      if (!head) return [422, validationFailed({ resource: 'PullRequest', field: 'head', code: 'invalid' })];
      if (!base) return [422, validationFailed({ resource: 'PullRequest', field: 'base', code: 'invalid' })];
      if (this.isAncestor(head, base)) return [422, refused(`No commits between ${body.base} and ${body.head}`)];
      const long = tooLong('Issue', body.body);
      if (long) return [422, long];
      const pr: FakePull = {
        number: this.nextId++,
        head: body.head,
        base: body.base,
        title: body.title,
        body: body.body,
        state: 'open',
        ...(body.draft === true ? { draft: true } : {}),
      };
      this.pulls.push(pr);
      this.onEvent?.('pull_request', 'opened', pr);
      return [201, this.pullRequest(pr)];
    });
    route('GET', /\/pulls/, (_m, _b, q) => {
      const head = (q.get('head') ?? '').split(':')[1];
      const state = q.get('state') ?? 'open';
      const found = this.pulls.filter((p) => p.head === head && (state === 'all' || p.state === state));
      return [200, found.map((p) => this.pullRequest(p))];
    });
    route('PATCH', /\/pulls\/(\d+)/, (m, body) => {
      const pr = this.pulls.find((p) => p.number === Number(m[1]));
      if (!pr) return [404, error(404, 'Not Found')];
      const long = tooLong('Issue', body.body);
      if (long) return [422, long];
      const closing = pr.state === 'open' && body.state === 'closed';
      pr.state = body.state ?? pr.state;
      if (typeof body.title === 'string') pr.title = body.title;
      if (typeof body.body === 'string') pr.body = body.body;
      pr.edits = (pr.edits ?? 0) + 1;
      if (closing) this.onEvent?.('pull_request', 'closed', pr);
      return [200, this.pullRequest(pr)];
    });
    route('GET', /\/pulls\/(\d+)$/, (m) => {
      const pr = this.pulls.find((p) => p.number === Number(m[1]));
      return pr ? [200, this.pullRequest(pr)] : [404, error(404, 'Not Found')];
    });
    route('GET', /\/issues\/(\d+)$/, (m) => {
      const n = Number(m[1]);
      if (this.pulls.some((p) => p.number === n)) return [200, this.issue(n)];
      return this.issues.has(n) || this.labels.has(n) || this.comments.some((c) => c.issue === n)
        ? [200, this.issue(n)]
        : [404, error(404, 'Not Found')];
    });
    route('POST', /\/issues\/comments\/(\d+)\/reactions/, (m, body) => {
      const c = this.comments.find((x) => x.id === Number(m[1])) ?? this.personComments.get(Number(m[1]));
      if (!c) return [404, error(404, 'Not Found')];
      // One reaction of a kind per author: a repeat answers 200 with the one there.
      const known = this.reactions.find((r) => r.comment === c.id && r.content === body.content);
      if (known) return [200, this.reaction(known)];
      const r = { id: this.nextId++, comment: c.id, content: body.content as string };
      this.reactions.push(r);
      return [201, this.reaction(r)];
    });
    route('GET', /\/check-runs\/(\d+)$/, (m) => {
      const run = this.checkRuns.find((c) => c.id === Number(m[1]));
      return run ? [200, this.checkRun(run, run.request)] : [404, error(404, 'Not Found')];
    });
    route('PATCH', /\/check-runs\/(\d+)$/, (m, body) => {
      const run = this.checkRuns.find((c) => c.id === Number(m[1]));
      if (!run) return [404, error(404, 'Not Found')];
      const refused = checkOutputRefusal(body);
      if (refused) return [422, refused];
      if (body.status === 'completed' && !body.conclusion)
        return [422, validationFailed({ resource: 'CheckRun', code: 'missing_field', field: 'conclusion' })];
      run.request = { ...run.request, ...body, output: body.output ?? run.request.output };
      run.status = run.request.status ?? run.status;
      run.conclusion = body.status === 'completed' || body.conclusion ? body.conclusion : run.conclusion;
      if (body.status && body.status !== 'completed') {
        run.conclusion = null;
        delete run.request.conclusion;
        delete run.request.completed_at;
      }
      if (body.output) run.output = body.output;
      run.updates++;
      return [200, this.checkRun(run, run.request)];
    });
    for (const action of ['enable', 'disable'] as const) {
      route('PUT', new RegExp(`/actions/workflows/([^/]+)/${action}$`), (m) => {
        const workflow = decodeURIComponent(m[1] as string);
        const sha = this.branch('main') as string;
        if (this.commits.get(sha)?.files[`.github/workflows/${workflow}`] === undefined)
          return [404, error(404, 'Not Found')];
        this.workflowStates.set(workflow, action === 'enable' ? 'active' : 'disabled_manually');
        this.workflowToggles.push(`${action} ${workflow}`);
        return [204];
      });
    }
    route('POST', /\/issues\/(\d+)\/comments/, (m, body) => {
      const long = tooLong('IssueComment', body.body);
      if (long) return [422, long];
      const at = now();
      const c = {
        id: this.nextId++,
        issue: Number(m[1]),
        body: body.body as string,
        edits: 0,
        createdAt: at,
        updatedAt: at,
      };
      this.comments.push(c);
      this.onEvent?.('issue_comment', 'created', c);
      return [201, this.issueComment(c)];
    });
    route('GET', /\/issues\/(\d+)\/comments/, (m, _b, q) => {
      // Oldest first, as GitHub lists them; `since` keeps those updated at or after it.
      const since = q.get('since');
      const listed = this.comments.filter(
        (c) => c.issue === Number(m[1]) && (!since || Date.parse(c.updatedAt) >= Date.parse(since)),
      );
      return [200, listed.map((c) => this.issueComment(c))];
    });
    route('PATCH', /\/issues\/comments\/(\d+)/, (m, body) => {
      const c = this.comments.find((x) => x.id === Number(m[1]));
      if (!c) return [404, error(404, 'Not Found')];
      // An app edits its own comments here; another app's are refused, as GitHub refuses them.
      if (c.author?.type === 'Bot') return [403, error(403, 'Resource not accessible by integration')];
      const long = tooLong('IssueComment', body.body);
      if (long) return [422, long];
      c.body = body.body;
      c.edits++;
      c.updatedAt = now();
      return [200, this.issueComment(c)];
    });
    route('POST', /\/issues\/(\d+)\/labels/, (m, body) => {
      const set = this.labels.get(Number(m[1])) ?? new Set();
      const added = (body.labels as string[]).filter((l) => !set.has(l));
      for (const l of added) set.add(l);
      this.labels.set(Number(m[1]), set);
      for (const l of added) this.onEvent?.('issues', 'labeled', { issue: Number(m[1]), label: l });
      return [200, [...set].map((name) => this.label(name))];
    });
    route('DELETE', /\/issues\/(\d+)\/labels\/(.+)/, (m) => {
      const set = this.labels.get(Number(m[1]));
      const label = decodeURIComponent(m[2] as string);
      if (!set?.delete(label)) return [404, error(404, 'Label does not exist')];
      this.onEvent?.('issues', 'unlabeled', { issue: Number(m[1]), label });
      // GitHub answers with the labels the issue still has.
      return [200, [...set].map((name) => this.label(name))];
    });
    route('POST', /\/check-runs/, (_m, body) => {
      const refused = checkOutputRefusal(body);
      if (refused) return [422, refused];
      if (!this.commits.get(body.head_sha))
        return [422, validationFailed({ resource: 'CheckRun', code: 'invalid', field: 'head_sha' })];
      if (body.status === 'completed' && !body.conclusion)
        return [422, validationFailed({ resource: 'CheckRun', code: 'missing_field', field: 'conclusion' })];
      const run = {
        id: this.nextId++,
        head_sha: body.head_sha,
        name: body.name,
        status: body.status ?? 'queued',
        conclusion: body.conclusion ?? null,
        output: body.output,
        request: body,
        updates: 0,
      };
      this.checkRuns.push(run);
      return [201, this.checkRun(run, body)];
    });
    route('GET', /\/commits\/([^/]+)\/check-runs/, (m, _b, q) => {
      const ref = decodeURIComponent(m[1] as string);
      const sha = this.branch(ref) ?? ref;
      const name = q.get('check_name');
      const runs = this.checkRuns.filter((c) => c.head_sha === sha && (!name || c.name === name));
      return [200, { total_count: runs.length, check_runs: runs.map((c) => this.checkRun(c, c.request)) }];
    });
    route('POST', /\/actions\/workflows\/([^/]+)\/dispatches/, (m, body) => {
      const workflow = decodeURIComponent(m[1] as string);
      const inputs = (body.inputs ?? {}) as Record<string, string>;
      if (this.actions) {
        const sha = this.branch(body.ref);
        if (!sha) return [422, error(422, `No ref found for: ${body.ref}`)];
        let run: FakeRun;
        try {
          run = this.actions.dispatch(workflow, body.ref, sha, inputs);
        } catch (e) {
          const message = (e as Error).message;
          return message.startsWith('Not Found') ? [404, error(404, 'Not Found')] : [422, error(422, message)];
        }
        this.onEvent?.('workflow_run', 'requested', run);
        this.dispatches.push({ workflow, ref: body.ref, inputs });
        if (body.return_run_details) {
          const shape = this.workflowRun(run);
          return [200, { workflow_run_id: run.id, run_url: shape.url, html_url: shape.html_url }];
        }
        return [204];
      }
      this.dispatches.push({ workflow, ref: body.ref, inputs });
      return [204];
    });
    route('GET', /\/actions\/workflows\/([^/]+)\/runs/, (m, _b, q) => {
      const workflow = decodeURIComponent(m[1] as string);
      const status = q.get('status');
      const runs = (this.actions?.runs ?? []).filter(
        (r) => r.workflowId === workflow && (!status || r.status === status || r.conclusion === status),
      );
      return [200, { total_count: runs.length, workflow_runs: runs.map((r) => this.workflowRun(r)) }];
    });
    route('GET', /\/actions\/runs\/(\d+)/, (m) => {
      const run = this.actions?.runs.find((r) => r.id === Number(m[1]));
      return run ? [200, this.workflowRun(run)] : [404, error(404, 'Not Found')];
    });
    route('POST', /\/actions\/runs\/(\d+)\/cancel/, (m) => {
      const run = this.actions?.runs.find((r) => r.id === Number(m[1]));
      if (!run) return [404, error(404, 'Not Found')];
      const running = run.jobs.filter((j) => j.status !== 'completed');
      if (!this.actions?.cancel(run.id)) return [409, error(409, 'Cannot cancel a workflow run that is completed.')];
      for (const job of running) this.onEvent?.('workflow_job', 'completed', job);
      this.onEvent?.('workflow_run', 'completed', run);
      return [202, {}];
    });
  }
}
