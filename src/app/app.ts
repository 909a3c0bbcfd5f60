// The Probot app: webhooks in, one sync of the run they concern out. Handlers only check who
// asked and which run it is; every decision is the core's, every GitHub call is the forge's.
import type { Context, Probot } from 'probot';
import { type Command, parseCommand } from '../core/github-text.js';
import {
  GITHUB,
  issueRunId,
  parseEpisodeJobName,
  parseIssueRunId,
  parseRoundRunTitle,
  stateRef,
} from '../core/names.js';
import { forkNow, nightly, setStopped, startRun } from '../github/commands.js';
import { GitHubForge } from '../github/forge.js';
import { TamperedRecordError } from '../github/record-seal.js';
import { type SyncContext, syncRun } from '../github/sync.js';

/** Permissions that may start and steer runs. */
const WRITERS = ['admin', 'maintain', 'write'];

export interface AppOptions {
  now?: () => Date;
  /** Seals the run records (src/github/record-seal.ts); null: they are not sealed. */
  recordKey?: Buffer | null;
}

export function forkflushApp(options: AppOptions = {}) {
  const now = options.now ?? (() => new Date());
  return (app: Probot) => {
    const ctxOf = (context: Context): SyncContext => {
      const { owner, repo } = context.repo();
      return {
        forge: new GitHubForge(context.octokit, owner, repo, options.recordKey ?? null),
        now: now(),
        log: (l) => context.log.info(l),
      };
    };

    app.on('issues.labeled', async (context) => {
      const { issue, label, sender } = context.payload;
      if (label?.name !== GITHUB.label) return;
      const ctx = ctxOf(context);
      const refusal = await refuse(ctx, sender, 'start a run');
      if (refusal) {
        await ctx.forge.comment(issue.number, refusal);
        return;
      }
      await answeringTampered(ctx, issue.number, async () => {
        const out = await startRun(ctx, { number: issue.number, title: issue.title, body: issue.body ?? null });
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

    // Removing the label or closing the issue stops a run; the lineage and best branches stay.
    app.on(['issues.unlabeled', 'issues.closed'], async (context) => {
      const p = context.payload;
      if (p.action === 'unlabeled' && p.label?.name !== GITHUB.label) return;
      if (p.sender.type === 'Bot') return;
      const ctx = ctxOf(context);
      const stored = await ctx.forge.loadRun(stateRef(issueRunId(p.issue.number)));
      if (!stored || stored.files.stopped || stored.state.status === 'finished') return;
      // An issue's author may close it without write access; that alone does not stop a run.
      // (Removing a label already takes triage access or more.)
      if (p.action === 'closed' && !WRITERS.includes(await ctx.forge.permission(p.sender.login))) return;
      await setStopped(ctx, stored, true);
    });

    app.on('issue_comment.created', async (context) => {
      const { comment, issue, sender } = context.payload;
      if (sender.type === 'Bot' || issue.pull_request) return;
      const parsed = parseCommand(comment.body);
      if (!parsed) return;
      const ctx = ctxOf(context);
      if ('error' in parsed) {
        await ctx.forge.comment(issue.number, parsed.error);
        return;
      }
      const refusal = await refuse(ctx, sender, `use \`/autoresearch ${parsed.command}\``);
      if (refusal) {
        await ctx.forge.comment(issue.number, refusal);
        return;
      }
      await answeringTampered(ctx, issue.number, async () => {
        const reply = await runCommand(ctx, parsed.command, issue);
        if (reply) await ctx.forge.comment(issue.number, reply);
      });
    });

    app.on('workflow_job.completed', async (context) => {
      const job = context.payload.workflow_job;
      const named = parseEpisodeJobName(job.name);
      // The app's runs are issues' runs: any other name is not one of its jobs.
      if (!named || parseIssueRunId(named.run) === null) return;
      const { run, episode } = named;
      const ctx = ctxOf(context);
      // Only the worker workflow, dispatched on the default branch, may report an episode failed: a
      // workflow in someone's pull request could take the same job name.
      if (job.conclusion !== 'success' && job.head_branch === context.payload.repository.default_branch) {
        ctx.failedJobs = { [episode]: `its job ended: ${job.conclusion ?? 'unknown'} (${job.html_url ?? job.id})` };
      }
      await answeringTampered(ctx, null, () => syncRun(ctx, run));
    });

    app.on('workflow_run.completed', async (context) => {
      const w = context.payload.workflow_run;
      const m = parseRoundRunTitle(w.display_title ?? '');
      if (!m || parseIssueRunId(m.run) === null) return;
      const ctx = ctxOf(context);
      // Every job of the round has ended: an episode whose branch never moved has no result coming.
      if (w.head_branch === context.payload.repository.default_branch) ctx.roundEnded = m.round;
      await answeringTampered(ctx, null, () => syncRun(ctx, m.run));
    });
  };
}

/**
 * Runs a handler's work; a run record this app did not write stops it. The person who asked (a
 * label, a command) is told on the issue; a job's event only logs it, once per event.
 */
async function answeringTampered(ctx: SyncContext, issue: number | null, work: () => Promise<unknown>) {
  try {
    await work();
  } catch (e) {
    if (!(e instanceof TamperedRecordError)) throw e;
    ctx.log?.(`forkflush: refused a run record: ${e.message}`);
    if (issue !== null) await ctx.forge.comment(issue, `forkflush did nothing: ${e.message}.`);
  }
}

/** Why a user may not act (a short comment), or null when they may. */
async function refuse(ctx: SyncContext, sender: { login: string; type: string }, what: string): Promise<string | null> {
  if (sender.type === 'Bot') return `forkflush ignores bots: ${sender.login} cannot ${what}.`;
  const permission = await ctx.forge.permission(sender.login);
  if (WRITERS.includes(permission)) return null;
  return `@${sender.login}: only people with write access to this repository can ${what} (yours: ${permission}).`;
}

async function runCommand(
  ctx: SyncContext,
  command: Command,
  issue: { number: number; title: string; body?: string | null },
) {
  const run = issueRunId(issue.number);
  const stored = await ctx.forge.loadRun(stateRef(run));
  if (!stored) {
    if (command === 'resume') {
      const out = await startRun(ctx, { number: issue.number, title: issue.title, body: issue.body ?? null });
      return 'problem' in out ? `forkflush did not start: ${out.problem}` : null;
    }
    return `There is no forkflush run on this issue. Label it \`${GITHUB.label}\` to start one.`;
  }
  switch (command) {
    case 'status':
      await syncRun(ctx, run);
      return null;
    case 'stop':
      if (stored.files.stopped) return 'The run is already stopped.';
      await setStopped(ctx, stored, true);
      return null;
    case 'resume':
      if (!stored.files.stopped && stored.state.status !== 'finished') {
        await syncRun(ctx, run);
        return null;
      }
      if (stored.files.stopped) await setStopped(ctx, stored, false);
      else return 'The run is finished: `/autoresearch fork` runs one more fork round.';
      return null;
    case 'fork':
      if (stored.files.stopped) return 'The run is stopped: `/autoresearch resume` first.';
      if (stored.state.lineages.length !== 1) return `${stored.state.config.strategy} has no single leader to fork.`;
      await forkNow(ctx, stored);
      return null;
  }
}

/** The nightly tick for one repository (the scheduled workflow in Actions mode calls it). */
export async function nightlyTick(forge: GitHubForge, at: Date): Promise<string[]> {
  return nightly({ forge, now: at });
}
