// The local forge: branches and worktrees in the user's repository, contexts in the run folder.
// Every operation is safe to repeat after a crash at any point.
import { cp, mkdir, rm, stat } from 'node:fs/promises';
import { parseCommitMessage } from '../core/journal.js';
import { bestBranch, episodeBranch, lineageBranch } from '../core/names.js';
import type { Episode, EpisodeResult, Round, RunState } from '../core/state.js';
import { Git } from '../io/git.js';
import type { RunStore } from './store.js';

export class LocalForge {
  readonly git: Git;
  /** git's worktree bookkeeping is not safe to change from two processes at once. */
  private worktreeLock: Promise<unknown> = Promise.resolve();

  constructor(
    readonly repo: string,
    readonly store: RunStore,
  ) {
    this.git = new Git(repo);
  }

  ref(branch: string): string {
    return `refs/heads/${branch}`;
  }

  /** Creates the lineage branches at the base commit (idempotent). */
  async createLineages(state: RunState): Promise<void> {
    for (const l of state.lineages) {
      const ref = this.ref(lineageBranch(state.id, l.index, state.lineages.length));
      if ((await this.git.revParse(ref)) === null) await this.git.casRef(ref, l.head, null, 'forkflush: new lineage');
    }
  }

  /**
   * The result of an episode whose commit landed but whose result was not saved (a crash between
   * the two), read back from the commit on its branch.
   */
  async recoverResult(state: RunState, e: Episode): Promise<EpisodeResult | null> {
    const ref = this.ref(episodeBranch(state.id, e.round, e.branch));
    const head = await this.git.revParse(ref);
    if (!head || head === e.base) return null;
    const message = await this.git.out(['log', '-1', '--format=%B', head]);
    const parsed = parseCommitMessage(message, head);
    return parsed && parsed.runId === state.id && parsed.episode === e.id ? parsed.result : null;
  }

  /** A clean checkout of the episode's base on its branch, and its context folder. */
  async prepareEpisode(
    state: RunState,
    e: Episode,
  ): Promise<{ workdir: string; contextDir: string; branchRef: string }> {
    const workdir = this.store.worktree(e.id);
    const branch = episodeBranch(state.id, e.round, e.branch);
    await this.locked(async () => {
      await this.removeWorktree(workdir);
      // Parallel checkout (one worker per core) makes forking a large repository several times faster.
      await this.git.exec(['-c', 'checkout.workers=0', 'worktree', 'add', '--quiet', '-B', branch, workdir, e.base]);
    });
    const contextDir = this.store.context(e.id);
    await rm(contextDir, { recursive: true, force: true });
    if (e.contextFrom) {
      const from = this.store.context(e.contextFrom);
      // Carried and copied contexts are copies: a failed episode never damages its parent's context.
      if (await exists(from)) await cp(from, contextDir, { recursive: true });
    }
    await mkdir(contextDir, { recursive: true });
    await rm(this.store.scratch(e.id), { recursive: true, force: true });
    return { workdir, contextDir, branchRef: this.ref(branch) };
  }

  /**
   * Moves each adopted episode's lineage from the round's base to the episode's commit: a
   * compare-and-swap, so a replayed decision moves nothing twice.
   */
  async adopt(state: RunState, round: Round, adopted: string[]): Promise<void> {
    for (const e of round.episodes) {
      if (!adopted.includes(e.id) || !e.result) continue;
      const ref = this.ref(lineageBranch(state.id, e.lineage, state.lineages.length));
      if (await this.git.casRef(ref, e.result.commit, e.base, `forkflush: adopt ${e.id}`)) continue;
      const now = await this.git.revParse(ref);
      if (now !== e.result.commit) {
        throw new Error(
          `the lineage branch ${ref} moved outside forkflush (expected ${e.base.slice(0, 10)}, found ${now?.slice(0, 10)}); ` +
            'reset it to one of those commits and resume',
        );
      }
    }
  }

  /** After a decision: worktrees go; branches go too, except rejected ones when asked to keep them. */
  async cleanupRound(state: RunState, round: Round, keepRejected: boolean): Promise<void> {
    const adopted = round.decision?.adopted ?? [];
    for (const e of round.episodes) {
      await this.locked(() => this.removeWorktree(this.store.worktree(e.id)));
      if (keepRejected && !adopted.includes(e.id)) continue;
      await this.git.exec(['branch', '-D', episodeBranch(state.id, e.round, e.branch)], { check: false });
    }
  }

  async setBest(state: RunState): Promise<void> {
    if (state.best)
      await this.git.setRef(this.ref(bestBranch(state.id)), state.best.commit, `forkflush: best ${state.best.episode}`);
  }

  /** A throwaway checkout of a commit (to grade the initial workspace). */
  async withCheckout<T>(commit: string, name: string, fn: (dir: string) => Promise<T>): Promise<T> {
    const dir = this.store.worktree(name);
    await this.locked(async () => {
      await this.removeWorktree(dir);
      await this.git.exec(['-c', 'checkout.workers=0', 'worktree', 'add', '--quiet', '--detach', dir, commit]);
    });
    try {
      return await fn(dir);
    } finally {
      await this.locked(() => this.removeWorktree(dir));
    }
  }

  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.worktreeLock.then(fn, fn);
    this.worktreeLock = next.catch(() => {});
    return next;
  }

  /** Removes a worktree, also one a crash left half made; call it under the lock. */
  private async removeWorktree(dir: string): Promise<void> {
    if (!(await exists(dir))) return;
    await this.git.exec(['worktree', 'remove', '--force', '--force', dir], { check: false });
    await rm(dir, { recursive: true, force: true });
    await this.git.exec(['worktree', 'prune'], { check: false });
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
