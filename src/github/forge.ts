// The GitHub forge: every GitHub API call forkflush makes, one method each, behind one class.
// Methods are safe to repeat: "already exists" and "already gone" count as done.
//
// Retries. Probot's Octokit retries a request that failed with a server error or a lost connection
// (Octokit reports a reset as a 500), three times after 1, 4 and 9 s (@octokit/plugin-retry), and
// paces writes (@octokit/plugin-throttling). A server error may come after GitHub did the work, so a
// request is only left to that plugin when sending it twice does no harm: every read, and the
// writes that are repeat-safe by themselves (a ref update to a given commit, a delete, a label, a
// close, an edit; a tree or commit object made twice is the same or an orphan). The creates GitHub
// has no idempotency key for go out with the plugin's retries off: after a failure that may hide a
// success, a pull request, a check run, a workflow dispatch or a comment is looked for before the
// next try (createOnce). A handler that fails anyway leaves its claim, and the handler that takes
// it over checks before it redoes anything.
// (Over 400 lines: every GitHub API call forkflush makes is here on purpose, one door to check
// against the OpenAPI description and to make repeat-safe.)
import { randomUUID } from 'node:crypto';
import type { ProbotOctokit } from 'probot';
import type { CheckAnnotation } from '../core/github-text.js';
import { isRoundRunOf, parseStateRef, roundRunTitle } from '../core/names.js';
import {
  parseRunFiles,
  parseRunState,
  RecordError,
  RUN_FILES_RECORD,
  type RunFiles,
  recordText,
  STATE_RECORD,
  versioned,
} from '../core/records.js';
import type { RunState } from '../core/state.js';
import { checkSeal, repositoryKey, sealedFiles } from './record-seal.js';

export type { RunFiles };

export type Octokit = InstanceType<typeof ProbotOctokit>;

export interface GitCommit {
  message: string;
  parents: string[];
  tree: string;
}

export interface TreeFile {
  path: string;
  mode: string;
  sha: string;
}

/** A workflow run as GitHub lists it. */
export type WorkflowRun = Awaited<
  ReturnType<Octokit['rest']['actions']['listWorkflowRuns']>
>['data']['workflow_runs'][number];

export interface StoredRun {
  state: RunState;
  files: RunFiles;
  /** The state ref's commit: the expected value of the next compare-and-swap. */
  sha: string;
}

/** What a check run says: its status, its conclusion once completed, its page, its text. */
export interface CheckRunFields {
  status: 'queued' | 'in_progress' | 'completed';
  conclusion?: CheckConclusion;
  output?: { title: string; summary: string; text?: string; annotations?: CheckAnnotation[] };
  startedAt?: string;
  completedAt?: string;
  /** The page the check run links to: the job running its episode, or the workflow run that made the result. */
  detailsUrl?: string;
  /** Whose it is (`issue-7`, `issue-7/r0.b1`): several runs may start from one commit. */
  externalId?: string;
}

export type CheckConclusion = 'success' | 'neutral' | 'failure' | 'cancelled';
export type Reaction = 'eyes' | '+1' | '-1';

/** A check run's fields as the API takes them. */
function checkRunBody(f: CheckRunFields) {
  return {
    status: f.status,
    ...(f.conclusion ? { conclusion: f.conclusion } : {}),
    ...(f.startedAt ? { started_at: f.startedAt } : {}),
    ...(f.completedAt ? { completed_at: f.completedAt } : {}),
    ...(f.detailsUrl ? { details_url: f.detailsUrl } : {}),
    ...(f.externalId ? { external_id: f.externalId } : {}),
    ...(f.output ? { output: f.output } : {}),
  };
}

/** Another handler changed the run first: its work stands, this one stops. */
export class ConflictError extends Error {
  override name = 'ConflictError';
}

function status(e: unknown): number | undefined {
  return typeof e === 'object' && e !== null && 'status' in e ? Number((e as { status: unknown }).status) : undefined;
}

