// The Probot app: webhooks in, one sync of the run they concern out. Handlers only check who
// asked, which run it is, and whether the event can be trusted; every decision is the core's,
// every GitHub call is the forge's.
//
// What the app trusts:
// - a label or a command only from a person with write access (a command from anyone else gets
//   no answer at all: anyone may comment on an issue, and must not be able to make the app talk);
// - each label and command once (its delivery id, and a command's comment id, in the run's record:
//   github/commands.ts), each job and workflow-run delivery once (recorded with what it changed);
// - the end of a round (`workflow_run.completed`) and a failed job (`workflow_job.completed`) only
//   from a run of the worker workflow file, dispatched (event `workflow_dispatch`) in this very
//   repository on the run's default branch, and, where the record has it, the run the round's
//   dispatch started. A workflow in a fork's pull request can take any name and title it likes,
//   but not that path, that event, this repository and that run id.
// Logs are structured: Probot's logger with the `delivery` and the `run`, `round` and `episode`
// each event concerns.
import type { Context, Probot } from 'probot';
import pkg from '../../package.json' with { type: 'json' };
import { type Command, episodeCheckPending, parseCommand } from '../core/github-text.js';
import { commentKey, deliveryKey, remember, seenAny } from '../core/limits.js';
import {
  BASE_JOB,
  GITHUB,
  issueRunId,
  parseEpisodeId,
  parseEpisodeJobName,
  parseIssueRunId,
  parseRoundRunTitle,
  roundRunTitle,
  stateRef,
} from '../core/names.js';
import type { Round } from '../core/state.js';
import { retryStopped } from '../core/stop.js';
import {
  canWrite,
  forkNow,
  forkProblem,
  nightly,
  runsPerRepo,
  type Steer,
  setStopped,
  startRun,
} from '../github/commands.js';
import { GitHubForge, type RunFiles, type StoredRun, type WorkflowRun } from '../github/forge.js';
import { TamperedRecordError } from '../github/record-seal.js';
import { type SyncContext, syncOrYield, syncRun } from '../github/sync.js';

/** The worker workflow's file, as GitHub names it in a workflow run (`path`). */
export const WORKER_PATH = `.github/workflows/${GITHUB.workflow}`;

export interface AppOptions {
  now?: () => Date;
  /** Actions mode: the tick's workflow, which the app enables while a run needs it (GITHUB.tickWorkflow). */
  tick?: string;
  /** Seals the run records (src/github/record-seal.ts); null: they are not sealed. */
  recordKey?: Buffer | null;
}

/** The fields of a log line that say what it is about. */
export interface LogFields {
  run?: string;
  round?: number;
  episode?: string;
  [key: string]: unknown;
}

type Log = Context['log'];

/** A handler's context: the sync's, and the event's logger (delivery, run, round, episode). */
interface AppContext extends SyncContext {
  logger: Log;
  log: (line: string, fields?: LogFields) => void;
}

/** The forkflush release this app is, stamped on every run record it saves. */
export const RELEASE: string = pkg.version;

