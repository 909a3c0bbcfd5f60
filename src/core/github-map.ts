// The idea map on GitHub (`/autoresearch map`), in words: why a map cannot be asked for yet, the
// comment that shows a drawn map on the run's issue, the line a failed map job gets, and where the
// picture is. Pure: the app (github/map.ts) reads the record and the map commit and posts these.
import { BODY_MAX_CHARS } from './bounds.js';
import type { Config } from './config.js';
import { clip } from './github-text.js';
import type { MapRecord } from './map/record.js';
import { agreementLine, amount, mapSection } from './map/report.js';
import { runSnapshots } from './map/sample.js';
import { mapSettings } from './map/settings.js';
import { mapRef } from './names.js';
import { allEpisodes, type RunState } from './state.js';
import { inertCodeSpan } from './text.js';

/** The fewest snapshots a map is fitted to (as `forkflush map` says when it has fewer). */
export const MAP_FEWEST_SNAPSHOTS = 3;

/**
 * Why no map of the run can be made now (said before anything is spent), or null: no episode has
 * a score yet, or the run has too few snapshots for triplets.
 */
export function mapAskProblem(state: RunState, config: Config): string | null {
  const graded = allEpisodes(state).filter((e) => e.result && e.result.score !== null && e.result.commit !== e.base);
  if (graded.length === 0) return 'the run has no graded episode yet: ask again once its first episodes have scores.';
  const snapshots = runSnapshots(state, mapSettings(config).snapshots).length;
  if (snapshots < MAP_FEWEST_SNAPSHOTS)
    return `the run has ${snapshots} snapshot${snapshots === 1 ? '' : 's'} (episodes with a workspace of their own): a map needs ${MAP_FEWEST_SNAPSHOTS}; ask again after another round.`;
  return null;
}

/**
 * The picture of a map commit as GitHub shows it: the file's blob with `?raw=true` (a redirect to
 * the raw file, which an image in a comment follows for anyone who can read the repository).
 */
export function mapImageUrl(repositoryUrl: string, commit: string, png: boolean): string {
  return `${repositoryUrl.replace(/\/+$/, '')}/blob/${commit}/${png ? 'map.png' : 'map.svg'}?raw=true`;
}

/** The comment that shows a drawn map on the run's issue: the picture, basins, agreement against run identity and chance. */
export function mapComment(m: MapRecord, o: { image: string; run: string; commit: string; jobUrl?: string }): string {
  const where = `\`${mapRef(o.run)}\` at \`${o.commit.slice(0, 10)}\``;
  const spent = `the judge spent ${amount(m.spent)} of ${amount(m.budget)} ${m.unit}`;
  const body = [
    mapSection(m, { image: o.image, quote: inertCodeSpan }).replace('by `forkflush map`', 'by `/autoresearch map`'),
    `map.json, map.svg and the judge's answers are on ${where}; ${spent}${o.jobUrl ? ` ([its job](${o.jobUrl}))` : ''}.`,
  ];
  return clip(body.join('\n'), BODY_MAX_CHARS);
}

/** One line for the issue when the map job drew no map. */
export function mapFailedComment(why: string, jobUrl: string | null): string {
  return clip(
    `forkflush drew no idea map: ${inertCodeSpan(why)}${jobUrl ? ` ([its job](${jobUrl}) says why)` : ''}. ` +
      'Every answer the judge gave is kept: `/autoresearch map` asks again and pays only for the rest.',
    BODY_MAX_CHARS,
  );
}

/** The line the status comment and the result pull request carry under the picture. */
export function mapDrawnLine(m: MapRecord): string {
  return `${m.points.length} snapshots, ${m.basins.length} basin${m.basins.length === 1 ? '' : 's'}. ${agreementLine(m)}`;
}
