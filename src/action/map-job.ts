// The job that draws a GitHub run's idea map (`/autoresearch map`; its matrix value is `map`): it
// reads the run's records, fetches the episode commits the map samples, and runs the map code the
// CLI runs (local/map.ts mapRuns: the judge is map.judge, an agent in the sandbox, within
// map.budget). The map (map.json, map.svg, and map.png where the renderer loads) and the judge's
// answers (cache/<judge>/, as locally) become one commit on refs/forkflush/<run>/map, its parent
// the previous one, whose answers this job starts from: a re-run pays only for what is new. A map
// that is not drawn (the judge failed, the budget ran out) pushes only the answers, and the job
// fails with the reason in one line.
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Config, ConfigError, parseConfig } from '../core/config.js';
import type { MapRecord } from '../core/map/record.js';
import { mapSettings } from '../core/map/settings.js';
import { mapRef } from '../core/names.js';
import type { RunState } from '../core/state.js';
import { mapRuns } from '../local/map.js';
import { judgeKey } from '../local/map-cache.js';
import { renderPng } from '../local/map-png.js';
import type { OwnRepo } from '../worker/cleanroom.js';
import { checkoutInto } from '../worker/cleanroom.js';
import { installAgentCli } from './agent-install.js';
import type { JobOptions } from './episode-job.js';
import type { RecordsRepo } from './records.js';
import type { Remote } from './remote.js';
import { openRunRecords } from './run-records.js';
import { prepareIsolation } from './sandbox-setup.js';
import type { ActionSettings } from './settings.js';

export interface MapJobOutcome {
  run: string;
  record: MapRecord;
  /** The map commit pushed to refs/forkflush/<run>/map. */
  commit: string;
  /** The folder holding map.json, map.svg and map.png (for the artifact). */
  folder: string;
  files: string[];
  /** Why there is no map.png, when there is none. */
  pngNote?: string;
}

/**
 * A map that was not drawn: the job fails with `message`; `cacheCommit` holds the answers kept,
 * `failedLogs` the logs of the judge's failed calls (the job uploads them: the runner's folder goes).
 */
export class MapNotDrawn extends Error {
  override name = 'MapNotDrawn';
  constructor(
    message: string,
    readonly cacheCommit: string | null,
    readonly failedLogs: string | null,
  ) {
    super(message);
  }
}

export async function runMapJob(s: ActionSettings, o: JobOptions): Promise<MapJobOutcome> {
  const { places, records, remote, read } = await openRunRecords(s, o.log);
  if ('unreadable' in read) throw new Error(read.unreadable);
  const { state, facts } = read;
  const asked = facts.map;
  if (!asked) throw new Error(`run ${s.run} has no idea map asked for (\`/autoresearch map\` on its issue asks)`);
  const dispatched = asked.dispatched?.runId;
  if (dispatched !== undefined && s.workflowRunId !== null && dispatched !== s.workflowRunId)
    throw new Error(
      `the map of run ${s.run} was asked of workflow run ${dispatched}, not of this one (${s.workflowRunId})`,
    );
  const config = await mapConfig(records, remote, state.config, facts.configPath, asked.configCommit);
  const settings = mapSettings(config);
  // The previous map commit: its answers are this map's start.
  const ref = mapRef(s.run);
  const out = join(places.scratch, 'map');
  const previous = await previousMap(records, remote, ref, out, join(places.scratch, 'map.index'));
  await fetchSnapshots(remote, state, o.log);
  const install = await installAgentCli(settings.judge, { env: o.env, log: o.log });
  if (install.problem) throw new Error(`the map's judge could not be installed: ${install.problem}`);
  await prepareIsolation(config.sandbox.mode, o.log);
  const cacheDir = join(out, 'cache', judgeKey(settings.judge));
  const outcome = await mapRuns({
    target: { kind: 'run', id: s.run },
    folder: out,
    runs: [{ state, task: facts.task, variant: null }],
    config,
    settings,
    cacheDir,
    work: join(places.scratch, 'map-work'),
    repos: async () => ({ repos: new Map<string, OwnRepo>([[s.run, records.own]]), hidden: [s.privateDir] }),
    now: () => new Date(),
    env: install.env,
    ...(o.signal ? { signal: o.signal } : {}),
    log: o.log,
  });
  if (outcome.code !== 0 || !outcome.record) {
    // Nothing half-drawn is pushed as a map: only the answers, so that asking again reuses them.
    for (const f of ['map.json', 'map.svg', 'map.png']) await rm(join(out, f), { force: true });
    const kept = await pushMapCommit(
      records,
      remote,
      ref,
      out,
      previous,
      `forkflush ${s.run}: the judge's answers so far (no map)`,
    );
    // Cancelled (by hand, or at the job's timeout-minutes): the answers so far were pushed just now.
    const message =
      outcome.code === 130
        ? `the job was cancelled before the map was drawn: the judge's answers so far are kept on ${ref}, and \`/autoresearch map\` goes on from them`
        : (outcome.message ?? 'the map was not drawn');
    throw new MapNotDrawn(message, kept, outcome.failedLogs ?? null);
  }
  const png = await renderPng(join(out, 'map.svg'), join(out, 'map.png'));
  const commit = await pushMapCommit(records, remote, ref, out, previous, `forkflush ${s.run}: idea map`);
  if (!commit) throw new Error(`the map was drawn but not pushed to ${ref}: another map job pushed first; ask again`);
  o.log(`map: pushed ${ref} (${commit.slice(0, 10)})`);
  return {
    run: s.run,
    record: outcome.record,
    commit,
    folder: out,
    files: ['map.json', 'map.svg', ...('file' in png ? ['map.png'] : [])].map((f) => join(out, f)),
    ...('note' in png ? { pngNote: png.note } : {}),
  };
}

