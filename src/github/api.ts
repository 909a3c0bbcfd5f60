// The one door to GitHub's API for a repository: every call forkflush makes goes through here.
// This file holds the run's records and git (refs, commits, trees, files); the conversation
// (issues.ts, pulls.ts), check runs (checks.ts) and workflow runs (workflows.ts) are its parts, and
// requests.ts says how requests are sent (retries, creates made once). Methods are safe to repeat:
// "already exists" and "already gone" count as done.
import { randomUUID } from 'node:crypto';
import { TREE_WALK_MAX_LISTINGS } from '../core/bounds.js';
import { GITHUB_RUN_RECORD, type GitHubRunRecord, parseGitHubRunRecord } from '../core/github-run-record.js';
import { mayHoldMatch } from '../core/globs.js';
import { parseStateRef } from '../core/names.js';
import { parseRunState, RecordError, recordText, STATE_RECORD, versioned } from '../core/records.js';
import type { RunState } from '../core/state.js';
import { CheckRuns } from './checks.js';
import { Issues } from './issues.js';
import { PullRequests } from './pulls.js';
import { checkSeal, repositoryKey, sealedFiles } from './record-seal.js';
import { ConflictError, mayHaveLanded, type Octokit, RepoScope, status } from './requests.js';
import { Workflows } from './workflows.js';

export type { GitHubRunRecord };

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

/** The repository as read once per handler (GithubApi.repositoryNow). */
interface RepositoryNow {
  id: number;
  fullName: string;
  defaultBranch: string;
  private: boolean;
}

export interface StoredRun {
  state: RunState;
  files: GitHubRunRecord;
  /** The state ref's commit: the expected value of the next compare-and-swap. */
  sha: string;
}

export class GitHubApi {
  /** Seals the run records this API writes, and refuses those it reads without the seal (recordKeys). */
  private readonly recordKey: Buffer | null;
  private keys: Promise<{ seal: Buffer; accepted: Buffer[] }> | null = null;
  private readonly scope: RepoScope;
  readonly checks: CheckRuns;
  readonly issues: Issues;
  readonly pulls: PullRequests;
  readonly workflows: Workflows;

  /**
   * `recordKey` seals the run records; `release` is the forkflush release of the app, written into
   * each record it saves (GitHubRunRecord.writtenBy); `repositoryId`, where the event says it (else
   * read once), keys the seal to the repository.
   */
  constructor(
    readonly octokit: Octokit,
    readonly owner: string,
    readonly repo: string,
    recordKey: Buffer | null = null,
    readonly release: string | null = null,
    private readonly repositoryId: number | null = null,
  ) {
    this.recordKey = recordKey;
    this.scope = new RepoScope(octokit, owner, repo);
    this.checks = new CheckRuns(this.scope);
    this.issues = new Issues(this.scope, async () => (await this.repositoryNow()).fullName);
    this.pulls = new PullRequests(this.scope, this.issues);
    this.workflows = new Workflows(this.scope);
  }

  /** Whether the run records are sealed (the app has a key). */
  get sealsRecords(): boolean {
    return this.recordKey !== null;
  }

