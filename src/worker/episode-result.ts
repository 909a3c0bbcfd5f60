// An episode's result, committed: the journal line written into the snapshot, the commit on the
// episode's base with the result in its trailers (sealed where there is a key); and the result of
// an episode whose workspace could not be prepared.
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { JOURNAL_LINE_MAX_CHARS, JOURNAL_READ_MAX_BYTES, JOURNAL_TAIL_LINES } from '../core/bounds.js';
import { withEarlierAttempts } from '../core/charge.js';
import { CONFIG_PATH } from '../core/config.js';
import { matchesAny } from '../core/globs.js';
import { appendToJournal, boundedResult, commitMessage, type EpisodeDetails, journalEntry } from '../core/journal.js';
import { withSection } from '../core/losers.js';
import type { EpisodeResult } from '../core/state.js';
import { formatNumber, plainText } from '../core/text.js';
import type { Tried } from './agent-tries.js';
import { commitTree, diffStat, indexedText, writeIndexed, writeTracked } from './cleanroom.js';
import type { EpisodeJob } from './episode-input.js';
import { sealMessage } from './seal.js';
import { baseSnapshot, type Snapshot } from './snapshot.js';

/**
 * Appends `job.journalSection` to the journal of the workspace and its checkout index, once (a
 * journal that holds it already is left alone): the tree the episode starts from, and a note when
 * it could not be added (the journal is protected, too large to read, or a link).
 */
export async function addLosersSection(job: EpisodeJob): Promise<{ tree: string; note?: string }> {
  const { config, episode } = job;
  const baseTree = () => job.own.out(['rev-parse', `${episode.base}^{tree}`]);
  if (!job.journalSection) return { tree: await baseTree() };
  const why = (reason: string) => `the notes of the branches that lost were not added to ${config.journal}: ${reason}`;
  if (matchesAny(config.journal, [...config.grader.protected, ...(job.alsoProtected ?? [CONFIG_PATH])]))
    return { tree: await baseTree(), note: why('it is a protected path') };
  const journal = await indexedText(job.own, job.checkoutIndex, config.journal, JOURNAL_READ_MAX_BYTES);
  const size = (await lstat(join(job.places.workspace, config.journal)).catch(() => null))?.size ?? 0;
  if (journal === null || (journal === '' && size > 0))
    return { tree: await baseTree(), note: why('it is too large or not a file') };
  const text = withSection(journal, job.journalSection);
  if (text === journal) return { tree: await baseTree() };
  const tree = await writeTracked(job.own, job.places.workspace, job.checkoutIndex, config.journal, text);
  if (tree === null) return { tree: await baseTree(), note: why('a link or a file stands in its way') };
  job.log?.(`journal: the notes of the branches that lost added to ${config.journal}`);
  return { tree };
}

/**
 * Writes the journal line into the snapshot and commits it on the episode's base, with the
 * result in the trailers (sealed where there is a key).
 */
export async function commitResult(
  job: EpisodeJob,
  snap: Snapshot,
  made: Omit<EpisodeResult, 'commit' | 'wallSeconds'>,
  started: number,
): Promise<EpisodeResult> {
  const { config, episode } = job;
  // The journal line goes into the snapshot, never through a file the agent could have linked. A
  // journal too large to read is left as it is, said: written anew, it would be lost.
  const existing = await indexedText(job.own, snap.index, config.journal, JOURNAL_READ_MAX_BYTES);
  const unread = `forkflush's line was not added to ${config.journal}: it is larger than ${JOURNAL_READ_MAX_BYTES / 2 ** 20} MiB`;
  const noted = existing === null ? { ...made, note: [made.note, unread].filter(Boolean).join('; ') } : made;
  // What the agent wrote, as every reader gets it: the journal, the commit, the run's state.
  const partial = boundedResult(
    withEarlierAttempts(noted, job.earlierAttempts ?? 0, episode.allowance, config.budget.unit),
  );
  const journal =
    existing === null
      ? null
      : appendToJournal(existing, journalEntry(config, job.phase, episode, { ...partial, commit: '', wallSeconds: 0 }));
  const tree =
    journal === null
      ? await job.own.out(['write-tree'], { index: snap.index })
      : await writeIndexed(job.own, snap.index, config.journal, journal);
  const details: EpisodeDetails = {
    diffStat: await diffStat(job.own, snap.index, episode.base),
    journalTail: journal === null ? [] : journalTail(journal),
    ...(job.workflowRunUrl ? { workflowRunUrl: job.workflowRunUrl } : {}),
  };
  const wallSeconds = seconds((performance.now() - started) / 1000);
  let message = commitMessage(job.runId, config.budget.unit, episode, { ...partial, wallSeconds }, details);
  if (job.sealKey) message = sealMessage(job.sealKey, message, tree, episode.base);
  const commit = await commitTree(job.own, tree, episode.base, message);
  return { ...partial, commit, wallSeconds };
}

/**
 * The result of an episode whose workspace could not be prepared: the agent never ran, nothing
 * was spent, the base's files are committed as they were (with the journal line), and `reason`
 * says what failed. Its own kind (exit `setup`): never a winner, never adopted.
 */
export async function setupResult(job: EpisodeJob, reason: string, started: number): Promise<EpisodeResult> {
  const snap = await baseSnapshot(job.own, join(job.scratchDir, 'snapshot.index'), job.episode.base);
  const note = job.notes && job.notes.length > 0 ? plainText(job.notes.join('; ')) : '';
  return commitResult(
    job,
    snap,
    {
      score: null,
      reason: plainText(reason),
      ...(note ? { note } : {}),
      spent: 0,
      exit: 'setup',
      protectedChanged: [],
      agentSeconds: 0,
      graderSeconds: 0,
      sandbox: job.isolation.label,
      ...(job.contextStore ? { contextStore: job.contextStore } : {}),
    },
    started,
  );
}

/** The journal's last entries, for the commit body. */
export function journalTail(journal: string): string[] {
  return journal
    .split('\n')
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== '')
    .slice(-JOURNAL_TAIL_LINES)
    .map((l) => (l.length > JOURNAL_LINE_MAX_CHARS ? `${l.slice(0, JOURNAL_LINE_MAX_CHARS)}...` : l));
}

/** What the tries said: the failures retried, and why the retries were given up on. */
export function triesNotes(t: Tried): string[] {
  const retried = t.retries.map((r) => `${r.kind} (waited ${formatNumber(r.waitedSeconds, 1)} s)`);
  return [
    ...(retried.length > 0 ? [`tried ${t.tries.length} times: ${retried.join(', ')}`] : []),
    ...(t.gaveUp && t.failure ? [`gave up on the ${t.failure.kind} failure: ${t.gaveUp}`] : []),
  ];
}

/** Seconds to the millisecond, as the commit records them. */
export function seconds(s: number): number {
  return Math.round(s * 1000) / 1000;
}
