// What every job of a run on the forge starts with: a private folder made anew, the records
// repository and the remote behind the one token, and the run's state and facts read from its
// state ref (or why this release cannot read them).
import { mkdir } from 'node:fs/promises';
import pkg from '../../package.json' with { type: 'json' };
import { type GitHubRunRecord, parseGitHubRunRecord } from '../core/github-run-record.js';
import { stateRef } from '../core/names.js';
import { parseRunState, RecordError } from '../core/records.js';
import type { RunState } from '../core/state.js';
import { unreadableRunReason } from '../core/versions.js';
import { removeTree } from '../io/agent-files.js';
import { RecordsRepo } from './records.js';
import { Remote } from './remote.js';
import { type ActionSettings, jobPlaces } from './settings.js';

/** A run's records as this release reads them, or why it cannot (and the layout run.json names). */
export type ReadRun = { state: RunState; facts: GitHubRunRecord } | { unreadable: string; layout: unknown };

/**
 * The job's private folder made anew (nothing an earlier job on this runner left behind, a usage
 * file or a context, may leak into this one; forkflush's alone: no other user looks into what it
 * hands the sandbox), the records repository, the remote, and the run read from its state ref.
 */
export async function openRunRecords(s: ActionSettings, log: (line: string) => void) {
  log(`repository: ${s.remoteUrl}`);
  await removeTree(s.privateDir);
  await mkdir(s.privateDir, { recursive: true, mode: 0o700 });
  const places = jobPlaces(s);
  const records = await RecordsRepo.create(places.records);
  const remote = new Remote(s.remoteUrl, s.token, records);
  const read = await readRun(records, remote, s.run);
  return { places, records, remote, read };
}

/**
 * The run's state and facts from its state ref, or why this worker cannot read them (a record
 * saved by a newer app, most often: see unreadableRunReason).
 */
export async function readRun(records: RecordsRepo, remote: Remote, run: string): Promise<ReadRun> {
  const ref = stateRef(run);
  if (!(await remote.listRefs([ref])).has(ref)) {
    throw new Error(`run ${run} has no state in this repository (no ref ${ref}): was it started here?`);
  }
  await remote.fetch([ref]);
  const read = async (file: string): Promise<string> => {
    const text = await records.read(ref, file);
    if (text === null) throw new Error(`${ref} holds no ${file}`);
    return text;
  };
  const [stateText, factsText] = [await read('state.json'), await read('run.json')];
  let state: RunState;
  let facts: GitHubRunRecord;
  try {
    state = parseRunState(stateText, `${ref}:state.json`);
    facts = parseGitHubRunRecord(factsText, `${ref}:run.json`);
  } catch (e) {
    if (!(e instanceof RecordError)) throw e;
    const writer = recordField(factsText, 'writtenBy');
    return {
      unreadable: unreadableRunReason(e.message, pkg.version, typeof writer === 'string' && writer ? writer : null),
      layout: recordField(factsText, 'refsLayout'),
    };
  }
  if (state.id !== run) throw new Error(`${ref}:state.json is the state of run ${state.id}, not of ${run}`);
  return { state, facts };
}

/** A field of run.json as it says (the release that saved it, its layout), read without its schema. */
function recordField(text: string, key: string): unknown {
  try {
    return (JSON.parse(text) as Record<string, unknown>)[key];
  } catch {
    return null;
  }
}
