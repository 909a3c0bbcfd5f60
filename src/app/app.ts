// The Probot app: webhooks in, one sync of the run they concern out. Handlers only check who
// asked, which run it is, and whether the event can be trusted; every decision is the core's,
// every GitHub call goes through src/github/api.ts. People's events are in people-events.ts, the
// worker's in worker-events.ts.
//
// What the app trusts:
// - a label, a command or a review's directive only from a person with write access (a command from anyone else gets
//   no answer at all: anyone may comment on an issue, and must not be able to make the app talk);
// - each label and command once (its delivery id, and a command's comment id, in the run's record:
//   github/amend.ts), each job and workflow-run delivery once (recorded with what it changed);
// - the end of a round (`workflow_run.completed`) and a failed job (`workflow_job.completed`) only
//   from a run of the worker workflow file, dispatched (event `workflow_dispatch`) in this very
//   repository on the run's default branch, and, where the record has it, the run the round's
//   dispatch started. A workflow in a fork's pull request can take any name and title it likes,
//   but not that path, that event, this repository and that run id.
// Logs are structured: Probot's logger with the `delivery` and the `run`, `round` and `episode`
// each event concerns.
import type { Context, Probot } from 'probot';
import { GitHubApi } from '../github/api.js';
import { nightly } from '../github/nightly.js';
import type { SyncContext } from '../github/sync.js';
import { type AppOptions, contexts, RELEASE } from './app-context.js';
import { onComment, onIssueLabeled, onPullLabeled, onStopEvent } from './people-events.js';
import { onReview } from './review-events.js';
import { onJobCompleted, onJobStarted, onRunCompleted } from './worker-events.js';

export type { AppOptions };

export function forkflushApp(options: AppOptions = {}) {
  const ctxOf = contexts(options);
  return (app: Probot) => {
    app.on('issues.labeled', (context) => onIssueLabeled(ctxOf, context));
    app.on('pull_request.labeled', (context) => onPullLabeled(ctxOf, context));
    app.on(['issues.unlabeled', 'issues.closed', 'issues.deleted', 'issues.transferred'], (context) =>
      onStopEvent(ctxOf, context),
    );
    app.on('issue_comment.created', (context) => onComment(ctxOf, context));
    app.on('pull_request_review.submitted', (context) => onReview(ctxOf, context));
    app.on('workflow_job.completed', (context) => onJobCompleted(ctxOf, context));
    app.on('workflow_job.in_progress', (context) => onJobStarted(ctxOf, context));
    app.on('workflow_run.completed', (context) => onRunCompleted(ctxOf, context));
    // A suspended installation is sent no events: rounds that ended meanwhile are repaired now, not
    // at the next nightly tick (a run would say "running" until then). Tonight's round waits for its hour.
    app.on('installation.unsuspend', (context) =>
      tickInstallation(context.octokit, options.now ?? (() => new Date()), options.recordKey ?? null, context.log, {
        rounds: false,
      }),
    );
  };
}

/**
 * The nightly tick (with `rounds` false, the repair alone) of each repository an installation's
 * octokit can see, one at a time. One repository's trouble (a revoked permission, a broken record)
 * is logged and does not stop the others.
 */
export async function tickInstallation(
  octokit: Context['octokit'],
  now: () => Date,
  recordKey: Buffer | null,
  logger: Context['log'],
  { rounds, night }: { rounds: boolean; night?: string },
): Promise<void> {
  const repos = await octokit.paginate(octokit.rest.apps.listReposAccessibleToInstallation, { per_page: 100 });
  for (const r of repos) {
    const log = logger.child({ repository: r.full_name });
    try {
      const api = new GitHubApi(octokit, r.owner.login, r.name, recordKey, RELEASE, r.id);
      const touched = await nightly(
        { api, now: now(), log: (line, fields) => log.info(fields ?? {}, line) },
        now,
        rounds,
        night,
      );
      const what = rounds ? 'nightly tick' : 'repair';
      if (touched.length > 0)
        log.info({ runs: touched }, `forkflush: ${what} of ${r.full_name}: ${touched.join(', ')}`);
    } catch (e) {
      log.error({ err: e }, `forkflush: the ${rounds ? 'nightly tick' : 'repair'} of ${r.full_name} failed`);
    }
  }
}

/**
 * The nightly tick for one repository (the scheduled workflow in Actions mode calls it). `now` is
 * read again for each run: a round's deadline counts from when it is really dispatched, however
 * long the repositories before it took (a Date: a clock that stands still).
 */
export async function nightlyTick(
  api: GitHubApi,
  now: Date | (() => Date),
  log?: SyncContext['log'],
  tick?: string,
): Promise<string[]> {
  const clock = typeof now === 'function' ? now : () => now;
  return nightly({ api, now: clock(), ...(log ? { log } : {}), ...(tick ? { tick } : {}) }, clock);
}
