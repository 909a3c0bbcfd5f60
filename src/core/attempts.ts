// Starts of an episode that never ended. The shell records a start before the episode's agent
// runs and takes it back when the episode ends under its eyes (a result, or a stop of its own:
// Ctrl-C, SIGTERM, a full disk): what is left counts the times forkflush died with it in flight. An episode that keeps killing
// the run is given up rather than started on every resume, for ever.
import { MAX_UNFINISHED_STARTS } from './method.js';
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
 * The result of an episode given up: started MAX_UNFINISHED_STARTS times without ever ending, so
 * it is not started again. No score; its workspace is its base; charged nothing more than is known
 * (what stopped attempts reported, `interruptedSpent`, is charged already). Null: start it.
 */
export function abandonedResult(e: Episode): EpisodeResult | null {
  const starts = e.unfinishedStarts ?? 0;
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

function withStarts(state: RunState, episodeId: string, next: (n: number) => number): RunState {
  const rounds = state.rounds.map((r) =>
    r.episodes.some((e) => e.id === episodeId && !e.result)
      ? {
          ...r,
          episodes: r.episodes.map((e) => {
            if (e.id !== episodeId) return e;
            const { unfinishedStarts, ...rest } = e;
            const n = next(unfinishedStarts ?? 0);
            return n > 0 ? { ...rest, unfinishedStarts: n } : rest;
          }),
        }
      : r,
  );
  return { ...state, rounds };
}
