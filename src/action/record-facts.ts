// What the job's records repository says of the episode, for the job's summary: the run's config
// and issue, what the episode's commit changed (git diff --stat) and the journal lines it added.
import { JOB_LOG_DIFFSTAT_MAX_FILES, JOB_LOG_JOURNAL_MAX_LINES, JOURNAL_LINE_MAX_CHARS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { parseGitHubRunRecord } from '../core/github-run-record.js';
import { stateRef } from '../core/names.js';
import { parseRunState } from '../core/records.js';
import { plainText } from '../core/text.js';
import { Git } from '../io/git.js';
import type { JobOutcome } from './episode-job.js';

export interface RecordFacts {
  config: Config | null;
  /** The run's issue, where the record names it. */
  issue: number | null;
  /** `git diff --stat` of the episode's commit against its base, line by line. */
  diffStat: string[];
  /** The lines the episode added to the journal (the agent's notes and forkflush's line). */
  journal: string[];
}

/**
 * The run's config (the outcome's; from the state ref the job fetched when the job failed before
 * it had one) and issue, and what the episode's commit changed, from the job's records
 * repository. Whatever cannot be read is left out.
 */
export async function readRecordFacts(
  recordsDir: string,
  run: string,
  outcome: JobOutcome | null,
): Promise<RecordFacts> {
  const facts: RecordFacts = {
    config: outcome?.config ?? null,
    issue: null,
    diffStat: [],
    journal: [],
  };
  const git = new Git(recordsDir);
  const show = async (file: string) => {
    const r = await git.exec(['show', `${stateRef(run)}:${file}`], { check: false }).catch(() => null);
    return r && r.exitCode === 0 ? r.stdout : null;
  };
  const state = await show('state.json');
  if (state && !facts.config) facts.config = tryParse(() => parseRunState(state, 'state.json').config);
  const files = await show('run.json');
  if (files) facts.issue = tryParse(() => parseGitHubRunRecord(files, 'run.json').issue);
  if (!outcome) return facts;
  const { base } = outcome.episode;
  const { commit } = outcome.result;
  // The trees are the agent's: no diff driver or text conversion of theirs may run.
  const diff = ['diff', '--no-ext-diff', '--no-textconv', '--no-color'];
  const stat = await git
    .exec([...diff, '--stat=120', `--stat-count=${JOB_LOG_DIFFSTAT_MAX_FILES}`, base, commit], { check: false })
    .catch(() => null);
  if (stat?.exitCode === 0) facts.diffStat = cleanText(stat.stdout);
  if (facts.config) {
    const journal = await git
      .exec([...diff, '--unified=0', base, commit, '--', facts.config.journal], { check: false })
      .catch(() => null);
    if (journal?.exitCode === 0) {
      const added = journal.stdout
        .split('\n')
        .filter((l) => l.startsWith('+') && !l.startsWith('+++'))
        .map((l) => l.slice(1));
      facts.journal = cleanText(added.join('\n'))
        .slice(-JOB_LOG_JOURNAL_MAX_LINES)
        .map((l) => (l.length > JOURNAL_LINE_MAX_CHARS ? `${l.slice(0, JOURNAL_LINE_MAX_CHARS)}…` : l));
    }
  }
  return facts;
}

function tryParse<T>(f: () => T): T | null {
  try {
    return f();
  } catch {
    return null;
  }
}

/** Text as lines without terminal codes, trailing spaces or blank lines. */
export function cleanText(text: string): string[] {
  return plainText(text)
    .split('\n')
    .map((l) => l.replace(/\s+$/, ''))
    .filter((l) => l.trim() !== '');
}
