// The worker's events: a job of a round's run started (its episode's check shows it running), a job
// ended (a failed one is its episode's failure), the round's workflow run completed (every job has
// ended: an episode whose branch never moved has no result coming). Each is trusted only from the
// run the round's dispatch started in this repository, acted on once, and ends in one sync.
import type { Context } from 'probot';
import { episodeCheckPending } from '../core/github-text.js';
import {
  BASE_JOB,
  GITHUB,
  MAP_JOB,
  parseEpisodeId,
  parseEpisodeJobName,
  parseIssueRunId,
  parseMapRunTitle,
  parseRoundRunTitle,
  roundRunTitle,
  stateRef,
} from '../core/names.js';
import { deliveryKey, remember, seenAny } from '../core/seen-events.js';
import type { Round } from '../core/state.js';
import type { GitHubApi, GitHubRunRecord, StoredRun } from '../github/api.js';
import { mapJobEnded } from '../github/map.js';
import { syncOrYield } from '../github/sync.js';
import type { WorkflowRun } from '../github/workflows.js';
import { type AppContext, answeringTampered, type ContextOf, type LogFields } from './app-context.js';

/** The worker workflow's file, as GitHub names it in a workflow run (`path`). */
export const WORKER_PATH = `.github/workflows/${GITHUB.workflow}`;

/** A job of a round's run ended: a failure is its episode's (or the initial workspace's grade's). */
export async function onJobCompleted(ctxOf: ContextOf, context: Context<'workflow_job.completed'>): Promise<void> {
  const job = context.payload.workflow_job;
  const named = parseEpisodeJobName(job.name);
  // The app's runs are issues' runs: any other name is not one of its jobs.
  if (!named || parseIssueRunId(named.run) === null) return;
  const { run, episode } = named;
  if (episode === MAP_JOB) {
    const ctx = ctxOf(context, { run, episode });
    await answeringTampered(ctx, null, () =>
      mapJobEnded(ctx, {
        run,
        workflowRun: job.run_id,
        conclusion: job.conclusion,
        headBranch: job.head_branch,
        url: job.html_url ?? null,
        repositoryUrl: context.payload.repository.html_url,
        delivery: context.id,
      }),
    );
    return;
  }
  // The job that grades the initial workspace rides with the opening round.
  const round = episode === BASE_JOB ? 0 : (parseEpisodeId(episode)?.round ?? Number.NaN);
  const ctx = ctxOf(context, { run, round, episode });
  await workerReport(ctx, context.id, context.payload.repository.full_name, {
    run,
    round,
    workflowRun: job.run_id,
    headBranch: job.head_branch,
    what: `the failure of job ${job.id}`,
    fields: { job: job.id, workflow_run: job.run_id },
    // A failure is a fact about the episode only from its own job: a workflow in someone's
    // pull request could take the same job name. A cancelled job is its run's to tell: a run
    // cancelled in the Actions tab stops the run (onRunCompleted), not K failures and a next round.
    says: (open) =>
      job.conclusion !== 'success' &&
      job.conclusion !== 'cancelled' &&
      open.index === round &&
      (episode === BASE_JOB || open.episodes.some((e) => e.id === episode && !e.result)),
    apply: () => {
      ctx.failedJobs = { [episode]: `its job ended: ${job.conclusion ?? 'unknown'} (${job.html_url ?? job.id})` };
    },
  });
}

/**
 * A job of the round's own run started: its episode's check run says so, and links the job.
 * Nothing is recorded (an edit of the check is repeat-safe), and a late or doubled delivery
 * finds the check completed, or the episode with a result, and leaves it.
 */
