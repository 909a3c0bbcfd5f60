// What the job reports: its outputs, a notice when this attempt's own result is not the one on
// the branch, and a short summary for the job's page.
import { describeContext } from '../core/journal.js';
import { describeEpisodeId } from '../core/names.js';
import { codeSpan, formatNumber, markdownTable } from '../core/text.js';
import type { JobOutcome } from './episode-job.js';

/** The Action's outputs (action.yml): score is empty when the episode has none. */
export function jobOutputs(o: JobOutcome): Record<'score' | 'spent' | 'exit' | 'commit' | 'reason', string> {
  const r = o.result;
  return {
    score: r.score === null ? '' : plain(r.score),
    spent: plain(r.spent),
    exit: r.exit,
    commit: r.commit,
    reason: r.reason ?? '',
  };
}

/** A number without float noise (5.8500000000000005 -> 5.85), at full useful precision. */
function plain(x: number): string {
  return String(Number(x.toPrecision(12)));
}

/** Why this attempt's own result is not the one reported, or null when it is. */
export function jobNotice(o: JobOutcome): string | null {
  const which = `episode ${o.episode.id} of run ${o.run}`;
  if (o.attempt === 'already-recorded') {
    return `${which} already has its result on its branch (commit ${o.result.commit.slice(0, 10)}), from an earlier attempt: it was not run again`;
  }
  if (o.attempt === 'lost-race') {
    return `another attempt at ${which} pushed its result first (commit ${o.result.commit.slice(0, 10)}): that result stands, this attempt's is dropped`;
  }
  return null;
}

/** The job summary: one table row for the episode. */
export function jobSummary(o: JobOutcome): string {
  const { episode: e, result: r } = o;
  const score = r.score === null ? `no score: ${codeSpan(r.reason ?? 'no reason given')}` : formatNumber(r.score, 6);
  const table = markdownTable(
    ['episode', 'phase', 'context', 'score', 'spent', 'exit', 'commit'],
    [
      [
        `${e.id} (${describeEpisodeId(e.id)})`,
        o.phase,
        describeContext(e),
        score,
        `${formatNumber(r.spent)} of ${formatNumber(e.allowance)} ${o.unit}`,
        r.exit,
        r.commit.slice(0, 10),
      ],
    ],
  );
  const notes = [jobNotice(o), r.note ? `Note: ${codeSpan(r.note)}` : null].filter((n) => n !== null);
  return [`### forkflush ${o.run}: episode ${e.id}`, '', table, ...notes.map((n) => `\n${n}`), ''].join('\n');
}