/**
 * What a refusal says: GitHub's message and those of its `errors` (a 422 says "Validation Failed",
 * and why in `errors`: `{"resource":"PullRequest","code":"custom","message":"No commits between …"}`).
 */
function refusal(e: unknown): { messages: string[]; errors: { field?: string; code?: string }[] } {
  const data = (e as { response?: { data?: unknown } }).response?.data;
  if (typeof data !== 'object' || data === null) return { messages: [], errors: [] };
  const { message, errors } = data as { message?: unknown; errors?: unknown };
  const list = Array.isArray(errors) ? (errors as { message?: unknown; field?: string; code?: string }[]) : [];
  const messages = [message, ...list.map((x) => x?.message)].filter((m): m is string => typeof m === 'string');
  return { messages, errors: list };
}

/**
 * Whether GitHub refused a pull request because one is there already, there is nothing to propose
 * (no commits between base and head), or the head branch is gone: not because of what was sent.
 */
function nothingToOpen(e: unknown): boolean {
  if (status(e) !== 422) return false;
  const { messages, errors } = refusal(e);
  return (
    messages.some((m) => /^(A pull request already exists for |No commits between )/.test(m)) ||
    errors.some((x) => x?.field === 'head' && x.code === 'invalid')
  );
}

/** A failure after which GitHub may still have done the request: a server error, a lost connection. */
function mayHaveLanded(e: unknown): boolean {
  return (status(e) ?? 0) >= 500;
}

/** Request options that turn the retry plugin off for one request (a create, see createOnce). */
const ONCE = { request: { retries: 0 } };

/** How far before a comment's first try its lookup starts (createComment). */
const CLOCK_SLACK_MS = 5 * 60_000;

