// GitHub's run.json: what the app keeps about a run besides its state, on the state ref, read
// and versioned as every record is (records.ts: one schema, `migrate`, a located RecordError).
import { z } from 'zod';
import { count, readRecord, recordFile, sha } from './records.js';

/** GitHub's run.json, part: where the run comes from and what it works on: fixed when it starts. */
const githubRunOrigin = z.object({
  /** The task: the issue's title and body as GitHub shows them, passed to the agent as data. */
  task: z.string(),
  /** How many hidden parts (HTML comments, invisible characters) were left out of the task. */
  hiddenInTask: count.optional(),
  templates: z.object({ branch: z.string().optional(), continuation: z.string().optional() }),
  configPath: z.string().min(1),
  /** The repository's default branch when the run started: where the worker workflow runs. */
  defaultBranch: z.string().min(1),
  issue: z.number().int().positive(),
  /**
   * A digest of the protected paths of the run's base (path, mode and blob of each): a result
   * whose tree differs there is refused. Absent in records made before it was kept.
   */
  protectedDigest: z.string().optional(),
  /** Whether the repository was private when the run started (how agent contexts are kept). */
  privateRepository: z.boolean().optional(),
  /**
   * Where the run keeps its work (core/names.ts RefsLayout): absent in records made before there
   * was a choice, whose runs go on as they began (layout 1, every ref a branch).
   */
  refsLayout: z.union([z.literal(1), z.literal(2)]).optional(),
  /** The tree of the run's base commit: the grade of the initial workspace must be on it. */
  baseTree: sha.optional(),
  /** What the issue's text or the starting command changed in the config (`budget=50 branches=2`), and where it came from. */
  overrides: z.object({ text: z.string(), source: z.string() }).optional(),
});

/** GitHub's run.json, part: what has been carried out on GitHub: the sync's work list reads it (record.ts workDone). */
const githubRunProgress = z.object({
  stopped: z.boolean(),
  /**
   * Round index -> when its jobs were dispatched, by when they must report, the branch the
   * dispatch ran on (the default branch then), and the worker workflow run it started, when GitHub
   * said (its `return_run_details`): only that run's completion, and its jobs' failures, are the round's.
   */
  dispatched: z.record(
    z.string(),
    z.object({
      at: z.string(),
      deadline: z.string(),
      branch: z.string().min(1).optional(),
      runId: z.number().int().positive().optional(),
    }),
  ),
  /** Episode id -> its pull request and check run, once its result has landed. */
  published: z.record(z.string(), z.object({ pr: z.number().int().nullable(), check: z.number().int().nullable() })),
  /** Rounds whose decision has been carried out on GitHub (lineage moved, losers closed). */
  settled: z.array(count),
  /**
   * When the run's issue was found deleted (GitHub answers 410 for it): the run stopped then, as no
   * one could see or stop it any more, and nothing is written on the issue from then on.
   */
  issueGone: z.string().optional(),
  finalPr: z.number().int().nullable(),
  /** The commit the best branch was last set to. */
  bestCommit: sha.nullable(),
  /** Work a handler has claimed (key -> when): others leave it alone unless the claim is stale. */
  claims: z.record(z.string(), z.string()),
  /**
   * The grade of the initial workspace: asked (its job rides with the opening round's dispatch,
   * and the opening round is decided once it is in) or done. Absent: never asked (older runs).
   */
  baseGrade: z.enum(['asked', 'done']).optional(),
  /** Done without a grade: its job failed or never reported (the run's gain over it is unknown). */
  baseUngraded: z.literal(true).optional(),
  /** Episode id -> its check run, made (queued) when its round is dispatched. */
  checks: z.record(z.string(), z.number().int()).optional(),
  /**
   * Check runs a resume let go of (their episodes run again, under new checks): completed, as
   * cancelled, by every sync until none is left, so a handler that dies after the resume's save
   * leaves none queued.
   */
  orphanChecks: z.array(z.number().int()).optional(),
  /** The commit the result branch was last set to (layout 2), and a digest of the result pull request's text. */
  resultHead: sha.optional(),
  /**
   * The login of the writer who started the run, or last resumed it or asked for a fork round:
   * the nightly rounds run on their behalf, while they keep write access.
   */
  startedBy: z.string().min(1).optional(),
  /** The night of the last nightly round: the day (YYYY-MM-DD, UTC) of the hour mark its tick served. */
  lastNightly: z.string().nullable(),
  /** Why the last nightly round did not run, as the issue was told (told once, until it changes). */
  nightlySkipped: z.string().optional(),
  /** Why the run stopped when nobody said `/autoresearch stop` (its round's run cancelled in Actions), for the issue; a resume clears it. */
  stopReason: z.string().optional(),
  /**
   * The work item that failed when last tried (a dispatch GitHub refused, a result branch someone
   * pushed to), what it said and since when: the issue says the run is stuck until an attempt passes.
   */
  blocked: z.object({ work: z.string(), message: z.string(), since: z.string() }).optional(),
  /**
   * The idea map a writer asked for last (`/autoresearch map`): the comment that asked (acted on
   * once), who and when; its job's dispatch and the workflow run it started (only that run's job
   * reports the map); the workflow run whose end was acted on (drawn or failed: until then the
   * tick looks for it); and the last map drawn (its commit on refs/forkflush/<run>/map and its
   * agreement line), which the issue was shown and the final comment embeds.
   */
  map: z
    .object({
      asked: z.string().min(1),
      by: z.string().min(1),
      at: z.string(),
      /** The default branch's commit whose config file the map's settings were checked in (absent: the run's own config). */
      configCommit: sha.optional(),
      dispatched: z
        .object({ at: z.string(), branch: z.string().min(1).optional(), runId: z.number().int().positive().optional() })
        .optional(),
      ended: z.number().int().positive().optional(),
      drawn: z.object({ commit: sha, image: z.string(), line: z.string() }).optional(),
    })
    .optional(),
});

