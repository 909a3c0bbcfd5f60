// Reading what landed on GitHub: the open round's branch heads, each read back as a result only
// when forkflush's worker could have made it (on the episode's base, the run's protected paths
// unchanged), and the results a failed job, an ended round or a passed deadline imply.
import { createHash } from 'node:crypto';
import { forgeAlsoProtected, matchesAny } from '../core/globs.js';
import { resultFromCommit } from '../core/journal.js';
import { roundDeadlineMinutes } from '../core/method.js';
import { BASE_JOB, baseGradeRef } from '../core/names.js';
import { applyResult } from '../core/reconcile.js';
import { type EpisodeResult, failedResult, isBetter, type RunState } from '../core/state.js';
import type { GitCommit, GitHubApi, GitHubRunRecord, TreeFile } from './api.js';
import { refsOf } from './record.js';

/** What an event says happened, beyond what the branches show. */
export interface EventFacts {
  now: Date;
  /** Episodes whose job ended without a result, from the event that triggered this sync. */
  failedJobs?: Record<string, string>;
  /** A round whose worker workflow run has completed (all its jobs ended), from the event. */
  roundEnded?: number;
  /** The round whose own workflow run ended cancelled, by no stop of the app's (the Actions tab, a job's timeout). */
  runCancelled?: { round: number; workflowRun: number };
}

/** Commits read during one sync, so no commit is fetched twice. */
export class Commits {
  private readonly known = new Map<string, GitCommit>();

  constructor(private readonly api: GitHubApi) {}

  async get(sha: string): Promise<GitCommit> {
    const known = this.known.get(sha);
    if (known !== undefined) return known;
    const commit = await this.api.commit(sha);
    this.known.set(sha, commit);
    return commit;
  }
}

/** The protected files of a tree (mode, blob and path of each), as one digest. */
export function protectedDigest(tree: TreeFile[], globs: string[]): string {
  const lines = tree
    .filter((f) => matchesAny(f.path, globs))
    .map((f) => `${f.mode} ${f.sha}\t${f.path}`)
    .sort();
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}

/**
 * The grade of the initial workspace, once its job reports (a commit on refs/forkflush/<run>/base
 * on the base's very tree), or fails, or its round's run ends or deadline passes without it: noted
 * in `files` (baseGrade done), and in the state's base (and best, if the base beats every episode).
 */
export async function observeBase(
  api: GitHubApi,
  commits: Commits,
  state: RunState,
  files: GitHubRunRecord,
  seen: EventFacts,
): Promise<RunState> {
  const dispatched = files.dispatched['0'];
  if (files.baseGrade !== 'asked' || !dispatched) return state;
  const head = await api.refSha(baseGradeRef(state.id));
  let grade: { score: number | null; reason?: string; graderSeconds?: number } | null = null;
  if (head) {
    const commit = await commits.get(head);
    const read = resultFromCommit(state.id, { id: BASE_JOB, base: state.base.commit }, { sha: head, ...commit });
    // Graded on anything but the base's own tree, it grades something else.
    const problem =
      'problem' in read
        ? read.problem
        : files.baseTree && commit.tree !== files.baseTree
          ? `its commit ${head.slice(0, 7)} is not the initial workspace's tree`
          : null;
    grade =
      problem === null && 'result' in read
        ? {
            score: read.result.score,
            ...(read.result.reason ? { reason: read.result.reason } : {}),
            graderSeconds: read.result.graderSeconds,
          }
        : { score: null, reason: problem ?? 'not a grade' };
  } else if (seen.failedJobs?.[BASE_JOB]) {
    grade = { score: null, reason: seen.failedJobs[BASE_JOB] as string };
  } else if (seen.roundEnded === 0 || seen.now.getTime() > Date.parse(dispatched.deadline)) {
    grade = { score: null, reason: 'its job gave no grade by the end of the opening round' };
  }
  if (!grade) return state;
  files.baseGrade = 'done';
  if (!head) files.baseUngraded = true;
  return applyBaseGrade(state, grade);
}