export function forkflushApp(options: AppOptions = {}) {
  const now = options.now ?? (() => new Date());
  return (app: Probot) => {
    const ctxOf = (context: Context, fields: LogFields = {}): AppContext => {
      const { owner, repo } = context.repo();
      const logger = context.log.child({ delivery: context.id, ...fields });
      return {
        forge: new GitHubForge(context.octokit, owner, repo, options.recordKey ?? null, RELEASE),
        now: now(),
        ...(options.tick ? { tick: options.tick } : {}),
        logger,
        log: (line, more) => logger.info(more ?? {}, line),
      };
    };

    app.on('issues.labeled', async (context) => {
      const { issue, label, sender } = context.payload;
      if (label?.name !== GITHUB.label) return;
      const ctx = ctxOf(context, { run: issueRunId(issue.number) });
      // Labelling takes triage access at least: the person is told why nothing started.
      const refusal = await refuse(ctx, sender, 'start a run');
      if (refusal) {
        await ctx.forge.comment(issue.number, refusal);
        return;
      }
      await answeringTampered(ctx, issue.number, async () => {
        const steer = { by: sender.login, keys: [deliveryKey(context.id)] };
        const out = await startRun(ctx, { number: issue.number, title: issue.title, body: issue.body ?? null }, steer);
        if ('problem' in out) await ctx.forge.comment(issue.number, `forkflush did not start: ${out.problem}`);
      });
    });

    app.on('pull_request.labeled', async (context) => {
      if (context.payload.label?.name !== GITHUB.label || context.payload.sender.type === 'Bot') return;
      await ctxOf(context).forge.comment(
        context.payload.pull_request.number,
        `forkflush runs on issues, not pull requests: describe the task in an issue and label that \`${GITHUB.label}\`.`,
      );
    });

    // Removing the label (or, from a finished run, its done label) or closing the issue stops a run,
    // finished ones too (no more rounds after the plan); the lineage and best refs stay.
    app.on(['issues.unlabeled', 'issues.closed'], async (context) => {
      const p = context.payload;
      if (p.action === 'unlabeled' && p.label?.name !== GITHUB.label && p.label?.name !== GITHUB.doneLabel) return;
      if (p.sender.type === 'Bot') return;
      const ctx = ctxOf(context, { run: issueRunId(p.issue.number) });
      const stored = await ctx.forge.loadRun(stateRef(issueRunId(p.issue.number)));
      if (!stored || stored.files.stopped) return;
      // An issue's author may close it without write access; that alone does not stop a run.
      // (Removing a label already takes triage access or more.)
      if (p.action === 'closed' && !canWrite(await ctx.forge.permission(p.sender.login))) return;
      await setStopped(ctx, stored, true, { by: p.sender.login, keys: [deliveryKey(context.id)] });
    });

    app.on('issue_comment.created', async (context) => {
      const { comment, issue, sender } = context.payload;
      if (sender.type === 'Bot') return;
      const parsed = parseCommand(comment.body);
      if (!parsed) return;
      const ctx = ctxOf(context, issue.pull_request ? { pull: issue.number } : { run: issueRunId(issue.number) });
      // Nothing is said before the permission check, and nothing after it to someone without
      // write access: anyone may comment, and a comment must not make the app talk.
      const permission = await ctx.forge.permission(sender.login);
      if (!canWrite(permission)) {
        ctx.log(`ignored a command from ${sender.login}, who has no write access (${permission})`);
        return;
      }
      // On a pull request, the command steers the run whose pull request it is (and is answered there).
      const target = issue.pull_request ? await runIssueOfPull(ctx.forge, issue.number) : issue.number;
      if (target === null) {
        ctx.log(`ignored a command on pull request #${issue.number}, which is no run's`);
        return;
      }
      // Taken: the writer sees it at once (a reaction; a doubled delivery adds nothing).
      await ctx.forge.react(comment.id, 'eyes');
      if ('error' in parsed) {
        await ctx.forge.comment(issue.number, parsed.error);
        await ctx.forge.react(comment.id, '-1');
        return;
      }
      let done = false;
      await answeringTampered(ctx, issue.number, async () => {
        const steer = { by: sender.login, keys: [commentKey(comment.id), deliveryKey(context.id)] };
        const reply = await runCommand(ctx, parsed.command, { ...issue, number: target }, steer);
        if (reply) await ctx.forge.comment(issue.number, reply);
        done = reply === null;
      });
      // Done, or refused (the reply says why).
      await ctx.forge.react(comment.id, done ? '+1' : '-1');
    });

    app.on('workflow_job.completed', async (context) => {
      const job = context.payload.workflow_job;
      const named = parseEpisodeJobName(job.name);
      // The app's runs are issues' runs: any other name is not one of its jobs.
      if (!named || parseIssueRunId(named.run) === null) return;
      const { run, episode } = named;
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
        // pull request could take the same job name.
        says: (open) =>
          job.conclusion !== 'success' &&
          open.index === round &&
          (episode === BASE_JOB || open.episodes.some((e) => e.id === episode && !e.result)),
        apply: () => {
          ctx.failedJobs = { [episode]: `its job ended: ${job.conclusion ?? 'unknown'} (${job.html_url ?? job.id})` };
        },
      });
    });

    // A job of the round's own run started: its episode's check run says so, and links the job.
    // Nothing is recorded (an edit of the check is repeat-safe), and a late or doubled delivery
    // finds the check completed, or the episode with a result, and leaves it.
    app.on('workflow_job.in_progress', async (context) => {
      const job = context.payload.workflow_job;
      const named = parseEpisodeJobName(job.name);
      if (!named || parseIssueRunId(named.run) === null || named.episode === BASE_JOB) return;
      const { run, episode } = named;
      const round = parseEpisodeId(episode)?.round ?? Number.NaN;
      const ctx = ctxOf(context, { run, round, episode });
      await answeringTampered(ctx, null, async () => {
        const stored = await ctx.forge.loadRun(stateRef(run));
        const open = stored?.state.rounds.find((r) => !r.decision);
        const e = open?.index === round ? open.episodes.find((x) => x.id === episode && !x.result) : undefined;
        const check = stored?.files.checks?.[episode];
        if (!stored || stored.files.stopped || !e || check === undefined) return;
        const why =
          job.head_branch !== stored.files.defaultBranch
            ? `its run is on ${job.head_branch ?? 'an unknown branch'}, not ${stored.files.defaultBranch}`
            : await notTheRoundsRun(
                ctx.forge,
                stored.files,
                job.run_id,
                run,
                round,
                context.payload.repository.full_name,
              );
        if (why) {
          ctx.log(`ignored the start of job ${job.id}: ${why}`, { job: job.id, workflow_run: job.run_id });
          return;
        }
        if ((await ctx.forge.checkRunStatus(check)) !== 'queued') return;
        await ctx.forge.updateCheckRun(check, {
          status: 'in_progress',
          ...(job.started_at ? { startedAt: job.started_at } : {}),
          ...(job.html_url ? { detailsUrl: job.html_url } : {}),
          output: episodeCheckPending(stored.state, e, 'in_progress'),
        });
      });
    });

    app.on('workflow_run.completed', async (context) => {
      const w = context.payload.workflow_run;
      const m = parseRoundRunTitle(w.display_title ?? '');
      if (!m || parseIssueRunId(m.run) === null) return;
      const ctx = ctxOf(context, { run: m.run, round: m.round });
      // Every job of the round has ended: an episode whose branch never moved has no result coming.
      // Only the worker's own run may say so; any other run with that title is ignored entirely.
      const why = untrustedRun(w, context.payload.repository.full_name);
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
        },
      });
    });
  };
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
 * The issue whose run a pull request is: the run's result pull request, or one of its episodes'
 * (pull_requests: winners or episodes), as its record says; null for any other pull request.
 */
