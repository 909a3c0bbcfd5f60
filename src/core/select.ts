// Winner selection: the grader's number decides, nothing else.
import type { Config } from './config.js';
import { type Episode, isBetter, setupFailed } from './state.js';

/**
 * The best-scoring episode of a round, or null when none has a valid score. Ties go to the lower
 * branch number, so the choice is deterministic; never to the cheaper one: what an agent spent is
 * partly its own word, and a branch that copies a sibling's finished result spends next to nothing.
 * A branch whose setup failed never ran its agent: it is not a branch that tried, and never wins.
 */
export function selectWinner(episodes: readonly Episode[], direction: Config['grader']['direction']): Episode | null {
  let winner: Episode | null = null;
  for (const e of episodes) {
    if (setupFailed(e)) continue;
    const score = e.result?.score;
    if (score === null || score === undefined || !Number.isFinite(score)) continue;
    if (!winner) {
      winner = e;
      continue;
    }
    const best = winner.result?.score as number;
    if (isBetter(score, best, direction) || (score === best && e.branch < winner.branch)) winner = e;
  }
  return winner;
}

/**
 * Why a fork round cannot be ranked, or null: a branch's judge was starved by the machine (it ran
 * out of processes, memory or disk on both tries, beyond the branch's own limits), so its score is
 * unknown and ranking the others would hand the round to whoever starved it. Such a round is
 * decided with no winner: the lineage goes on unchanged, as when no branch scores.
 */
export function voidReason(episodes: readonly Episode[]): string | null {
  const starved = episodes.filter((e) => e.result?.machineShort);
  if (starved.length === 0) return null;
  const which = starved.map((e) => `${e.id} (${e.result?.machineShort})`).join(', ');
  return `void: the machine ran out of resources while the judge graded ${which}, on both tries; no branch is ranked`;
}
