// The run's records, one schema per file, checked on every read: `state.json` (the core's
// RunState, the same locally and on GitHub) and, on GitHub, `run.json` (what the app needs besides).
// A record is data a crash, an old version or a hand with a token may have written: it is parsed,
// never cast. Version 1 records written before a field existed get the field's default.
import { z } from 'zod';
import { configSchema, withDerivedDefaults } from './config.js';
import type { RunState } from './state.js';

const sha = z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, { message: 'must be a commit id' });
const episodeId = z.string().regex(/^r\d+\.b\d+$/, { message: 'must be an episode id (r<round>.b<branch>)' });
const count = z.number().int().nonnegative();

const usageSchema = z.object({
  inputTokens: z.number().nonnegative(),
  outputTokens: z.number().nonnegative(),
  costUsd: z.number().nonnegative().nullable(),
  turns: count.nullable(),
  pricedFrom: z.string().optional(),
});

const resultSchema = z.object({
  commit: sha,
  score: z.number().finite().nullable(),
  reason: z.string().optional(),
  spent: z.number().finite().nonnegative(),
  exit: z.enum(['finished', 'budget', 'timeout', 'crash']),
  protectedChanged: z.array(z.string()),
  agentSeconds: z.number().nonnegative(),
  graderSeconds: z.number().nonnegative(),
  note: z.string().optional(),
  usage: usageSchema.optional(),
  wallSeconds: z.number().nonnegative(),
  sandbox: z.string().optional(),
  contextStore: z.enum(['encrypted', 'plain', 'none']).optional(),
  agentNotStarted: z.string().optional(),
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
  seed: z.number().int(),
  result: resultSchema.optional(),
  interruptedSpent: z.number().finite().nonnegative().optional(),
});

const roundSchema = z.object({
  index: count,
  segment: count,
  phase: z.string(),
  kind: z.enum(['fork', 'serial']),
  episodes: z.array(episodeSchema),
  decision: z.object({ winner: episodeId.nullable(), adopted: z.array(episodeId) }).optional(),
  extra: z.boolean().optional(),
});

export const runStateSchema = z.object({
  version: z.literal(1),
  id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/),
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
});

/** What the app keeps about a GitHub run besides its state: `run.json` on the state ref. */
export const runFilesSchema = z.object({
  /** The task: the issue's title and body as GitHub shows them, passed to the agent as data. */
  task: z.string(),
  /** How many hidden parts (HTML comments, invisible characters) were left out of the task. */
  hiddenInTask: count.optional(),
  templates: z.object({ branch: z.string().optional(), continuation: z.string().optional() }),
  configPath: z.string().min(1),
  /** The repository's default branch when the run started: where the worker workflow runs. */
  defaultBranch: z.string().min(1),
  issue: z.number().int().positive(),
  /** The issue comment forkflush keeps editing, and a digest of what it says now. */
  commentId: z.number().int().nullable(),
  commentDigest: z.string().optional(),
  stopped: z.boolean(),
  /** Round index -> when its jobs were dispatched and by when they must report. */
  dispatched: z.record(z.string(), z.object({ at: z.string(), deadline: z.string() })),
  /** Episode id -> its pull request and check run, once its result has landed. */
  published: z.record(z.string(), z.object({ pr: z.number().int().nullable(), check: z.number().int().nullable() })),
  /** Rounds whose decision has been carried out on GitHub (lineage moved, losers closed). */
  settled: z.array(count),
  finalPr: z.number().int().nullable(),
  /** The commit the best branch was last set to. */
  bestCommit: sha.nullable(),
  /** The day (YYYY-MM-DD) of the last nightly round. */
  lastNightly: z.string().nullable(),
  /** Work a handler has claimed (key -> when): others leave it alone unless the claim is stale. */
  claims: z.record(z.string(), z.string()),
  /**
   * A digest of the protected paths of the run's base (path, mode and blob of each): a result
   * whose tree differs there is refused. Absent in records made before it was kept.
   */
  protectedDigest: z.string().optional(),
  /** Whether the repository was private when the run started (how agent contexts are kept). */
  privateRepository: z.boolean().optional(),
});

export type RunFiles = z.output<typeof runFilesSchema>;

/** The problem with a record, located: `<where>: <field>: <what>`. */
export class RecordError extends Error {
  override name = 'RecordError';
}

export function parseRunState(text: string, where: string): RunState {
  const state: RunState = parseWith(runStateSchema, text, where);
  return state;
}

export function parseRunFiles(text: string, where: string): RunFiles {
  return parseWith(runFilesSchema, text, where);
}

function parseWith<T extends z.ZodType>(schema: T, text: string, where: string): z.output<T> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new RecordError(`${where}: not valid JSON (${(e as Error).message})`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.map(String).join('.') || 'the record';
    throw new RecordError(`${where}: ${field}: ${issue?.message ?? 'not valid'} (not a forkflush run record)`);
  }
  return parsed.data;
}