/** GitHub's run.json, part: what people see of the run, kept current: the status comment, the run's check, the result pull request's text. */
const githubRunViews = z.object({
  /** The issue comment forkflush keeps editing, and a digest of what it says now. */
  commentId: z.number().int().nullable(),
  commentDigest: z.string().optional(),
  /**
   * The run's own check run (GITHUB.check), the commit it is on, a digest of what it says, and
   * whether it is completed (a round that starts after that gets a new one: GitHub shows the newest).
   */
  runCheck: z
    .object({ id: z.number().int(), sha, digest: z.string().optional(), done: z.boolean().optional() })
    .optional(),
  resultDigest: z.string().optional(),
  /** The files that run by themselves (core/globs.ts AUTOMATION) the result changes, for its pull request. */
  resultAutomation: z.array(z.string()).optional(),
  /** A warning about the worker workflow, found when the run started, for the status comment. */
  workerWarning: z.string().optional(),
  /** Round refs left in place as they hold a commit forkflush did not make (a person's push): ref to commit. */
  keptRefs: z.record(z.string(), sha).optional(),
});

/** GitHub's run.json, part: the events acted on already, and who wrote the record. */
const githubRunEvents = z.object({
  /**
   * The label and command events already acted on (`delivery:<X-GitHub-Delivery>`,
   * `comment:<id>`), the newest last, bounded (core/limits.ts, SEEN_KEPT): a delivery GitHub sends
   * twice, or that is replayed, is acted on once.
   */
  seen: z.array(z.string()).optional(),
  /** The same for job and workflow-run deliveries, recorded with what they changed. */
  seenDeliveries: z.array(z.string()).optional(),
  /**
   * The forkflush release of the app that last saved the record (`0.1.0`): a worker of an older
   * release that cannot read the record says which release to use.
   */
  writtenBy: z.string().min(1).optional(),
});

/**
 * What the app keeps about a GitHub run besides its state: `run.json` on the state ref. Its fields
 * in four groups (one JSON object on disk, as it always was): where the run comes from, what has
 * been carried out, what people see, and the events acted on.
 */
export const githubRunSchema = githubRunOrigin
  .extend(githubRunProgress.shape)
  .extend(githubRunViews.shape)
  .extend(githubRunEvents.shape);

export type GitHubRunRecord = z.output<typeof githubRunSchema>;

export const GITHUB_RUN_RECORD = recordFile({
  name: 'run.json',
  schema: githubRunSchema,
  version: 1,
  migrations: {},
  // Written without a version until records had one; those records are version 1.
  unversioned: 1,
  // Checked by github/record-seal.ts.
  outside: ['seal'],
});

export function parseGitHubRunRecord(text: string, where: string): GitHubRunRecord {
  return readRecord(GITHUB_RUN_RECORD, text, where);
}
