// The run's records, one name and one zod schema per file, checked on every read:
// - `state.json`: the core's RunState, the same locally and on GitHub (`STATE_RECORD`);
// - `run.json` on GitHub: what the app needs besides (`GITHUB_RUN_RECORD`, in github-run-record.ts);
// - `run.json` in a local run folder: what the local shell needs besides (`LOCAL_RUN_RECORD`, LocalRunInfo).
// A record is data a crash, an old version or a hand with a token may have written: it is parsed,
// never cast, and a problem is a RecordError naming the file and the field.
// GitHub's run.json, the record that grows with the app, has its schema in github-run-record.ts,
// on the versioning and field shapes of this file.
//
// Versions. Every record file carries `version`, the version of its shape. Reading one goes
// JSON -> `migrate` (one step per version, from the record's up to the one this forkflush writes)
// -> the schema. A record of a newer version is refused ("upgrade forkflush"); one without a
// version is read as the version its file had before it carried one (both run.json files: 1),
// or refused when the file always had one (state.json). A new optional field with a default is
// not a new version: version 1 records written before a field existed get the field's default.
// The other way round, a field this forkflush does not know (a newer one's, or a hand's) is
// refused ("upgrade forkflush"), never dropped: a save of what was read would lose it for good.
// A field removed, renamed or read differently is: raise `version`, add the step from the old
// version to `migrations`, and keep a record of the old version in test/fixtures/records/.
import { z } from 'zod';
import { configSchema, withDerivedDefaults } from './config.js';
import { FAILURE_KINDS, TRANSIENT_FAILURES } from './failure.js';
import { RESOURCES } from './resources.js';
import { type AgentUsage, EPISODE_EXITS, type RecordedFailure, type Retry, type RunState } from './state.js';

export const sha = z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, { message: 'must be a commit id' });
export const episodeId = z.string().regex(/^r\d+\.b\d+$/, { message: 'must be an episode id (r<round>.b<branch>)' });
export const count = z.number().int().nonnegative();
export const runId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { message: 'must be a run id' });

const usageSchema = z.object({
  inputTokens: z.number().nonnegative(),
  outputTokens: z.number().nonnegative(),
  costUsd: z.number().nonnegative().nullable(),
  turns: count.nullable(),
  pricedFrom: z.string().optional(),
});

/** Usage as a record holds it, or null (a commit's trailer may hold any JSON). */
export function validUsage(u: unknown): AgentUsage | null {
  const r = usageSchema.safeParse(u);
  return r.success ? r.data : null;
}

const failureSchema = z.object({
  kind: z.enum(FAILURE_KINDS),
  quote: z.string(),
  fix: z.string().optional(),
});

const retrySchema = z.object({
  kind: z.enum(TRANSIENT_FAILURES),
  quote: z.string(),
  waitedSeconds: z.number().finite().nonnegative(),
});

/** An agent's failure as a record holds it, or null (a commit's trailer may hold any JSON). */
export function validFailure(f: unknown): RecordedFailure | null {
  const r = failureSchema.safeParse(f);
  return r.success ? r.data : null;
}

/** A result's retries as a record holds them, or null. */
export function validRetries(r: unknown): Retry[] | null {
  const parsed = z.array(retrySchema).safeParse(r);
  return parsed.success ? parsed.data : null;
}

const resultSchema = z.object({
  commit: sha,
  score: z.number().finite().nullable(),
  reason: z.string().optional(),
  spent: z.number().finite().nonnegative(),
  exit: z.enum(EPISODE_EXITS),
  protectedChanged: z.array(z.string()),
  agentSeconds: z.number().nonnegative(),
  graderSeconds: z.number().nonnegative(),
  note: z.string().optional(),
  usage: usageSchema.optional(),
  wallSeconds: z.number().nonnegative(),
  sandbox: z.string().optional(),
  contextStore: z.enum(['encrypted', 'plain', 'none']).optional(),
  agentNotStarted: z.string().optional(),
  machineShort: z.enum(RESOURCES).optional(),
  failure: failureSchema.optional(),
  retries: z.array(retrySchema).optional(),
  unchanged: z.literal(true).optional(),
  spentBasis: z.enum(['estimated', 'none']).optional(),
  earlierSpent: z.number().finite().nonnegative().optional(),
});

const episodeSchema = z.object({
  id: episodeId,
  round: count,
  branch: count,
  lineage: count,
  base: sha,
  allowance: z.number().finite().nonnegative(),
  context: z.enum(['fresh', 'carry', 'copy']),
  contextFrom: episodeId.nullable(),
  directive: z.boolean(),
  asked: z.string().optional(),
  seed: z.number().int(),
  result: resultSchema.optional(),
  interruptedSpent: z.number().finite().nonnegative().optional(),
  unfinishedStarts: z.number().int().positive().optional(),
  killedStarts: z.number().int().positive().optional(),
  interruptedBasis: z.literal('estimated').optional(),
});