export async function onJobStarted(ctxOf: ContextOf, context: Context<'workflow_job.in_progress'>): Promise<void> {
  const job = context.payload.workflow_job;
  const named = parseEpisodeJobName(job.name);
  if (!named || parseIssueRunId(named.run) === null || named.episode === BASE_JOB || named.episode === MAP_JOB) return;
  const { run, episode } = named;
  const round = parseEpisodeId(episode)?.round ?? Number.NaN;
  const ctx = ctxOf(context, { run, round, episode });
  await answeringTampered(ctx, null, async () => {
    const stored = await ctx.api.loadRun(stateRef(run));
    const open = stored?.state.rounds.find((r) => !r.decision);
    const e = open?.index === round ? open.episodes.find((x) => x.id === episode && !x.result) : undefined;
    const check = stored?.files.checks?.[episode];
    if (!stored || stored.files.stopped || !e || check === undefined) return;
    const why = await notTheRoundsRunProblem(
      ctx.api,
      stored.files,
      { id: job.run_id, headBranch: job.head_branch },
      run,
      round,
      context.payload.repository.full_name,
    );
    if (why) {
      ctx.log(`ignored the start of job ${job.id}: ${why}`, { job: job.id, workflow_run: job.run_id });
      return;
    }
    if ((await ctx.api.checks.status(check)) !== 'queued') return;
    await ctx.api.checks.update(check, {
      status: 'in_progress',
      ...(job.started_at ? { startedAt: job.started_at } : {}),
      ...(job.html_url ? { detailsUrl: job.html_url } : {}),
      output: episodeCheckPending(stored.state, e, 'in_progress'),
    });
  });
}

/** The round's workflow run completed: every job of the round has ended. */
export async function onRunCompleted(ctxOf: ContextOf, context: Context<'workflow_run.completed'>): Promise<void> {
  const w = context.payload.workflow_run;
  const mapOf = parseMapRunTitle(w.display_title ?? '');
  if (mapOf && parseIssueRunId(mapOf) !== null) return mapRunCompleted(ctxOf, context, mapOf);
  const m = parseRoundRunTitle(w.display_title ?? '');
  if (!m || parseIssueRunId(m.run) === null) return;
  const ctx = ctxOf(context, { run: m.run, round: m.round });
  // Every job of the round has ended: an episode whose branch never moved has no result coming.
  // Only the worker's own run may say so; any other run with that title is ignored entirely.
  const why = untrustedRunProblem(w, context.payload.repository.full_name);
  if (why) {
    ctx.log(`ignored workflow run ${w.id}: ${why}`, { workflow_run: w.id });
    return;
  }
  await workerReport(ctx, context.id, context.payload.repository.full_name, {
    run: m.run,
    round: m.round,
    workflowRun: w.id,
    headBranch: w.head_branch,
    what: `workflow run ${w.id}`,
    fields: { workflow_run: w.id },
    // Only for the open round: the end of a decided one says nothing.
    says: (open) => open.index === m.round,
    apply: () => {
      ctx.roundEnded = m.round;
      if (w.conclusion === 'cancelled') ctx.runCancelled = { round: m.round, workflowRun: w.id };
    },
  });
}

/** The map job's workflow run completed (Actions mode hears no job events): its map, or its failure. */
async function mapRunCompleted(ctxOf: ContextOf, context: Context<'workflow_run.completed'>, run: string) {
  const w = context.payload.workflow_run;
  const ctx = ctxOf(context, { run, episode: MAP_JOB });
  const why = untrustedRunProblem(w, context.payload.repository.full_name);
  if (why) {
    ctx.log(`ignored workflow run ${w.id}: ${why}`, { workflow_run: w.id });
    return;
  }
  await answeringTampered(ctx, null, () =>
    mapJobEnded(ctx, {
      run,
      workflowRun: w.id,
      conclusion: w.conclusion,
      headBranch: w.head_branch,
      url: w.html_url ?? null,
      repositoryUrl: context.payload.repository.html_url,
      delivery: context.id,
    }),
  );
}

/** What a worker event (a job's or a workflow run's end) reports, and how to check where it comes from. */
interface WorkerEvent {
  run: string;
  round: number;
  /** The workflow run the event comes from, and its branch. */
  workflowRun: number;
  headBranch: string | null | undefined;
  /** The event, for the log line that says it was ignored. */
  what: string;
  fields: LogFields;
  /** Whether the event reports a fact about the open round (else it only triggers a sync). */
  says: (open: Round) => boolean;
  /** The fact, handed to the sync once the event is known to come from the round's own run. */
  apply: () => void;
}

/**
 * A worker event, once: the run's record, the delivery not seen before, and a fact about the
 * open round of a running run (a stopped run reads none) only from the run the round's dispatch
 * started, on the default branch. Then one sync, saved with the delivery.
 */