/** The initial workspace's grade, as it landed after the run began; the best moves to it unless an episode beat it. */
export function applyBaseGrade(
  state: RunState,
  grade: { score: number | null; reason?: string; graderSeconds?: number },
): RunState {
  const base = {
    commit: state.base.commit,
    score: grade.score,
    ...(grade.reason ? { reason: grade.reason } : {}),
    ...(grade.graderSeconds !== undefined ? { graderSeconds: grade.graderSeconds } : {}),
  };
  // As locally, where the base is the best until an episode scores strictly better: a tie keeps the base.
  const beats =
    grade.score !== null && (!state.best || !isBetter(state.best.score, grade.score, state.config.grader.direction));
  return {
    ...state,
    base,
    ...(beats && grade.score !== null
      ? { best: { episode: 'base', commit: state.base.commit, score: grade.score } }
      : {}),
  };
}

/** Reads the results that landed on the open round's branches (one call for all of them). */
export async function observe(
  api: GitHubApi,
  commits: Commits,
  state: RunState,
  files: GitHubRunRecord,
  seen: EventFacts,
): Promise<RunState> {
  const open = state.rounds.find((r) => !r.decision);
  const dispatched = open ? files.dispatched[String(open.index)] : undefined;
  if (!open || !dispatched) return state;
  const refs = refsOf(state, files);
  const heads = await api.refHeads(refs.round(open.index));
  let next = state;
  for (const e of open.episodes) {
    if (e.result) continue;
    const head = heads.get(refs.episode(e.round, e.branch));
    let result: EpisodeResult | null = null;
    if (head && head !== e.base) {
      const commit = await commits.get(head);
      const read = resultFromCommit(state.id, e, { sha: head, ...commit }, state.config.budget.unit);
      const problem = 'problem' in read ? read.problem : await protectedProblem(api, state, files, head, commit);
      result = problem === null && 'result' in read ? read.result : failedResult(e, problem ?? 'not a result');
    } else if (seen.failedJobs?.[e.id]) {
      result = failedResult(e, seen.failedJobs[e.id] as string);
    } else if (seen.roundEnded === open.index) {
      result = failedResult(e, "its round's workflow run ended without a result for it");
    } else if (
      seen.now.getTime() > Date.parse(dispatched.deadline) &&
      !(await startedLate(api, files, e.id, state, seen.now))
    ) {
      result = failedResult(e, `${PAST_DEADLINE} (${dispatched.deadline})`);
    }
    if (result) next = applyResult(next, e.id, result);
  }
  return next;
}

/** The reason of an episode its round's deadline failed: its job is queued or hung, if it is anywhere. */
export const PAST_DEADLINE = "no result by the round's deadline";

/**
 * Whether an episode's job started after it waited for a runner (all runs' nightly rounds are
 * dispatched at once), and is still within the round's time counted from its start: its agent is
 * working, and a result it pushes must be read. Its check run says when it started.
 */
async function startedLate(
  api: GitHubApi,
  files: GitHubRunRecord,
  episode: string,
  state: RunState,
  now: Date,
): Promise<boolean> {
  const check = files.checks?.[episode];
  const started = check === undefined ? null : await api.checks.jobStarted(check);
  return started !== null && now.getTime() <= Date.parse(started) + roundDeadlineMinutes(state.config) * 60_000;
}

/**
 * Why a result commit changes what it must keep, or null: the run's base's protected paths.
 * Anything else was pushed by someone else (a token that leaked, a hand on the branch), whatever
 * its trailers say.
 */
async function protectedProblem(
  api: GitHubApi,
  state: RunState,
  files: GitHubRunRecord,
  sha: string,
  commit: GitCommit,
): Promise<string | null> {
  if (!files.protectedDigest) return null;
  const short = sha.slice(0, 7);
  const globs = [...state.config.grader.protected, ...forgeAlsoProtected(files.configPath)];
  const tree = await api.treeFiles(commit.tree, globs);
  if (tree === null) return `the tree of its commit ${short} is too large to check its protected paths`;
  if (protectedDigest(tree, globs) !== files.protectedDigest) {
    return `its commit ${short} changes protected paths (${globs.join(', ')}) from the run's base`;
  }
  return null;
}