async function runIssueOfPull(forge: GitHubForge, pr: number): Promise<number | null> {
  const head = (await forge.pullRequest(pr))?.head ?? '';
  const run = /^forkflush\/([^/]+)\//.exec(head)?.[1];
  const issue = run === undefined ? null : parseIssueRunId(run);
  if (run === undefined || issue === null) return null;
  const files = (await forge.loadRun(stateRef(run)))?.files;
  const own = files && (files.finalPr === pr || Object.values(files.published).some((p) => p.pr === pr));
  return own ? issue : null;
}

/**
 * A worker event, once: the run's record, the delivery not seen before, and a fact about the
 * open round of a running run (a stopped run reads none) only from the run the round's dispatch
 * started, on the default branch. Then one sync, saved with the delivery.
 */
async function workerReport(ctx: AppContext, delivery: string, repository: string, e: WorkerEvent): Promise<void> {
  await answeringTampered(ctx, null, async () => {
    const stored = await ctx.forge.loadRun(stateRef(e.run));
    if (!stored) return;
    const key = deliveryKey(delivery);
    if (seenAny(stored.files.seenDeliveries, [key])) {
      ctx.log('this delivery was handled already');
      return;
    }
    const open = stored.state.rounds.find((r) => !r.decision);
    if (open && e.says(open) && !stored.files.stopped) {
      const why =
        e.headBranch !== stored.files.defaultBranch
          ? `its run is on ${e.headBranch ?? 'an unknown branch'}, not ${stored.files.defaultBranch}`
          : await notTheRoundsRun(ctx.forge, stored.files, e.workflowRun, e.run, e.round, repository);
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
function untrustedRun(w: WorkflowRunFacts, repository: string): string | null {
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
async function notTheRoundsRun(
  forge: GitHubForge,
  files: RunFiles,
  id: number,
  run: string,
  round: number,
  repository: string,
): Promise<string | null> {
  const dispatched = files.dispatched[String(round)];
  if (!dispatched) return `round ${round} has not been dispatched`;
  if (dispatched.runId !== undefined) {
    return dispatched.runId === id
      ? null
      : `round ${round}'s dispatch started workflow run ${dispatched.runId}, not ${id}`;
  }
  const title = roundRunTitle(run, round);
  // Run ids grow: the newest run is the one with the highest id, whatever order the list is in.
  const latest = (await forge.runsTitled(GITHUB.workflow, title)).reduce<WorkflowRun | null>(
    (a, b) => (a && a.id > b.id ? a : b),
    null,
  );
  if (!latest) return `no dispatched run of the worker workflow is titled "${title}"`;
  if (latest.id !== id) return `round ${round}'s latest dispatch started workflow run ${latest.id}, not ${id}`;
  return untrustedRun(latest, repository);
}

/**
 * Runs a handler's work; a run record this app did not write stops it. The person who asked (a
 * label, a command) is told on the issue; a job's event only logs it, once per event.
 */
async function answeringTampered(ctx: AppContext, issue: number | null, work: () => Promise<unknown>) {
  try {
    await work();
  } catch (e) {
    if (!(e instanceof TamperedRecordError)) throw e;
    ctx.logger.warn(`forkflush: refused a run record: ${e.message}`);
    if (issue !== null) await ctx.forge.comment(issue, `forkflush did nothing: ${e.message}.`);
  }
}

/** Why a user may not act (a short comment), or null when they may. */
async function refuse(ctx: SyncContext, sender: { login: string; type: string }, what: string): Promise<string | null> {
  if (sender.type === 'Bot') return `forkflush ignores bots: ${sender.login} cannot ${what}.`;
  const permission = await ctx.forge.permission(sender.login);
  if (canWrite(permission)) return null;
  return `@${sender.login}: only people with write access to this repository can ${what} (yours: ${permission}).`;
}

/** A writer's command; returns the reply, or null for none. */
async function runCommand(
  ctx: AppContext,
  command: Command,
  issue: { number: number; title: string; body?: string | null },
  steer: Steer,
): Promise<string | null> {
  const run = issueRunId(issue.number);
  const stored = await ctx.forge.loadRun(stateRef(run));
  if (!stored) {
    if (command === 'resume') {
      const out = await startRun(ctx, { number: issue.number, title: issue.title, body: issue.body ?? null }, steer);
      return 'problem' in out ? `forkflush did not start: ${out.problem}` : null;
    }
    return `There is no forkflush run on this issue. Label it \`${GITHUB.label}\` to start one.`;
  }
  // The same comment delivered again (or replayed) is the same command: it was carried out.
  if (command !== 'status' && seenAny(stored.files.seen, steer.keys)) {
    ctx.log(`${command}: this comment was acted on already`);
    return null;
  }
  switch (command) {
    case 'status':
      await syncRun(ctx, run);
      return null;
    case 'stop':
      if (stored.files.stopped) return 'The run is already stopped.';
      await setStopped(ctx, stored, true, steer);
      return null;
    case 'resume': {
      // A running run resumes nothing, unless its setup stopped it: then its round runs again.
      if (!stored.files.stopped && stored.state.status !== 'finished' && !retryStopped(stored.state)) {
        await syncRun(ctx, run);
        return null;
      }
      if (!stored.files.stopped && stored.state.status === 'finished')
        return 'The run is finished: `/autoresearch fork` runs one more fork round.';
      const busy = await runsPerRepo(ctx.forge, stored.state.config, run, '`/autoresearch resume` again');
      if (busy) return `forkflush did not resume the run: ${busy}`;
      await setStopped(ctx, stored, false, steer);
      return null;
    }
    case 'fork': {
      if (stored.files.stopped) return 'The run is stopped: `/autoresearch resume` first.';
      const problem = forkProblem(stored.state, ctx.now);
      if (problem) return `forkflush opened no fork round: ${problem}`;
      await forkNow(ctx, stored, steer);
      return null;
    }
  }
}

/** The nightly tick for one repository (the scheduled workflow in Actions mode calls it). */
export async function nightlyTick(
  forge: GitHubForge,
  at: Date,
  log?: SyncContext['log'],
  tick?: string,
): Promise<string[]> {
  return nightly({ forge, now: at, ...(log ? { log } : {}), ...(tick ? { tick } : {}) });
}
