// The reconcile step: observed run state -> the next actions. Every trigger (a CLI step, a webhook,
// a nightly tick) calls this and does what it returns; running it twice on the same state returns
// the same actions, so a duplicated or late trigger changes nothing.
import { nextRound } from './schedule.js';
import { selectWinner, voidReason } from './select.js';
import type { Best, Decision, EpisodeResult, Round, RunState } from './state.js';
import { isBetter, setupFailed } from './state.js';

export type Action =
  /** Record a new round; its episodes' branches start from the lineage heads they name. */
  | { type: 'open'; round: Round }
  /** Run (or re-run, after a crash) an episode that has no result yet. */
  | { type: 'run'; round: number; episode: string }
  /** Every episode of the round has a result: adopt the winner(s) into the lineage(s). */
  | { type: 'decide'; round: number; decision: Decision }
  /** The budget is spent. */
  | { type: 'finish' };

export function reconcile(state: RunState): Action[] {
  if (state.status === 'finished') return [];
  const open = state.rounds.find((r) => !r.decision);
  if (open) {
    const pending = open.episodes.filter((e) => !e.result);
    if (pending.length > 0) return pending.map((e) => ({ type: 'run', round: open.index, episode: e.id }));
    return [{ type: 'decide', round: open.index, decision: decide(state, open) }];
  }
  const round = nextRound(state);
  return round ? [{ type: 'open', round }] : [{ type: 'finish' }];
}

/**
 * A fork round adopts its winner (if any branch scored), unless a branch's judge was starved by
 * the machine (`voidReason`): then nothing. A serial round adopts every episode but those whose
 * setup failed (their agent never ran: the lineage stays where it was, context and all); it ranks
 * nothing, so nothing voids it.
 */
export function decide(state: RunState, round: Round): Decision {
  if (round.kind === 'serial')
    return { winner: null, adopted: round.episodes.filter((e) => !setupFailed(e)).map((e) => e.id) };
  const voided = voidReason(round.episodes);
  if (voided) return { winner: null, adopted: [], voided };
  const winner = selectWinner(round.episodes, state.config.grader.direction);
  return { winner: winner?.id ?? null, adopted: winner ? [winner.id] : [] };
}

// Pure transitions. Each returns a new state; applying one twice is refused or changes nothing.

export function applyOpen(state: RunState, round: Round): RunState {
  if (state.rounds.some((r) => r.index === round.index)) return state;
  if (state.rounds.some((r) => !r.decision)) throw new Error(`round ${round.index}: another round is still open`);
  return { ...state, rounds: [...state.rounds, round] };
}

/**
 * An attempt at the episode was interrupted (Ctrl-C, a stopped job, a halted run) after spending
 * this much: measured, reported by the agent, or `estimated` (core/charge.ts). It is charged, and
 * the episode runs again from its base on resume.
 */
export function applyInterrupted(state: RunState, episodeId: string, spent: number, estimated = false): RunState {
  if (!(spent > 0)) return state;
  const rounds = state.rounds.map((r) =>
    r.episodes.some((e) => e.id === episodeId && !e.result)
      ? {
          ...r,
          episodes: r.episodes.map((e) =>
            e.id === episodeId
              ? {
                  ...e,
                  interruptedSpent: Number(((e.interruptedSpent ?? 0) + spent).toFixed(6)),
                  ...(estimated || e.interruptedBasis ? { interruptedBasis: 'estimated' as const } : {}),
                }
              : e,
          ),
        }
      : r,
  );
  return { ...state, rounds };
}

export function applyResult(state: RunState, episodeId: string, result: EpisodeResult): RunState {
  const round = state.rounds.find((r) => r.episodes.some((e) => e.id === episodeId));
  const episode = round?.episodes.find((e) => e.id === episodeId);
  if (!round || !episode) throw new Error(`no episode ${episodeId} in run ${state.id}`);
  if (round.decision) throw new Error(`episode ${episodeId}: its round is already decided`);
  // A result is final: the same one again changes nothing, a different one is refused.
  if (episode.result) {
    if (JSON.stringify(episode.result) === JSON.stringify(result)) return state;
    throw new Error(`episode ${episodeId} already has a result`);
  }
  const rounds = state.rounds.map((r) =>
    r === round ? { ...r, episodes: r.episodes.map((e) => (e.id === episodeId ? { ...e, result } : e)) } : r,
  );
  let best: Best | null = state.best;
  const { score } = result;
  if (score !== null && (!best || isBetter(score, best.score, state.config.grader.direction))) {
    best = { episode: episodeId, commit: result.commit, score };
  }
  return { ...state, rounds, best };
}

export function applyDecision(state: RunState, roundIndex: number, decision: Decision): RunState {
  const round = state.rounds.find((r) => r.index === roundIndex);
  if (!round) throw new Error(`no round ${roundIndex} in run ${state.id}`);
  if (round.decision) return state;
  if (round.episodes.some((e) => !e.result)) throw new Error(`round ${roundIndex} still has episodes without a result`);
  const lineages = state.lineages.map((l) => {
    const adopted = round.episodes.find((e) => e.lineage === l.index && decision.adopted.includes(e.id));
    return adopted?.result ? { ...l, head: adopted.result.commit, context: adopted.id } : l;
  });
  const rounds = state.rounds.map((r) => (r.index === roundIndex ? { ...r, decision } : r));
  // A tie within the round is its winner's: the best is the workspace the lineage goes on from, not
  // whichever branch happened to finish first.
  const won = round.episodes.find((e) => e.id === decision.winner)?.result;
  const tied = won && state.best?.score === won.score && round.episodes.some((e) => e.id === state.best?.episode);
  const best =
    tied && won.score !== null
      ? { episode: decision.winner as string, commit: won.commit, score: won.score }
      : state.best;
  return { ...state, rounds, lineages, best };
}

export function applyFinish(state: RunState): RunState {
  return state.status === 'finished' ? state : { ...state, status: 'finished' };
}
