// What carrying out the core's decisions takes, as one list both shells work through. The core
// decides (reconcile, advance); `dueWork` says what the forge must do about it: open a round's
// branches, publish each result, settle each decided round, move the best branch, publish the
// finished run. The local runner and the GitHub sync carry the same items out through one
// `ForgeWork` interface (`carryOut`), each repeat-safe in its own way: locally every step is
// idempotent on git refs; on GitHub each item is claimed in the run's record before it runs.
import { type Action, applyDecision, applyFinish, applyOpen, reconcile } from './reconcile.js';
import { type Episode, findEpisode, type Round, type RunState } from './state.js';

export type WorkItem =
  /** The round's branches exist at their bases and its pending episodes are started. */
  | { type: 'open-round'; key: string; round: number }
  /** The episode's result is shown where people look (GitHub: a check run and a pull request). */
  | { type: 'publish-result'; key: string; episode: string }
  /** Each adopted episode's lineage is moved to its commit; the other branches are closed. */
  | { type: 'settle-round'; key: string; round: number }
  /** The best branch points at the best workspace. */
  | { type: 'move-best'; key: string; commit: string }
  /** The run is finished: its result is proposed (GitHub: the final pull request and labels). */
  | { type: 'publish-run'; key: string };

/** What a shell has carried out so far (GitHub keeps it in the run's record). */
export interface WorkDone {
  opened: number[];
  published: string[];
  settled: number[];
  best: string | null;
  finished: boolean;
}

export const NOTHING_DONE: WorkDone = { opened: [], published: [], settled: [], best: null, finished: false };

/** The work the state calls for that is not done yet, in the order it must happen. */
export function dueWork(state: RunState, done: WorkDone): WorkItem[] {
  const work: WorkItem[] = [];
  for (const round of state.rounds) {
    for (const e of round.episodes) {
      if (e.result && !done.published.includes(e.id))
        work.push({ type: 'publish-result', key: `publish:${e.id}`, episode: e.id });
    }
    if (round.decision && !done.settled.includes(round.index))
      work.push({ type: 'settle-round', key: `settle:${round.index}`, round: round.index });
  }
  const open = state.rounds.find((r) => !r.decision);
  if (open && !done.opened.includes(open.index))
    work.push({ type: 'open-round', key: `dispatch:${open.index}`, round: open.index });
  if (state.status === 'finished' && !done.finished) work.push({ type: 'publish-run', key: 'final' });
  if (state.best && state.best.commit !== done.best)
    work.push({ type: 'move-best', key: 'best', commit: state.best.commit });
  return work;
}

/** The forge side of each work item. `retaking`: a claim left by a handler that died is taken over. */
export interface ForgeWork {
  openRound(state: RunState, round: Round, retaking: boolean): Promise<void>;
  publishResult(state: RunState, episode: Episode, retaking: boolean): Promise<void>;
  settleRound(state: RunState, round: Round): Promise<void>;
  moveBest(state: RunState, commit: string): Promise<void>;
  publishRun(state: RunState): Promise<void>;
}

/** Carries one item out through the forge. */
export async function carryOut(forge: ForgeWork, state: RunState, item: WorkItem, retaking = false): Promise<void> {
  switch (item.type) {
    case 'open-round':
      return forge.openRound(state, roundOf(state, item.round), retaking);
    case 'publish-result': {
      const e = findEpisode(state, item.episode);
      if (!e) throw new Error(`${state.id}: no episode ${item.episode}`);
      return forge.publishResult(state, e, retaking);
    }
    case 'settle-round':
      return forge.settleRound(state, roundOf(state, item.round));
    case 'move-best':
      return forge.moveBest(state, item.commit);
    case 'publish-run':
      return forge.publishRun(state);
  }
}

/** The same record with the item marked done. */
export function markDone(done: WorkDone, item: WorkItem): WorkDone {
  switch (item.type) {
    case 'open-round':
      return { ...done, opened: [...new Set([...done.opened, item.round])] };
    case 'publish-result':
      return { ...done, published: [...new Set([...done.published, item.episode])] };
    case 'settle-round':
      return { ...done, settled: [...new Set([...done.settled, item.round])].sort((a, b) => a - b) };
    case 'move-best':
      return { ...done, best: item.commit };
    case 'publish-run':
      return { ...done, finished: true };
  }
}

function roundOf(state: RunState, index: number): Round {
  const round = state.rounds.find((r) => r.index === index);
  if (!round) throw new Error(`${state.id}: no round ${index}`);
  return round;
}

/**
 * The steps the core takes by itself (open, decide, finish), applied until it waits for episodes,
 * or until `halt` says to stop before the next one.
 */
export function advance(
  initial: RunState,
  halt: (state: RunState, next: Action) => boolean = () => false,
): { state: RunState; steps: Action[] } {
  let state = initial;
  const steps: Action[] = [];
  for (let guard = 0; guard < 1000; guard++) {
    const [first] = reconcile(state);
    if (!first || first.type === 'run' || halt(state, first)) return { state, steps };
    steps.push(first);
    if (first.type === 'open') state = applyOpen(state, first.round);
    else if (first.type === 'decide') state = applyDecision(state, first.round, first.decision);
    else state = applyFinish(state);
  }
  throw new Error(`${initial.id}: the schedule did not settle`);
}

/**
 * Why a lineage's head at `head` means it moved outside forkflush, or null. Adopting an episode
 * moves its lineage from the episode's base to its commit; a head already at that commit, or at a
 * commit a later decided round adopted (a later round was settled first, after a crash), is fine.
 */
export function lineageMovedOutsideProblem(
  state: RunState,
  round: Round,
  e: Episode,
  head: string | null,
  lineageRef: string,
): string | null {
  const commit = e.result?.commit;
  if (!commit || head === commit) return null;
  const later = state.rounds
    .filter((r) => r.index > round.index && r.decision)
    .flatMap((r) => r.episodes.filter((x) => x.lineage === e.lineage && r.decision?.adopted.includes(x.id)))
    .flatMap((x) => (x.result ? [x.result.commit] : []));
  if (head !== null && later.includes(head)) return null;
  return (
    `the lineage branch ${lineageRef} moved outside forkflush (expected ${e.base.slice(0, 10)} or ${commit.slice(0, 10)}, ` +
    `found ${head?.slice(0, 10) ?? 'nothing'}): reset it to one of those commits, then resume`
  );
}