async function workerReport(ctx: AppContext, delivery: string, repository: string, e: WorkerEvent): Promise<void> {
  await answeringTampered(ctx, null, async () => {
    const stored = await ctx.api.loadRun(stateRef(e.run));
    if (!stored) return;
    const key = deliveryKey(delivery);
    if (seenAny(stored.files.seenDeliveries, [key])) {
      ctx.log('this delivery was handled already');
      return;
    }
    const open = stored.state.rounds.find((r) => !r.decision);
    if (open && e.says(open) && !stored.files.stopped) {
      const why = await notTheRoundsRunProblem(
        ctx.api,
        stored.files,
        { id: e.workflowRun, headBranch: e.headBranch },
        e.run,
        e.round,
        repository,
      );
      if (why) {
        ctx.log(`ignored ${e.what}: ${why}`, e.fields);
        return;
      }
      e.apply();
    }
    await syncOrYield(ctx, withDelivery(stored, key));
  });
}

/** The stored run with a job or workflow-run delivery noted as handled, saved with what it changes. */
function withDelivery(stored: StoredRun, key: string): StoredRun {
  return { ...stored, files: { ...stored.files, seenDeliveries: remember(stored.files.seenDeliveries, [key]) } };
}

/** What the app reads of a workflow run (a webhook's `workflow_run`, or one listed by the API). */
interface WorkflowRunFacts {
  id: number;
  path?: string | null;
  event?: string | null;
  head_branch?: string | null;
  head_repository?: { full_name?: string | null } | null;
}

/**
 * Why a workflow run is not one the app dispatched in this repository, or null: the worker's
 * file, a dispatch (not a push, a pull request, a schedule), its head in this repository (not a fork).
 */
function untrustedRunProblem(w: WorkflowRunFacts, repository: string): string | null {
  if (w.path !== WORKER_PATH) return `its workflow file is ${w.path ?? 'unknown'}, not ${WORKER_PATH}`;
  if (w.event !== 'workflow_dispatch') return `it ran on ${w.event ?? 'an unknown event'}, not workflow_dispatch`;
  const head = w.head_repository?.full_name ?? '';
  if (head.toLowerCase() !== repository.toLowerCase()) {
    return `its head repository is ${head || 'unknown'}, not ${repository}`;
  }
  return null;
}

/**
 * Why workflow run `id` is not the one the round's latest dispatch started, or null. The record
 * names that run (GitHub's return_run_details) where GitHub said; otherwise it is the newest
 * dispatched run of the worker workflow with the round's title (one request): a stop cancels a
 * round's run and a resume dispatches it again, and the cancelled run's late events must not fail
 * the new one's episodes.
 */
async function notTheRoundsRunProblem(
  api: GitHubApi,
  files: GitHubRunRecord,
  { id, headBranch }: { id: number; headBranch: string | null | undefined },
  run: string,
  round: number,
  repository: string,
): Promise<string | null> {
  const dispatched = files.dispatched[String(round)];
  if (!dispatched) return `round ${round} has not been dispatched`;
  // The branch the round was dispatched on: the default branch then (it may have been renamed since).
  const branch = dispatched.branch ?? files.defaultBranch;
  if (headBranch !== branch) return `its run is on ${headBranch ?? 'an unknown branch'}, not ${branch}`;
  if (dispatched.runId !== undefined) {
    return dispatched.runId === id
      ? null
      : `round ${round}'s dispatch started workflow run ${dispatched.runId}, not ${id}`;
  }
  const title = roundRunTitle(run, round);
  // Run ids grow: the newest run is the one with the highest id, whatever order the list is in.
  const latest = (await api.workflows.runsTitled(GITHUB.workflow, title)).reduce<WorkflowRun | null>(
    (a, b) => (a && a.id > b.id ? a : b),
    null,
  );
  if (!latest) return `no dispatched run of the worker workflow is titled "${title}"`;
  if (latest.id !== id) return `round ${round}'s latest dispatch started workflow run ${latest.id}, not ${id}`;
  return untrustedRunProblem(latest, repository);
}
