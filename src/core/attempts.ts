// Starts of an episode that never ended. The shell records a start before the episode's agent
// runs and takes it back when the episode ends under its eyes (a result, or a stop of its own:
// Ctrl-C, SIGTERM, a full disk): what is left counts the times forkflush died with it in flight.
// Each such attempt is charged its allowance (what it spent died with it), and an episode that
// keeps killing the run is given up rather than started on every resume, for ever.
import { MAX_UNFINISHED_STARTS } from './method.js';
import { applyInterrupted } from './reconcile.js';
import type { Episode, EpisodeResult, RunState } from './state.js';

/** The state with `episodeId` started once more (saved before its agent runs). */
export function recordStart(state: RunState, episodeId: string): RunState {
  return withStarts(state, episodeId, (n) => n + 1);
}

/** The state with the last start of `episodeId` taken back: forkflush saw the episode end. */
export function takeBackStart(state: RunState, episodeId: string): RunState {
  return withStarts(state, episodeId, (n) => Math.max(0, n - 1));
}

/**
 * The state with the starts of `episodeId` that forkflush died with settled, before it runs again:
 * each is charged its allowance, an estimate (a killed agent's report of its usage died with it),
 * and counted as killed. With `recovered`, the last of them left a result (on its branch): it is
 * charged what the result says instead.
 */
export function chargeKilledStarts(state: RunState, episodeId: string, recovered: boolean): RunState {
  const e = state.rounds.flatMap((r) => r.episodes).find((x) => x.id === episodeId);
  const killed = e?.result ? 0 : (e?.unfinishedStarts ?? 0);
  if (!e || killed === 0) return state;
  const charged = recovered ? killed - 1 : killed;
  const settled = withStarts(
    state,
    episodeId,
    () => 0,
    (k) => k + charged,
  );
  return applyInterrupted(settled, episodeId, charged * e.allowance, true);
}

/**
 * The result of an episode given up: started MAX_UNFINISHED_STARTS times without ever ending, so
 * it is not started again. No score; its workspace is its base; charged nothing more (its killed
 * attempts are charged already, chargeKilledStarts). Null: start it.
 */
export function abandonedResult(e: Episode): EpisodeResult | null {
  const starts = e.killedStarts ?? 0;
  if (e.result || starts < MAX_UNFINISHED_STARTS) return null;
  return {
    commit: e.base,
    score: null,
    reason:
      `started ${starts} times, and each time forkflush was killed before the episode ended ` +
      '(out of memory, a reboot, or a stop that did not finish in time): it is not started again',
    spent: 0,
    exit: 'crash',
    protectedChanged: [],
    agentSeconds: 0,
    graderSeconds: 0,
    wallSeconds: 0,
  };
}

function withStarts(
  state: RunState,
  episodeId: string,
  next: (n: number) => number,
  nextKilled: (n: number) => number = (n) => n,
): RunState {
  const rounds = state.rounds.map((r) =>
    r.episodes.some((e) => e.id === episodeId && !e.result)
      ? {
          ...r,
          episodes: r.episodes.map((e) => {
            if (e.id !== episodeId) return e;
            const { unfinishedStarts, killedStarts, ...rest } = e;
            const [n, k] = [next(unfinishedStarts ?? 0), nextKilled(killedStarts ?? 0)];
            return { ...rest, ...(n > 0 ? { unfinishedStarts: n } : {}), ...(k > 0 ? { killedStarts: k } : {}) };
          }),
        }
      : r,
  );
  return { ...state, rounds };
}