/**
 * The run's config with the `map:` settings the app checked when the map was asked (the config
 * file at that commit of the default branch), or the run's own config when none was recorded.
 */
async function mapConfig(
  records: RecordsRepo,
  remote: Remote,
  own: Config,
  path: string,
  commit: string | undefined,
): Promise<Config> {
  if (!commit) return own;
  await remote.fetchCommit(commit);
  const text = await records.read(commit, path);
  if (text === null) return own;
  try {
    const map = parseConfig(text, path).map;
    return { ...own, ...(map ? { map } : {}) };
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new Error(`${path} at ${commit.slice(0, 10)} is not valid: ${e.problems.join('; ')}`);
  }
}

/** The previous map commit checked out into `out` (its answers under cache/), or an empty `out`. */
async function previousMap(
  records: RecordsRepo,
  remote: Remote,
  ref: string,
  out: string,
  index: string,
): Promise<string | null> {
  await rm(out, { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  if (!(await remote.listRefs([ref])).has(ref)) return null;
  await remote.fetch([ref]);
  const head = await records.git.revParse(ref);
  if (head) await checkoutInto(records.own, head, out, index);
  return head;
}

/** Every episode commit the map may sample, and the run's base (the triplet judge's cwd). */
async function fetchSnapshots(remote: Remote, state: RunState, log: (line: string) => void): Promise<void> {
  const commits = new Set([state.base.commit]);
  for (const r of state.rounds) for (const e of r.episodes) if (e.result) commits.add(e.result.commit);
  log(`fetching ${commits.size} commits of run ${state.id}`);
  await remote.fetchCommits([...commits]);
}

/** `out` as a commit on `ref`, its parent the previous map commit; null when another job's push won. */
async function pushMapCommit(
  records: RecordsRepo,
  remote: Remote,
  ref: string,
  out: string,
  parent: string | null,
  message: string,
): Promise<string | null> {
  const index = join(out, '..', 'map-commit.index');
  await rm(index, { force: true });
  await records.own.exec(['add', '--all', '--force'], { workTree: out, index });
  const tree = await records.own.out(['write-tree'], { index });
  const commit = await records.own.out(['commit-tree', tree, ...(parent ? ['-p', parent] : []), '-F', '-'], {
    input: `${message}\n`,
  });
  const pushed = await remote.pushAtomic([`${commit}:${ref}`]);
  return pushed.some((p) => p.flag === '!') ? null : commit;
}
