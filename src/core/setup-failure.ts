// When a run must stop because its setup cannot work, before it spends the rest of its budget:
// an agent that cannot start will not start in the next episode either, and an opening round in
// which no episode got a score usually means a grader that cannot score anything. (A workspace
// may legitimately start without a score: the paper starts from an empty one. Its first round
// gets a score, or something is wrong.)
import { allEpisodes, type RunState } from './state.js';

export interface SetupFailure {
  /** 2: the setup is wrong (fix the config); 1: the run produced nothing. */
  code: 1 | 2;
  message: string;
}

export function setupFailure(state: RunState): SetupFailure | null {
  const notStarted = allEpisodes(state).find((e) => e.result?.agentNotStarted);
  if (notStarted?.result?.agentNotStarted) {
    return {
      code: 2,
      message:
        `the agent could not start in ${notStarted.id} (${notStarted.result.agentNotStarted}), so it will not ` +
        'start in any episode: check agent.command (and agent.kind), then start a new run',
    };
  }
  const opening = state.rounds[0];
  if (
    state.base.score === null &&
    opening?.decision &&
    opening.episodes.every((e) => e.result && e.result.score === null)
  ) {
    const reasons = [...new Set(opening.episodes.map((e) => e.result?.reason ?? 'no reason given'))];
    return {
      code: 1,
      message:
        `neither the initial workspace nor any episode of the opening round got a score (${reasons.slice(0, 3).join('; ')}), so the run stopped ` +
        'rather than spend the rest of its budget: run the grader by hand on the workspace, fix it, then start a new run',
    };
  }
  return null;
}