const roundSchema = z.object({
  index: count,
  segment: count,
  phase: z.string(),
  kind: z.enum(['fork', 'serial']),
  episodes: z.array(episodeSchema),
  decision: z
    .object({ winner: episodeId.nullable(), adopted: z.array(episodeId), voided: z.string().optional() })
    .optional(),
  extra: z.boolean().optional(),
  losers: z.array(z.object({ episode: episodeId, entries: z.array(z.string()), earlier: count })).optional(),
});

/** The version this forkflush writes state.json in (RunState's `version`). */
export const STATE_VERSION = 1;

export const runStateSchema = z.object({
  version: z.literal(STATE_VERSION),
  id: runId,
  seed: z.number().int(),
  config: configSchema.transform(withDerivedDefaults),
  base: z.object({
    commit: sha,
    score: z.number().finite().nullable(),
    reason: z.string().optional(),
    graderSeconds: z.number().nonnegative().optional(),
  }),
  lineages: z.array(z.object({ index: count, head: sha, context: episodeId.nullable() })).min(1),
  rounds: z.array(roundSchema),
  best: z
    .object({ episode: z.union([episodeId, z.literal('base')]), commit: sha, score: z.number().finite() })
    .nullable(),
  status: z.enum(['running', 'finished']),
  extraForks: count.optional(),
  forkAsks: z.record(z.string(), z.string()).optional(),
});

/** What a local run keeps besides its state: `run.json` in the run folder (`.forkflush/<run id>/`). */
export const localRunSchema = z.object({
  id: runId,
  /** The git repository the run works in. */
  repo: z.string().min(1),
  /** The folder the user named. */
  taskDir: z.string().min(1),
  /** True when the task folder was not a git repository and the run works on a copy. */
  scratch: z.boolean(),
  configFile: z.string().min(1),
  /** The config file's path inside the repository, protected like the grader (null: outside it). */
  configPathInRepo: z.string().min(1).nullable(),
  task: z.string(),
  templates: z.object({ branch: z.string().optional(), continuation: z.string().optional() }),
  /** Episodes at once. */
  concurrency: z.number().int().positive(),
  keepRejected: z.boolean(),
  startedAt: z.iso.datetime({ message: 'must be a date and time (ISO 8601)' }),
});

/** Facts about a local run that the core does not need. */
export type LocalRunInfo = z.output<typeof localRunSchema>;

/** The problem with a record, located: `<where>: <field>: <what>`. */
export class RecordError extends Error {
  override name = 'RecordError';
}

/** A record a newer forkflush wrote: nothing is read from it, or written over it, until an upgrade. */
export class NewerRecordError extends RecordError {}

/** What a record written by a newer forkflush, or edited by hand, is refused with. */
export const NEWER_OR_EDITED = 'written by a newer forkflush, or edited by hand: upgrade forkflush to go on';

/**
 * The first field of `raw` that parsing dropped (`a.b[2].c`), or null: a field a newer forkflush
 * added, which a save of the parsed record would lose for good.
 */
