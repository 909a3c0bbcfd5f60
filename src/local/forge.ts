// The local forge: branches in the user's repository, workspaces, contexts and boxes in the run
// folder. Every operation is safe to repeat after a crash at any point. forkflush writes the
// repository's objects and refs itself; an agent sees only its workspace, whose .git is its own.
import { cp, mkdir, readFile, realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { GIT_OUTPUT_MAX_CHARS } from '../core/bounds.js';
import { resultFromCommit } from '../core/journal.js';
import { journalWindow } from '../core/losers.js';
import { bestBranch, episodeBranch, lineageBranch } from '../core/names.js';
import { allEpisodes, type Episode, type EpisodeResult, type Round, type RunState } from '../core/state.js';
import { type ForgeWork, lineageMovedOutsideProblem } from '../core/work.js';
import { CONTEXT_LIMITS, cleanAgentFolder, removeTree } from '../io/agent-files.js';
import { Git } from '../io/git.js';
import type { EpisodePlaces } from '../worker/boundary.js';
import { type CheckoutIndex, checkoutInto, OwnRepo } from '../worker/cleanroom.js';
import { DiskFullError, diskFull } from '../worker/episode-errors.js';
import { verifySeal } from '../worker/seal.js';
import { dropRoundObjects, linkObjects, type RoundObjects, roundObjects } from './round-objects.js';
import type { RunStore } from './store.js';

/** In the run folder: each running round's view of the repository's objects. */
const ROUND_OBJECTS = 'round-objects';

export interface PreparedEpisode {
  own: OwnRepo;
  places: EpisodePlaces;
  checkoutIndex: string;
  scratchDir: string;
  branchRef: string;
  /** What the result should say about the preparation (a context that could not be copied). */
  notes: string[];
}

export class LocalForge implements ForgeWork {
  readonly git: Git;
  private opened: Promise<{ own: OwnRepo; commonDir: string; alternates: string[] }> | undefined;
  private readonly rounds = new Map<number, Promise<RoundObjects>>();

  constructor(
    readonly repo: string,
    readonly store: RunStore,
    /** Keep the branches of rejected episodes (--keep-rejected). */
    readonly keepRejected = false,
  ) {
    this.git = new Git(repo);
  }

  ref(branch: string): string {
    return `refs/heads/${branch}`;
  }

  /** forkflush's own git directory for the run, over the repository's objects (also the map's checkouts). */
  open() {
    this.opened ??= (async () => {
      const common = await this.git.out(['rev-parse', '--git-common-dir']);
      const commonDir = await realpath(isAbsolute(common) ? common : resolve(this.repo, common));
      const objects = join(commonDir, 'objects');
      // A repository cloned with --shared reads objects from elsewhere: those must stay readable too.
      const alternates = (await readFile(join(objects, 'info', 'alternates'), 'utf8').catch(() => ''))
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '' && !l.startsWith('#'))
        .map((l) => (isAbsolute(l) ? l : resolve(objects, l)));
      return { own: await OwnRepo.open(this.store.path('git'), objects), commonDir, alternates };
    })();
    return this.opened;
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
   * the two), read back from the commit on its branch: only if forkflush made that commit (its
   * seal holds) on the episode's base.
   */
  async recoverResult(state: RunState, e: Episode, sealKey: Buffer | null): Promise<EpisodeResult | null> {
    const ref = this.ref(episodeBranch(state.id, e.round, e.branch));
    const head = await this.git.revParse(ref);
    if (!head || head === e.base || !sealKey) return null;
    const [tree, parents, ...rest] = (await this.git.out(['log', '-1', '--format=%T%n%P%n%B', head])).split('\n');
    const message = `${rest.join('\n').trimEnd()}\n`;
    const read = resultFromCommit(state.id, e, { sha: head, message, parents: (parents ?? '').split(' ') });
    if (!('result' in read) || !tree || !verifySeal(sealKey, message, tree, e.base)) return null;
    return read.result;
  }

  /** The losers' notes' window of `path` at a commit ('' when it has none, or one larger than git's output bound). */
  async journalAt(commit: string, path: string): Promise<string> {
    const { own } = await this.open();
    const spec = `${commit}:${path}`;
    const type = await own.exec(['cat-file', '-t', spec], { check: false });
    if (type.exitCode !== 0 || type.stdout.trim() !== 'blob') return '';
    // Read whole, as GitHub's API serves it, for its last part (journalWindow): a journal past
    // commitResult's 16 MiB still has a loser's last entries.
    if (!(Number(await own.out(['cat-file', '-s', spec])) <= GIT_OUTPUT_MAX_CHARS)) return '';
    return journalWindow((await own.exec(['cat-file', 'blob', spec])).stdout);
  }

  /** A fresh checkout of the episode's base, its context folder, and the places of its sandbox. */
  async prepareEpisode(state: RunState, e: Episode): Promise<PreparedEpisode> {
    const { own, commonDir, alternates } = await this.open();
    const workspace = this.store.workspace(e.id);
    const scratchDir = this.store.scratch(e.id);
    const branch = episodeBranch(state.id, e.round, e.branch);
    await removeTree(scratchDir);
    const checkoutIndex = join(scratchDir, 'checkout.index');
    const borrowed = await this.roundObjects(state, e.round);
    const objects = 'dir' in borrowed ? borrowed.dir : own.objects;
    await checkoutInto(own, e.base, workspace, checkoutIndex, branch, objects);
    const context = this.store.context(e.id);
    await removeTree(context);
    const notes = 'note' in borrowed ? [borrowed.note] : [];
    if (e.contextFrom) {
      const from = this.store.context(e.contextFrom);
      // Carried and copied contexts are copies: a failed episode never damages its parent's context.
      // A context that cannot be copied starts the episode fresh, never stops the run, unless the
      // disk is full: that stops the run (told before the part copy goes, which frees the space).
      if (await exists(from)) {
        await cleanAgentFolder(from, CONTEXT_LIMITS);
        await cp(from, context, { recursive: true, verbatimSymlinks: true }).catch(async (err: Error) => {
          const full = await diskFull(err, [this.store.path()]);
          await removeTree(context);
          if (full) throw new DiskFullError(`${e.contextFrom}'s context could not be copied for ${e.id}: ${full}`, 0);
          notes.push(
            `${e.contextFrom}'s context could not be copied (${err.message}): this episode started with an empty context`,
          );
        });
      }
      await cleanAgentFolder(context, CONTEXT_LIMITS);
    }
    await mkdir(context, { recursive: true });
    const places: EpisodePlaces = {
      workspace,
      context,
      box: join(scratchDir, 'box'),
      objects: [objects, ...alternates],
      // The repository (its other files, its .git) and every run's folder.
      private: [this.repo, commonDir, dirname(this.store.dir)],
    };
    return { own, places, checkoutIndex, scratchDir, branchRef: this.ref(branch), notes };
  }

  /** The objects a round's workspaces borrow: the repository's as the round began (round-objects.ts). */
  private async roundObjects(state: RunState, round: number): Promise<RoundObjects> {
    const { own } = await this.open();
    let made = this.rounds.get(round);
    if (!made) {
      const episodes = state.rounds[round]?.episodes ?? [];
      const begun = episodes.some((e) => e.result || e.interruptedSpent !== undefined || e.unfinishedStarts);
      // Begun without a view, its siblings' work is among the objects, loose or packed (a gc since):
      // a pack of what the round's bases reach holds none of it.
      const bases = [...new Set(episodes.map((e) => e.base))];
      const packBases = async (dir: string) => {
        await mkdir(join(dir, 'pack'), { recursive: true });
        await own.exec(['pack-objects', '--revs', '--quiet', join(dir, 'pack', 'pack')], {
          input: `${bases.join('\n')}\n`,
        });
      };
      made = roundObjects(this.store.path(ROUND_OBJECTS), round, begun ? packBases : linkObjects(own.objects));
      this.rounds.set(round, made);
    }
    return made;
  }

  /**
   * Moves an episode's branch from the result it held back to the episode's base, for an episode
   * that runs again (one that stopped the run, retried on resume: core/stop.ts, retryStopped).
   * A branch at anything else is left alone.
   */
  async reopenEpisode(state: RunState, e: Episode): Promise<void> {
    if (!e.result) return;
    const ref = this.ref(episodeBranch(state.id, e.round, e.branch));
    await this.mayMove([ref]);
    await this.git.casRef(ref, e.base, e.result.commit, `forkflush: ${e.id} runs again`);
  }

  /** Points the episode's branch at its result commit (made by forkflush, on the episode's base). */
  async recordResult(prepared: PreparedEpisode, commit: string, reason: string): Promise<void> {
    await this.mayMove([prepared.branchRef]);
    await this.git.setRef(prepared.branchRef, commit, reason);
  }

  // The core's work items (core/work.ts), carried out on the repository's refs. Each is safe to
  // repeat: a resumed run carries the work of decided rounds out again, and nothing moves twice.

  /** The round's branches, at their bases (its episodes are run by the runner). */
  async openRound(state: RunState, round: Round): Promise<void> {
    for (const e of round.episodes) {
      const ref = this.ref(episodeBranch(state.id, e.round, e.branch));
      if (!e.result && (await this.git.revParse(ref)) === null)
        await this.git.casRef(ref, e.base, null, 'forkflush: round');
    }
  }

  /** Nothing more to do: an episode's branch points at its result from the moment it is recorded. */
  async publishResult(): Promise<void> {}

  /**
   * Moves each adopted episode's lineage from the round's base to the episode's commit (a
   * compare-and-swap, so a replayed decision moves nothing twice); then workspaces go, and the
   * rejected episodes' branches and contexts too, unless asked to keep them (a later episode only
   * ever continues an adopted one).
   */
  async settleRound(state: RunState, round: Round): Promise<void> {
    const adopted = round.decision?.adopted ?? [];
    await this.mayMove(
      round.episodes.flatMap((e) => [
        this.ref(lineageBranch(state.id, e.lineage, state.lineages.length)),
        this.ref(episodeBranch(state.id, e.round, e.branch)),
      ]),
    );
    for (const e of round.episodes) {
      if (!adopted.includes(e.id) || !e.result) continue;
      const branch = lineageBranch(state.id, e.lineage, state.lineages.length);
      if (await this.git.casRef(this.ref(branch), e.result.commit, e.base, `forkflush: adopt ${e.id}`)) continue;
      const problem = lineageMovedOutsideProblem(state, round, e, await this.git.revParse(this.ref(branch)), branch);
      if (problem) throw new Error(problem);
    }
    this.rounds.delete(round.index);
    await dropRoundObjects(this.store.path(ROUND_OBJECTS), round.index);
    for (const e of round.episodes) {
      await removeTree(this.store.workspace(e.id));
      if (this.keepRejected && !adopted.includes(e.id)) continue;
      await this.git.deleteRef(this.ref(episodeBranch(state.id, e.round, e.branch)));
      if (!adopted.includes(e.id)) await removeTree(this.store.context(e.id));
    }
    if (!this.keepRejected) await this.dropSupersededContexts(state, round);
  }

  /**
   * The contexts of settled episodes nothing continues any more: a lineage carries or copies the
   * whole conversation on, so once it continues from a later episode, the earlier copy is only
   * disk (each carried context holds all of the one before it).
   */
  private async dropSupersededContexts(state: RunState, round: Round): Promise<void> {
    const needed = new Set(state.lineages.flatMap((l) => (l.context ? [l.context] : [])));
    for (const e of allEpisodes(state)) if (!e.result) for (const id of [e.id, e.contextFrom]) if (id) needed.add(id);
    for (const r of state.rounds.slice(0, round.index + 1))
      for (const e of r.episodes) {
        const dir = this.store.context(e.id);
        if (!needed.has(e.id) && (await exists(dir))) await removeTree(dir);
      }
  }

  async moveBest(state: RunState, commit: string): Promise<void> {
    await this.mayMove([this.ref(bestBranch(state.id))]);
    await this.git.setRef(this.ref(bestBranch(state.id)), commit, `forkflush: best ${state.best?.episode ?? ''}`);
  }

  /**
   * Throws before a run's branch moves while a worktree of the user's has it checked out: git
   * refuses that move too, and the files and index there would then undo the run's commits.
   */
  private async mayMove(refs: string[]): Promise<void> {
    const listed = await this.git.out(['worktree', 'list', '--porcelain']);
    for (const tree of listed.split('\n\n')) {
      const lines = tree.split('\n');
      const ref = refs.find((r) => lines.includes(`branch ${r}`));
      if (ref)
        throw new Error(
          `${ref.replace(/^refs\/heads\//, '')} is checked out in ${lines[0]?.replace(/^worktree /, '')}: forkflush moves the run's branches as it goes, and that worktree's files and index would then undo its commits; switch it to another branch (git switch --detach keeps its files)`,
        );
    }
  }

  /** Nothing to propose locally: the run's end prints how to take the best home. */
  async publishRun(): Promise<void> {}

  /** A throwaway checkout of a commit (to grade the initial workspace), with the places to hide. */
  async withCheckout<T>(
    commit: string,
    name: string,
    fn: (
      dir: string,
      places: Pick<EpisodePlaces, 'objects' | 'private'>,
      /** The repository and index the folder was checked out with (what it holds beyond the commit is read against them). */
      checkout: CheckoutIndex,
    ) => Promise<T>,
  ): Promise<T> {
    const { own, commonDir, alternates } = await this.open();
    const dir = this.store.workspace(name);
    const index = join(this.store.scratch(name), 'checkout.index');
    await checkoutInto(own, commit, dir, index);
    try {
      const places = {
        objects: [own.objects, ...alternates],
        private: [this.repo, commonDir, dirname(this.store.dir)],
      };
      return await fn(dir, places, { own, index });
    } finally {
      await removeTree(dir);
      await removeTree(this.store.scratch(name));
    }
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