/** Tries of a create before its handler gives up (createOnce). */
const CREATE_TRIES = 3;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class GitHubForge {
  /** Seals the run records this forge writes, and refuses those it reads without the seal. */
  private readonly recordKey: Buffer | null;

  /**
   * `recordKey` seals the run records; `release` is the forkflush release of the app, written into
   * each record it saves (RunFiles.writtenBy).
   */
  constructor(
    readonly octokit: Octokit,
    readonly owner: string,
    readonly repo: string,
    recordKey: Buffer | null = null,
    private readonly release: string | null = null,
  ) {
    this.recordKey = recordKey ? repositoryKey(recordKey, owner, repo) : null;
  }

  /**
   * The pause before the n-th retry of a create is n² times this (1 s, 4 s: the retry plugin's own
   * schedule, retryAfterBaseValue). The tests shorten it, as they shorten the plugins' timings.
   */
  static retryAfterBaseMs = 1000;

  /** Whether the run records are sealed (the app has a key). */
  get sealsRecords(): boolean {
    return this.recordKey !== null;
  }

  private get r() {
    return { owner: this.owner, repo: this.repo };
  }

  // The run's records, on a ref under refs/forkflush/ that no branch checkout fetches.

  async loadRun(stateRef: string): Promise<StoredRun | null> {
    const ref = await this.refSha(stateRef);
    if (!ref) return null;
    const [state, files] = await Promise.all([this.readFile('state.json', ref), this.readFile('run.json', ref)]);
    if (state === null || files === null) throw new RecordError(`${stateRef} at ${ref} lacks state.json or run.json`);
    if (this.recordKey) checkSeal(this.recordKey, state, files, `${stateRef} at ${ref.slice(0, 7)}`);
    return {
      state: parseRunState(state, `${stateRef}:state.json`),
      files: parseRunFiles(files, `${stateRef}:run.json`),
      sha: ref,
    };
  }

  /**
   * Writes the run's records as a new commit whose parent is `expected`, then moves the ref only
   * if it still points at `expected` (a fast-forward-only update is a compare-and-swap here).
   */
  async saveRun(
    stateRef: string,
    state: RunState,
    files: RunFiles,
    expected: string | null,
    message: string,
  ): Promise<string> {
    const stateText = recordText(STATE_RECORD, state);
    const stamped = this.release ? { ...files, writtenBy: this.release } : files;
    const filesText = this.recordKey
      ? sealedFiles(this.recordKey, stateText, versioned(RUN_FILES_RECORD, stamped))
      : recordText(RUN_FILES_RECORD, stamped);
    const { data: tree } = await this.octokit.rest.git.createTree({
      ...this.r,
      tree: [
        { path: 'state.json', mode: '100644', type: 'blob', content: stateText },
        { path: 'run.json', mode: '100644', type: 'blob', content: filesText },
      ],
    });
    const { data: commit } = await this.octokit.rest.git.createCommit({
      ...this.r,
      // Unique per save: two handlers saving the same record on the same parent would otherwise
      // make the same commit, and the second's "fast-forward" to it would succeed too, so both
      // would think they had claimed the same work.
      message: `${message}\n\nForkflush-Save: ${randomUUID()}`,
      tree: tree.sha,
      parents: expected ? [expected] : [],
    });
    try {
      if (expected) {
        await this.octokit.rest.git.updateRef({
          ...this.r,
          ref: stateRef.replace(/^refs\//, ''),
          sha: commit.sha,
          force: false,
        });
      } else {
        await this.octokit.rest.git.createRef({ ...this.r, ref: stateRef, sha: commit.sha });
      }
    } catch (e) {
      const refused = status(e) === 422 || status(e) === 409;
      // A try whose answer was lost may have moved the ref (the retry plugin then sent it again and
      // was refused, or gave up): the ref at this very commit is this save, done.
      if (refused || mayHaveLanded(e)) {
        const now = await this.refSha(stateRef).catch(() => null);
        if (now === commit.sha) return commit.sha;
      }
      if (refused) throw new ConflictError(`${stateRef} changed meanwhile`);
      throw e;
    }
    return commit.sha;
  }

  /** The run ids with records in this repository. */
  async listRuns(): Promise<string[]> {
    const { data } = await this.octokit.rest.git.listMatchingRefs({ ...this.r, ref: 'forkflush/' });
    return data.flatMap((d) => {
      const run = parseStateRef(d.ref);
      return run ? [run] : [];
    });
  }

  // The repository.

  /** The default branch, and whether the repository is private (contexts are kept by it). */
  async repository(): Promise<{ defaultBranch: string; private: boolean }> {
    const { data } = await this.octokit.rest.repos.get(this.r);
    return { defaultBranch: data.default_branch, private: data.private };
  }

  async readFile(path: string, ref: string): Promise<string | null> {
    try {
      // The raw media type: the JSON form has no content for a file over 1 MB (a long run's
      // state.json), the raw one gives up to 100 MB. Octokit gives text for GitHub's
      // `application/vnd.github.raw; charset=utf-8`, bytes for a type without a charset; a
      // directory is listed as JSON.
      const { data } = await this.octokit.rest.repos.getContent({ ...this.r, path, ref, mediaType: { format: 'raw' } });
      const raw: unknown = data;
      if (typeof raw === 'string') return raw;
      return raw instanceof ArrayBuffer ? Buffer.from(raw).toString('utf8') : null;
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  /** The user's permission on the repository: admin, maintain, write, triage, read or none. */
  async permission(user: string): Promise<string> {
    try {
      const { data } = await this.octokit.rest.repos.getCollaboratorPermissionLevel({ ...this.r, username: user });
      return (data as { role_name?: string }).role_name ?? data.permission;
    } catch (e) {
      if (status(e) === 404) return 'none';
      throw e;
    }
  }

  // Branches and commits.

  async refSha(ref: string): Promise<string | null> {
    try {
      const { data } = await this.octokit.rest.git.getRef({ ...this.r, ref: ref.replace(/^refs\//, '') });
      return data.object.sha;
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  /** Creates a ref (`refs/...`) at a commit; one that exists already at it is fine (a repeated call). */
  async createRef(ref: string, sha: string): Promise<void> {
    try {
      await this.octokit.rest.git.createRef({ ...this.r, ref, sha });
    } catch (e) {
      // GitHub says 422 for "already exists" and for other refusals alike: only the first is done.
      if (status(e) !== 422 || (await this.refSha(ref)) === null) throw e;
    }
  }

  /** The refs under a prefix (`refs/...`) and their commits, in one call (e.g. one round's). */
  async refHeads(prefix: string): Promise<Map<string, string>> {
    const { data } = await this.octokit.rest.git.listMatchingRefs({ ...this.r, ref: prefix.replace(/^refs\//, '') });
    return new Map(data.map((d) => [d.ref, d.object.sha]));
  }

  /**
   * Moves a ref (`refs/...`) forward to a commit that descends from it. GitHub refuses anything but
   * a fast-forward, so a ref that moved elsewhere meanwhile is never overwritten.
   */
  async fastForward(ref: string, sha: string): Promise<'moved' | 'diverged'> {
    try {
      await this.octokit.rest.git.updateRef({ ...this.r, ref: ref.replace(/^refs\//, ''), sha, force: false });
      return 'moved';
    } catch (e) {
      if (status(e) === 422) return 'diverged';
      throw e;
    }
  }

  /** Points a ref (`refs/...`) at a commit, creating it if needed (the best ref). */
  async setRef(ref: string, sha: string): Promise<void> {
    try {
      await this.octokit.rest.git.updateRef({ ...this.r, ref: ref.replace(/^refs\//, ''), sha, force: true });
      return;
    } catch (e) {
      // GitHub refuses to update a missing ref with 422 (or 404): then it is created.
      if (status(e) !== 422 && status(e) !== 404) throw e;
    }
    await this.createRef(ref, sha);
    // A ref that was there all along refused the update for another reason: not done.
    const now = await this.refSha(ref);
    if (now !== sha) throw new Error(`${ref} could not be moved to ${sha.slice(0, 7)}: it is at ${now?.slice(0, 7)}`);
  }

  /** Deletes a ref (`refs/...`: a context, an episode's ref, a branch); one already gone is fine. */
  async deleteRef(ref: string): Promise<void> {
    try {
      await this.octokit.rest.git.deleteRef({ ...this.r, ref: ref.replace(/^refs\//, '') });
    } catch (e) {
      if (status(e) !== 422 && status(e) !== 404) throw e;
    }
  }

  /** A commit's message, parents and tree. */
  async commit(sha: string): Promise<GitCommit> {
    const { data } = await this.octokit.rest.git.getCommit({ ...this.r, commit_sha: sha });
    return { message: data.message, parents: data.parents.map((p) => p.sha), tree: data.tree.sha };
  }

  /** Every file of a tree (blobs and links), or null when GitHub truncated the listing. */
  async treeFiles(tree: string): Promise<TreeFile[] | null> {
    const { data } = await this.octokit.rest.git.getTree({ ...this.r, tree_sha: tree, recursive: 'true' });
    if (data.truncated) return null;
    return data.tree.flatMap((t) =>
      t.type === 'blob' && t.path && t.mode && t.sha ? [{ path: t.path, mode: t.mode, sha: t.sha }] : [],
    );
  }

  // Pull requests, check runs, issues.

  /**
   * Opens a pull request, or finds the one already made for the same head and base (open, merged
   * or closed: a head gets one pull request, and a closed one is not opened again); null when
   * there is nothing to propose (no commits between base and head, or the head is gone).
   */
  async openPullRequest(
    head: string,
    base: string,
    title: string,
    body: string,
    draft = false,
  ): Promise<number | null> {
    // Looked for first: a handler whose answer was lost, or the one whose claim this handler took
    // over, may have made it, and GitHub refuses a second one only while the first is open.
    const made = await this.findPullRequest(head, base);
    if (made !== null) return made;
    try {
      return await this.createOnce(
        async () => {
          const { data } = await this.octokit.rest.pulls.create({
            ...this.r,
            head,
            base,
            title,
            body,
            ...(draft ? { draft } : {}),
            ...ONCE,
          });
          return data.number;
        },
        () => this.findPullRequest(head, base),
      );
    } catch (e) {
      // One was made meanwhile, or there is nothing to propose. Any other refusal (a body too
      // long, say) is a failure: taken for "nothing to propose", it would leave no pull request.
      if (!nothingToOpen(e)) throw e;
      return this.findPullRequest(head, base);
    }
  }

  /** The pull request from `head` into `base`, the open one first, else the newest; null if none. */
  private async findPullRequest(head: string, base: string): Promise<number | null> {
    const { data } = await this.octokit.rest.pulls.list({
      ...this.r,
      head: `${this.owner}:${head}`,
      base,
      state: 'all',
      per_page: 100,
    });
    const into = data.filter((p) => p.base.ref === base);
    return (into.find((p) => p.state === 'open') ?? into[0])?.number ?? null;
  }

  /** Edits a pull request's title and body (repeat-safe). */
  async editPullRequest(pr: number, title: string, body: string): Promise<void> {
    await this.octokit.rest.pulls.update({ ...this.r, pull_number: pr, title, body });
  }

  /** A pull request's head branch and whether it is open; null when there is none. */
  async pullRequest(pr: number): Promise<{ head: string; open: boolean } | null> {
    try {
      const { data } = await this.octokit.rest.pulls.get({ ...this.r, pull_number: pr });
      return { head: data.head.ref, open: data.state === 'open' };
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  /** Whether the issue is open, and its labels; null when there is none. */
  async issue(issue: number): Promise<{ open: boolean; labels: string[] } | null> {
    try {
      const { data } = await this.octokit.rest.issues.get({ ...this.r, issue_number: issue });
      const labels = data.labels.map((l) => (typeof l === 'string' ? l : (l.name ?? '')));
      return { open: data.state === 'open', labels };
    } catch (e) {
      if (status(e) === 404 || status(e) === 410) return null;
      throw e;
    }
  }

  /**
   * Reacts to a comment (`eyes`: taken; `+1`, `-1`: done or refused). GitHub keeps one reaction of
   * a kind per author, so a repeat is harmless.
   */
  async react(commentId: number, content: Reaction): Promise<void> {
    await this.octokit.rest.reactions.createForIssueComment({ ...this.r, comment_id: commentId, content });
  }

  async closePullRequest(pr: number, comment: string): Promise<void> {
    await this.createComment(pr, comment);
    await this.octokit.rest.pulls.update({ ...this.r, pull_number: pr, state: 'closed' });
  }

  /**
   * Makes a check run: queued or in progress (an episode's when its round is dispatched, the run's
   * own while rounds run), or completed with its conclusion.
   */
  async createCheckRun(args: { sha: string; name: string } & CheckRunFields): Promise<number> {
    return this.createOnce(
      async () => {
        const { data } = await this.octokit.rest.checks.create({
          ...this.r,
          head_sha: args.sha,
          name: args.name,
          ...checkRunBody(args),
          ...ONCE,
        });
        return data.id;
      },
      () => this.findCheckRun(args.sha, args.name, args.externalId),
    );
  }

  /** A check run's status (queued, in_progress, completed), or null when it is gone. */
  async checkRunStatus(id: number): Promise<string | null> {
    try {
      const { data } = await this.octokit.rest.checks.get({ ...this.r, check_run_id: id });
      return data.status;
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  /** Changes a check run (an edit: repeat-safe). False when it is gone. */
  async updateCheckRun(id: number, fields: CheckRunFields): Promise<boolean> {
    try {
      await this.octokit.rest.checks.update({ ...this.r, check_run_id: id, ...checkRunBody(fields) });
      return true;
    } catch (e) {
      if (status(e) === 404) return false;
      throw e;
    }
  }

  /** The id of a check run with this name on a commit (and this external id, when given), if there is one. */
  async findCheckRun(sha: string, name: string, externalId?: string): Promise<number | null> {
    const { data } = await this.octokit.rest.checks.listForRef({
      ...this.r,
      ref: sha,
      check_name: name,
      filter: 'all',
    });
    return data.check_runs.find((c) => externalId === undefined || c.external_id === externalId)?.id ?? null;
  }

  /**
   * Edits forkflush's status comment on an issue, or writes it; returns its id. `body` starts with
   * `marker`. Without a known id (a run's first sync, or one whose record save was lost after the
   * comment was written), the issue's comments are searched for forkflush's one first: once per
   * run, through all of the issue's comments. A 404 is not taken on its word (a proxy can say it
   * after the edit was made): the comments are searched again, and only a comment that is gone
   * is written anew. One this token may not edit (403: another app's, whose text happened to start
   * with the marker) is passed over.
   */
  async upsertComment(issue: number, commentId: number | null, body: string, marker: string): Promise<number> {
    const refused = new Set<number>();
    let id = commentId ?? (await this.findMarkedComment(issue, marker, refused));
    let searched = commentId === null;
    while (id !== null) {
      try {
        await this.octokit.rest.issues.updateComment({ ...this.r, comment_id: id, body });
        return id;
      } catch (e) {
        if (status(e) === 403) refused.add(id);
        else if (status(e) !== 404 || searched) throw e;
      }
      id = await this.findMarkedComment(issue, marker, refused);
      searched = true;
    }
    return this.createComment(issue, body);
  }

  /**
   * The oldest comment by a bot on the issue that starts with `marker` (and is not one of
   * `passedOver`): forkflush's status comment starts with it, and a comment that only quotes it
   * (a person's, another bot's) does not.
   */
  private async findMarkedComment(issue: number, marker: string, passedOver: Set<number>): Promise<number | null> {
    const comments = await this.octokit.paginate(this.octokit.rest.issues.listComments, {
      ...this.r,
      issue_number: issue,
      per_page: 100,
    });
    return (
      comments.find((c) => c.user?.type === 'Bot' && c.body?.startsWith(marker) && !passedOver.has(c.id))?.id ?? null
    );
  }

  async comment(issue: number, body: string): Promise<void> {
    await this.createComment(issue, body);
  }

  /**
   * Writes a comment once: after a failure that may hide a success, the comment is looked for among
   * the issue's comments by forkflush (a bot) with the same body, updated since a little before the
   * first try (CLOCK_SLACK_MS: the app's clock and GitHub's may differ).
   */
  private async createComment(issue: number, body: string): Promise<number> {
    // GitHub's own format: whole seconds, UTC.
    const since = new Date(Date.now() - CLOCK_SLACK_MS).toISOString().replace(/\.\d+Z$/, 'Z');
    return this.createOnce(
      async () => {
        const { data } = await this.octokit.rest.issues.createComment({
          ...this.r,
          issue_number: issue,
          body,
          ...ONCE,
        });
        return data.id;
      },
      () => this.findComment(issue, body, since),
    );
  }

  /**
   * The oldest comment by a bot on the issue with exactly this body, updated since `since`. A
   * person's comment is never taken for it. Another bot's with the very same text within minutes
   * is: in Actions mode every workflow writes as github-actions[bot], and the same reply from
   * another instance of this app (a doubled delivery) is the comment not to write twice.
   */
  private async findComment(issue: number, body: string, since: string): Promise<number | null> {
    const comments = await this.octokit.paginate(this.octokit.rest.issues.listComments, {
      ...this.r,
      issue_number: issue,
      since,
      per_page: 100,
    });
    return comments.find((c) => c.user?.type === 'Bot' && c.body === body)?.id ?? null;
  }

  async addLabel(issue: number, label: string): Promise<void> {
    await this.octokit.rest.issues.addLabels({ ...this.r, issue_number: issue, labels: [label] });
  }

  async removeLabel(issue: number, label: string): Promise<void> {
    try {
      await this.octokit.rest.issues.removeLabel({ ...this.r, issue_number: issue, name: label });
    } catch (e) {
      if (status(e) !== 404) throw e;
    }
  }

  // Actions.

  /**
   * Dispatches the workflow once; returns the id of the run it started, when GitHub says (it does
   * with return_run_details; an older GitHub answers 204 and no id), so that only that run's
   * events may end the round. After an answer that may have been lost, a run not yet completed
   * with the round's title (GitHub creates a dispatched run at once) is the one this made.
   */
  async dispatchWorkflow(workflow: string, ref: string, inputs: Record<string, string>): Promise<number | null> {
    const title =
      inputs.run !== undefined && inputs.round !== undefined ? roundRunTitle(inputs.run, Number(inputs.round)) : null;
    const started = await this.createOnce(
      async () => {
        const { data } = await this.octokit.rest.actions.createWorkflowDispatch({
          ...this.r,
          workflow_id: workflow,
          ref,
          inputs,
          return_run_details: true,
          ...ONCE,
        } as Parameters<Octokit['rest']['actions']['createWorkflowDispatch']>[0]);
        const id = (data as { workflow_run_id?: unknown } | undefined)?.workflow_run_id;
        return { id: typeof id === 'number' ? id : null };
      },
      async () => {
        if (title === null) return null;
        const live = (await this.runsTitled(workflow, title)).find((w) => w.status !== 'completed');
        return live ? { id: live.id } : null;
      },
    );
    return started.id;
  }

  /** The newest run of the workflow with this title that was not cancelled (a dispatch taken over). */
  async liveRunId(workflow: string, title: string): Promise<number | null> {
    return (await this.runsTitled(workflow, title)).find((w) => w.conclusion !== 'cancelled')?.id ?? null;
  }

  /** The workflow's dispatched runs with this title, among its 100 newest. */
  async runsTitled(workflow: string, title: string): Promise<WorkflowRun[]> {
    const { data } = await this.octokit.rest.actions.listWorkflowRuns({
      ...this.r,
      workflow_id: workflow,
      event: 'workflow_dispatch',
      per_page: 100,
    });
    return data.workflow_runs.filter((w) => w.display_title === title);
  }

  /** Cancels the workflow's runs still queued or in progress whose title names the run. */
  async cancelRuns(workflow: string, run: string): Promise<number> {
    let cancelled = 0;
    // Waiting and pending runs sit in a concurrency group or before an environment: stop them too.
    for (const state of ['queued', 'in_progress', 'waiting', 'pending'] as const) {
      const { data } = await this.octokit.rest.actions.listWorkflowRuns({
        ...this.r,
        workflow_id: workflow,
        status: state,
        per_page: 100,
      });
      for (const w of data.workflow_runs) {
        if (!isRoundRunOf(w.display_title ?? '', run)) continue;
        try {
          await this.octokit.rest.actions.cancelWorkflowRun({ ...this.r, run_id: w.id });
          cancelled++;
        } catch (e) {
          if (status(e) !== 409) throw e;
        }
      }
    }
    return cancelled;
  }

  /**
   * Enables or disables a workflow (Actions mode's tick, which runs only while a run needs it).
   * False when the repository has no such workflow.
   */
  async setWorkflowEnabled(workflow: string, enabled: boolean): Promise<boolean> {
    try {
      const args = { ...this.r, workflow_id: workflow };
      if (enabled) await this.octokit.rest.actions.enableWorkflow(args);
      else await this.octokit.rest.actions.disableWorkflow(args);
      return true;
    } catch (e) {
      if (status(e) === 404) return false;
      throw e;
    }
  }

  /**
   * A create GitHub has no idempotency key for, sent with the retry plugin off (ONCE). After a
   * failure that may hide a success (a server error, a lost connection) it pauses, then `find`
   * looks for what the try made before the next try; any other failure is GitHub's answer.
   */
  private async createOnce<T>(create: () => Promise<T>, find: () => Promise<T | null>): Promise<T> {
    for (let tries = 1; ; tries++) {
      let failure: unknown;
      try {
        return await create();
      } catch (e) {
        if (!mayHaveLanded(e)) throw e;
        failure = e;
      }
      await sleep(GitHubForge.retryAfterBaseMs * tries ** 2);
      const found = await find();
      if (found !== null) return found;
      if (tries >= CREATE_TRIES) throw failure;
    }
  }
}
