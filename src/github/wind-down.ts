// What a stopped run ends on GitHub, once its record says it is stopped: a person's stop
// (steer.ts), or its issue found deleted (sync.ts).
import { checkExternalId, checkRunName, GITHUB } from '../core/names.js';
import type { GitHubApi, StoredRun } from './api.js';

/** What a stop ends on GitHub: the round's jobs, the checks still waiting, the episodes' open pull requests. */
export async function windDown(ctx: { api: GitHubApi; now: Date }, next: Omit<StoredRun, 'sha'>): Promise<void> {
  await ctx.api.workflows.cancelRuns(GITHUB.workflow, next.state.id);
  // Every check still waiting ends: an episode without a result, and one whose result was not
  // published yet (publishing completes the check; a resume publishes it over this).
  for (const round of next.state.rounds) {
    // A dispatch claimed but not recorded: its handler may have made checks, then died before saving them.
    const halfDone = next.files.claims[`dispatch:${round.index}`] !== undefined && !next.files.dispatched[round.index];
    for (const e of round.episodes) {
      if (next.files.published[e.id]) continue;
      const check =
        next.files.checks?.[e.id] ??
        (halfDone && !e.result
          ? await ctx.api.checks.find(e.base, checkRunName(e.id), checkExternalId(next.state.id, e.id))
          : null);
      if (check === null) continue;
      await ctx.api.checks.update(check, {
        status: 'completed',
        conclusion: 'cancelled',
        completedAt: ctx.now.toISOString(),
        output: {
          title: `${e.id}: stopped`,
          summary: e.result
            ? "The run was stopped before this episode's result was published; a resume publishes it."
            : 'The run was stopped before this episode had a result; a resume runs it again.',
        },
      });
    }
  }
  for (const round of next.state.rounds.filter((r) => !next.files.settled.includes(r.index))) {
    for (const e of round.episodes) {
      const pr = next.files.published[e.id]?.pr;
      if (pr) await ctx.api.pulls.close(pr, 'The run was stopped; this branch is kept as it is.');
    }
  }
}