  /** The repository's keys: the one that seals (by its id), and those a record may be sealed with. */
  private recordKeys(secret: Buffer): Promise<{ seal: Buffer; accepted: Buffer[] }> {
    this.keys ??= (async () => {
      const id = this.repositoryId ?? (await this.repositoryNow()).id;
      const seal = repositoryKey(secret, { id });
      return { seal, accepted: [seal, repositoryKey(secret, { byName: `${this.owner}/${this.repo}` })] };
    })();
    return this.keys;
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
    if (this.recordKey)
      checkSeal((await this.recordKeys(this.recordKey)).accepted, state, files, `${stateRef} at ${ref.slice(0, 7)}`);
    return {
      state: parseRunState(state, `${stateRef}:state.json`),
      files: parseGitHubRunRecord(files, `${stateRef}:run.json`),
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
    files: GitHubRunRecord,
    expected: string | null,
    message: string,
  ): Promise<string> {
    const stateText = recordText(STATE_RECORD, state);
    const stamped = this.release ? { ...files, writtenBy: this.release } : files;
    const filesText = this.recordKey
      ? sealedFiles((await this.recordKeys(this.recordKey)).seal, stateText, versioned(GITHUB_RUN_RECORD, stamped))
      : recordText(GITHUB_RUN_RECORD, stamped);
    const { data: tree } = await this.octokit.rest.git.createTree({
      ...this.scope.r,
      tree: [
        { path: 'state.json', mode: '100644', type: 'blob', content: stateText },
        { path: 'run.json', mode: '100644', type: 'blob', content: filesText },
      ],
    });
    const { data: commit } = await this.octokit.rest.git.createCommit({
      ...this.scope.r,
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
          ...this.scope.r,
          ref: stateRef.replace(/^refs\//, ''),
          sha: commit.sha,
          force: false,
        });
      } else {
        await this.octokit.rest.git.createRef({ ...this.scope.r, ref: stateRef, sha: commit.sha });
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
    const { data } = await this.octokit.rest.git.listMatchingRefs({ ...this.scope.r, ref: 'forkflush/' });
    return data.flatMap((d) => {
      const run = parseStateRef(d.ref);
      return run ? [run] : [];
    });
  }

  // The repository.

  private repositoryRead: Promise<RepositoryNow> | null = null;

  /**
   * The repository as it is now, read once per handler: its id (the seal's key), its default
   * branch (a person may rename it mid-run, main -> trunk, and a dispatch or pull request on the
   * name the run started with is refused for good), and whether it is private (contexts are kept by it).
   */
  private repositoryNow(): Promise<RepositoryNow> {
    this.repositoryRead ??= this.octokit.rest.repos.get(this.scope.r).then(
      ({ data }) => ({
        id: data.id,
        fullName: data.full_name,
        defaultBranch: data.default_branch,
        private: data.private,
      }),
      (e: unknown) => {
        this.repositoryRead = null;
        throw e;
      },
    );
    return this.repositoryRead;
  }

  /** The default branch, and whether the repository is private. */
  async repository(): Promise<{ defaultBranch: string; private: boolean }> {
    const { defaultBranch, private: isPrivate } = await this.repositoryNow();
    return { defaultBranch, private: isPrivate };
  }

  /** The default branch as it is now (repositoryNow()). */
  async defaultBranch(): Promise<string> {
    return (await this.repository()).defaultBranch;
  }

  async readFile(path: string, ref: string): Promise<string | null> {
    try {
      // The raw media type: the JSON form has no content for a file over 1 MB (a long run's
      // state.json), the raw one gives up to 100 MB. Octokit gives text for GitHub's
      // `application/vnd.github.raw; charset=utf-8`, bytes for a type without a charset; a
      // directory is listed as JSON.
      const { data } = await this.octokit.rest.repos.getContent({
        ...this.scope.r,
        path,
        ref,
        mediaType: { format: 'raw' },
      });
      const raw: unknown = data;
      if (typeof raw === 'string') return raw;
      return raw instanceof ArrayBuffer ? Buffer.from(raw).toString('utf8') : null;
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  /** Whether the commit at `ref` has a file or folder at `path`. */
  async exists(path: string, ref: string): Promise<boolean> {
    try {
      await this.octokit.rest.repos.getContent({ ...this.scope.r, path, ref });
      return true;
    } catch (e) {
      if (status(e) === 404) return false;
      throw e;
    }
  }

  /** The user's permission on the repository: admin, maintain, write, triage, read or none. */
  async permission(user: string): Promise<string> {
    try {
      const { data } = await this.octokit.rest.repos.getCollaboratorPermissionLevel({
        ...this.scope.r,
        username: user,
      });
      return (data as { role_name?: string }).role_name ?? data.permission;
    } catch (e) {
      if (status(e) === 404) return 'none';
      throw e;
    }
  }

  // Branches and commits.

  async refSha(ref: string): Promise<string | null> {
    try {
      const { data } = await this.octokit.rest.git.getRef({ ...this.scope.r, ref: ref.replace(/^refs\//, '') });
      return data.object.sha;
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  /** Creates a ref (`refs/...`) at a commit; one that exists already at it is fine (a repeated call). */
  async createRef(ref: string, sha: string): Promise<void> {
    try {
      await this.octokit.rest.git.createRef({ ...this.scope.r, ref, sha });
    } catch (e) {
      // GitHub says 422 for "already exists" and for other refusals alike: only the first is done.
      if (status(e) !== 422 || (await this.refSha(ref)) === null) throw e;
    }
  }

  /** The refs under a prefix (`refs/...`) and their commits, in one call (e.g. one round's). */
  async refHeads(prefix: string): Promise<Map<string, string>> {
    const { data } = await this.octokit.rest.git.listMatchingRefs({
      ...this.scope.r,
      ref: prefix.replace(/^refs\//, ''),
    });
    return new Map(data.map((d) => [d.ref, d.object.sha]));
  }

  /**
   * Moves a ref (`refs/...`) forward to a commit that descends from it. GitHub refuses anything but
   * a fast-forward, so a ref that moved elsewhere meanwhile (or was deleted) is never overwritten.
   * Any other refusal (a ruleset's "Repository rule violations found") is thrown as GitHub said it.
   */
  async fastForward(ref: string, sha: string): Promise<'moved' | 'diverged'> {
    try {
      await this.octokit.rest.git.updateRef({ ...this.scope.r, ref: ref.replace(/^refs\//, ''), sha, force: false });
      return 'moved';
    } catch (e) {
      const said = e instanceof Error ? e.message : '';
      if (status(e) === 422 && /not a fast.?forward|reference does not exist/i.test(said)) return 'diverged';
      throw e;
    }
  }

  /** Points a ref (`refs/...`) at a commit, creating it if needed (the best ref). */
  async setRef(ref: string, sha: string): Promise<void> {
    try {
      await this.octokit.rest.git.updateRef({ ...this.scope.r, ref: ref.replace(/^refs\//, ''), sha, force: true });
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
      await this.octokit.rest.git.deleteRef({ ...this.scope.r, ref: ref.replace(/^refs\//, '') });
    } catch (e) {
      if (status(e) !== 422 && status(e) !== 404) throw e;
    }
  }

  /** A commit's message, parents and tree. */
  async commit(sha: string): Promise<GitCommit> {
    const { data } = await this.octokit.rest.git.getCommit({ ...this.scope.r, commit_sha: sha });
    return { message: data.message, parents: data.parents.map((p) => p.sha), tree: data.tree.sha };
  }

  /**
   * Every file of a tree (blobs and links), or null when it cannot be listed whole. GitHub truncates
   * a recursive listing past 100,000 entries: with `globs`, the files they can match are then listed
   * folder by folder, into the folders that may hold one only (TREE_WALK_MAX_LISTINGS at most).
   */
  async treeFiles(tree: string, globs?: readonly string[]): Promise<TreeFile[] | null> {
    const whole = await this.listTree(tree, true, '');
    if (!whole.truncated) return whole.files;
    if (!globs) return null;
    const files: TreeFile[] = [];
    let listings = 1;
    // A folder whole if GitHub lists it so, else one level and into its folders that may hold a match.
    const walk = async (sha: string, prefix: string, tryWhole: boolean): Promise<boolean> => {
      if (tryWhole) {
        if (++listings > TREE_WALK_MAX_LISTINGS) return false;
        const deep = await this.listTree(sha, true, prefix);
        if (!deep.truncated) {
          files.push(...deep.files);
          return true;
        }
      }
      if (++listings > TREE_WALK_MAX_LISTINGS) return false;
      const level = await this.listTree(sha, false, prefix);
      if (level.truncated) return false;
      files.push(...level.files);
      for (const d of level.folders)
        if (mayHoldMatch(d.path, globs) && !(await walk(d.sha, `${d.path}/`, true))) return false;
      return true;
    };
    return (await walk(tree, '', false)) ? files : null;
  }

  /** One listing of a tree: its files and (not recursive) its folders, their paths under `prefix`. */
  private async listTree(tree: string, recursive: boolean, prefix: string) {
    const { data } = await this.octokit.rest.git.getTree({
      ...this.scope.r,
      tree_sha: tree,
      ...(recursive ? { recursive: 'true' } : {}),
    });
    const files: TreeFile[] = [];
    const folders: { path: string; sha: string }[] = [];
    for (const t of data.tree) {
      if (!t.path || !t.sha) continue;
      if (t.type === 'blob' && t.mode) files.push({ path: `${prefix}${t.path}`, mode: t.mode, sha: t.sha });
      else if (t.type === 'tree' && !recursive) folders.push({ path: `${prefix}${t.path}`, sha: t.sha });
    }
    return { files, folders, truncated: data.truncated };
  }
}