export function droppedField(raw: unknown, parsed: unknown, at = ''): string | null {
  if (Array.isArray(raw) && Array.isArray(parsed)) {
    for (let i = 0; i < Math.min(raw.length, parsed.length); i++) {
      const found = droppedField(raw[i], parsed[i], `${at}[${i}]`);
      if (found) return found;
    }
    return null;
  }
  if (!isPlainObject(raw) || !isPlainObject(parsed)) return null;
  for (const [key, value] of Object.entries(raw)) {
    const path = at ? `${at}.${key}` : key;
    if (!(key in parsed)) return value === undefined ? null : path;
    const found = droppedField(value, parsed[key], path);
    if (found) return found;
  }
  return null;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** One step of a record's history: a record of version n in, the same record in version n + 1's shape out. */
export type Migration = (record: Record<string, unknown>) => Record<string, unknown>;

/** One record file: its name, its schema, the version this forkflush writes, and how older ones are read. */
export interface RecordFile<S extends z.ZodType = z.ZodType> {
  /** The file's name, as the messages say it. */
  readonly name: string;
  /** The record in the current version's shape. */
  readonly schema: S;
  /** The version this forkflush writes, and the newest it reads. */
  readonly version: number;
  /** migrations[n] brings a version-n record to version n + 1: one step for each older version still read. */
  readonly migrations: Readonly<Record<number, Migration>>;
  /** The version of a record written before the file carried one; null when it always did. */
  readonly unversioned: number | null;
  /** Top-level fields another reader checks, which the schema leaves out (run.json's seal). */
  readonly outside?: readonly string[];
}

/**
 * A record file, checked once: its steps are whole numbers below `version`, without a gap up to
 * it, so every version from the oldest step on has a path to the current one.
 */
export function recordFile<S extends z.ZodType>(file: RecordFile<S>): RecordFile<S> {
  const steps = Object.keys(file.migrations).map(Number);
  if (!Number.isInteger(file.version) || file.version < 1) {
    throw new Error(`${file.name}: the record's version must be a whole number from 1`);
  }
  for (const n of steps) {
    if (!Number.isInteger(n) || n < 1 || n >= file.version) {
      throw new Error(`${file.name}: a migration from version ${n}, which is not below version ${file.version}`);
    }
  }
  for (let n = oldestVersion(file); n < file.version; n++) {
    if (!file.migrations[n]) throw new Error(`${file.name}: no migration from version ${n} to ${n + 1}`);
  }
  if (file.unversioned !== null && file.unversioned < oldestVersion(file)) {
    throw new Error(`${file.name}: records without a version are version ${file.unversioned}, which it cannot read`);
  }
  return file;
}

/** The oldest version a record file still reads. */
export function oldestVersion(file: RecordFile): number {
  return Math.min(file.version, ...Object.keys(file.migrations).map(Number));
}

export const STATE_RECORD = recordFile({
  name: 'state.json',
  schema: runStateSchema,
  version: STATE_VERSION,
  migrations: {},
  // state.json has said `version: 1` since its first commit.
  unversioned: null,
});

export const LOCAL_RUN_RECORD = recordFile({
  name: 'run.json',
  schema: localRunSchema,
  version: 1,
  migrations: {},
  // Written without a version until records had one; those records are version 1.
  unversioned: 1,
});

/**
 * Brings a record, as parsed from JSON, to the current version's shape: checks its version, then
 * runs the steps from it up. Throws a RecordError for a record of a newer or an unknown version.
 */
export function migrate(file: RecordFile, raw: unknown, where: string): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new RecordError(`${where}: not a JSON object (not a forkflush run record)`);
  }
  let record = raw as Record<string, unknown>;
  const given = record.version;
  let version: number;
  if (given === undefined) {
    if (file.unversioned === null) throw new RecordError(`${where}: version: missing (not a forkflush run record)`);
    version = file.unversioned;
  } else if (typeof given === 'number' && Number.isInteger(given) && given >= 1) {
    version = given;
  } else {
    throw new RecordError(
      `${where}: version: must be a whole number from 1, got ${JSON.stringify(given)} (not a forkflush run record)`,
    );
  }
  if (version > file.version) {
    throw new NewerRecordError(
      `${where}: version: written by a newer forkflush (version ${version}); this one reads up to ${file.version}: upgrade forkflush`,
    );
  }
  const oldest = oldestVersion(file);
  if (version < oldest) {
    throw new RecordError(
      `${where}: version: ${version} is older than this forkflush reads (versions ${oldest} to ${file.version})`,
    );
  }
  for (let n = version; n < file.version; n++) {
    const step = file.migrations[n];
    if (!step) throw new Error(`${file.name}: no migration from version ${n} to ${n + 1}`);
    record = { ...step(record), version: n + 1 };
  }
  return record;
}

/** Reads a record file's text: JSON, then `migrate`, then the schema. Throws a located RecordError. */
export function readRecord<S extends z.ZodType>(file: RecordFile<S>, text: string, where: string): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new RecordError(`${where}: not valid JSON (${(e as Error).message})`);
  }
  const record = migrate(file, raw, where);
  const parsed = file.schema.safeParse(record);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path ?? [];
    const field = path.map(String).join('.') || 'the record';
    const unknown = issue?.code === 'unrecognized_keys';
    throw new (unknown ? NewerRecordError : RecordError)(
      `${where}: ${field}: ${issue ? problem(issue, record) : 'not valid'} (${unknown ? NEWER_OR_EDITED : 'not a forkflush run record'})`,
    );
  }
  // `version` was read by `migrate`, and the fields `outside` by another reader.
  const fields = Object.fromEntries(
    Object.entries(record).filter(([k]) => k !== 'version' && !file.outside?.includes(k)),
  );
  const dropped = droppedField(fields, parsed.data);
  if (dropped)
    throw new NewerRecordError(`${where}: ${dropped}: a field this forkflush does not know (${NEWER_OR_EDITED})`);
  return parsed.data;
}

/** What is wrong with a field: "missing" for one that is not there, else the schema's message. */
function problem(issue: z.core.$ZodIssue, record: unknown): string {
  if (issue.code === 'unrecognized_keys') {
    return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  }
  if (issue.code !== 'invalid_type' || issue.path.length === 0) return issue.message;
  let at: unknown = record;
  for (const key of issue.path.slice(0, -1)) {
    at = typeof at === 'object' && at !== null ? (at as Record<PropertyKey, unknown>)[key] : undefined;
  }
  const last = issue.path.at(-1) as PropertyKey;
  const absent = typeof at === 'object' && at !== null && !(last in at);
  return absent ? `missing (expected ${issue.expected})` : issue.message;
}

/** A record as its file holds it: with the version this forkflush writes it in. */
export function versioned<T extends object>(file: RecordFile, value: T): T & { version: number } {
  // The version first, as state.json has always had it.
  return Object.assign({ version: file.version }, value, { version: file.version });
}

/** A record file's text: the record with its version, as JSON. */
export function recordText(file: RecordFile, value: object, indent = 1): string {
  return `${JSON.stringify(versioned(file, value), null, indent)}\n`;
}

export function parseRunState(text: string, where: string): RunState {
  const state: RunState = readRecord(STATE_RECORD, text, where);
  return state;
}

export function parseLocalRun(text: string, where: string): LocalRunInfo {
  return readRecord(LOCAL_RUN_RECORD, text, where);
}
