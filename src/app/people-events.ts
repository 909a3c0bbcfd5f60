// People's events: the label that starts a run, its removal or the issue's closing that stops it,
// and the comment commands (`/autoresearch status|stop|resume|fork|map`), each from a person with write
// access only (anyone else's comment gets no answer at all: anyone may comment on an issue, and
// must not be able to make the app talk).
import type { Context } from 'probot';
import { type Command, parseCommand } from '../core/github-text.js';
import { GITHUB, isLabel, issueRunId, parseIssueRunId, stateRef } from '../core/names.js';
import { commentKey, deliveryKey, seenAny } from '../core/seen-events.js';
import { retryStopped } from '../core/stop.js';
import { type ChangeRequest, canWrite } from '../github/amend.js';
import type { GitHubApi, StoredRun } from '../github/api.js';
import { askMap } from '../github/map.js';
import { type IssueRef, runsPerRepo, startRun } from '../github/start.js';
import { forkNow, forkProblem, setStopped } from '../github/steer.js';
import { type SyncContext, syncRun } from '../github/sync.js';
import { type AppContext, answeringTampered, type ContextOf } from './app-context.js';

/** `issues.labeled` with forkflush's label: a writer starts (or resumes) the issue's run. */
export async function onIssueLabeled(ctxOf: ContextOf, context: Context<'issues.labeled'>): Promise<void> {
  const { issue, label, sender } = context.payload;
  if (!isLabel(label?.name, GITHUB.label)) return;
  const ctx = ctxOf(context, { run: issueRunId(issue.number) });
  // Labelling takes triage access at least: the person is told why nothing started.
  // Every answer names the delivery: a doubled one, or one replayed after a restart, answers nothing more.
  const key = deliveryKey(context.id);
  const refusal = await refuse(ctx, sender, 'start a run');
  if (refusal) {
    await ctx.api.issues.commentOnce(issue.number, key, refusal);
    return;
  }
  // Closing an issue stops its run, and nightly rounds pass closed issues by: none starts on one.
  if (issue.state === 'closed') {
    const text = `This issue is closed, so forkflush did not start: reopen it, then label it \`${GITHUB.label}\` again.`;
    await ctx.api.issues.commentOnce(issue.number, key, text);
    return;
  }
  await answeringTampered(ctx, { issue: issue.number, key }, async () => {
    const asked = { by: sender.login, keys: [key] };
    const out = await startRun(ctx, issueRef(issue), asked);
    if ('problem' in out)
      await ctx.api.issues.commentOnce(issue.number, key, `forkflush did not start: ${out.problem}`);
  });
}

/** A label on a pull request: forkflush runs on issues, and says so (to people, not bots). */
export async function onPullLabeled(ctxOf: ContextOf, context: Context<'pull_request.labeled'>): Promise<void> {
  if (!isLabel(context.payload.label?.name, GITHUB.label) || context.payload.sender.type === 'Bot') return;
  await ctxOf(context).api.issues.commentOnce(
    context.payload.pull_request.number,
    deliveryKey(context.id),
    `forkflush runs on issues, not pull requests: describe the task in an issue and label that \`${GITHUB.label}\`.`,
  );
}

/**
 * Removing the label (or, from a finished run, its done label), closing the issue, deleting it or
 * moving it to another repository stops a run, finished ones too (no more rounds after the plan);
 * the lineage and best refs stay. A moved issue's run stays in this repository, with its branches
 * and record, and no issue here to steer it.
 */
export async function onStopEvent(
  ctxOf: ContextOf,
  context:
    | Context<'issues.unlabeled'>
    | Context<'issues.closed'>
    | Context<'issues.deleted'>
    | Context<'issues.transferred'>,
): Promise<void> {
  const p = context.payload;
  if (p.action === 'unlabeled' && !isLabel(p.label?.name, GITHUB.label) && !isLabel(p.label?.name, GITHUB.doneLabel))
    return;
  // The app's own label change is not a stop: it takes `autoresearch` off once it put the done label on
  // (with GITHUB_TOKEN the app is github-actions[bot], as a team's own workflow is). Any other
  // bot's is (a team's issue automation), as is a deletion or a move, by whomever.
  const ownSwap =
    p.action === 'unlabeled' &&
    isLabel(p.label?.name, GITHUB.label) &&
    (p.issue.labels ?? []).some((l) => isLabel(l.name, GITHUB.doneLabel));
  if (p.sender.type === 'Bot' && (p.action === 'closed' || ownSwap)) return;
  const ctx = ctxOf(context, { run: issueRunId(p.issue.number) });
  const stored = await ctx.api.loadRun(stateRef(issueRunId(p.issue.number)));
  if (!stored || stored.files.stopped) return;
  // An issue's author may close it without write access; that alone does not stop a run.
  // (Removing a label already takes triage access or more.)
  if (p.action === 'closed' && !canWrite(await ctx.api.permission(p.sender.login))) return;
  await setStopped(ctx, stored, true, { by: p.sender.login, keys: [deliveryKey(context.id)] });
}

/** A comment that may be a command: a writer's is taken (eyes), carried out, and answered (+1 or -1). */
export async function onComment(ctxOf: ContextOf, context: Context<'issue_comment.created'>): Promise<void> {
  const { comment, issue, sender } = context.payload;
  if (sender.type === 'Bot') return;
  const parsed = parseCommand(comment.body);
  if (!parsed) return;
  const ctx = ctxOf(context, issue.pull_request ? { pull: issue.number } : { run: issueRunId(issue.number) });
  // Nothing is said before the permission check, and nothing after it to someone without
  // write access: anyone may comment, and a comment must not make the app talk.
  const permission = await ctx.api.permission(sender.login);
  if (!canWrite(permission)) {
    ctx.log(`ignored a command from ${sender.login}, who has no write access (${permission})`);
    return;
  }
  // On a pull request, the command steers the run whose pull request it is (and is answered there).
  const target = issue.pull_request ? await runIssueOfPull(ctx.api, issue.number) : issue.number;
  if (target === null) {
    ctx.log(`ignored a command on pull request #${issue.number}, which is no run's`);
    return;
  }
  // Taken: the writer sees it at once (a reaction; a doubled delivery adds nothing).
  await ctx.api.issues.react(comment.id, 'eyes');
  // One comment is one command, whatever delivers it: its answer is written once.
  const key = commentKey(comment.id);
  if ('error' in parsed) {
    // The app reads a comment once, when it is written (an edit could replay an old command).
    const again = 'Write the command again in a new comment: an edited comment is not read.';
    await ctx.api.issues.commentOnce(issue.number, key, `${parsed.error}. ${again}`);
    await ctx.api.issues.react(comment.id, '-1');
    return;
  }
  let done = false;
  await answeringTampered(ctx, { issue: issue.number, key }, async () => {
    const asked = { by: sender.login, keys: [key, deliveryKey(context.id)] };
    const reply = await runCommand(ctx, parsed, { ...issueRef(issue), number: target }, asked);
    if (reply) await ctx.api.issues.commentOnce(issue.number, key, reply);
    done = reply === null;
  });
  // Done, or refused (the reply says why).
  await ctx.api.issues.react(comment.id, done ? '+1' : '-1');
}

/**
 * The issue whose run a pull request is: the run's result pull request, or one of its episodes'
 * (pull_requests: winners or episodes), as its record says; null for any other pull request.
 */
export async function runIssueOfPull(api: GitHubApi, pr: number): Promise<number | null> {
  const head = (await api.pulls.get(pr))?.head ?? '';
  const run = /^forkflush\/([^/]+)\//.exec(head)?.[1];
  const issue = run === undefined ? null : parseIssueRunId(run);
  if (run === undefined || issue === null) return null;
  const files = (await api.loadRun(stateRef(run)))?.files;
  const own = files && (files.finalPr === pr || Object.values(files.published).some((p) => p.pr === pr));
  return own ? issue : null;
}

/** Why a user may not act (a short comment), or null when they may. */
async function refuse(ctx: SyncContext, sender: { login: string; type: string }, what: string): Promise<string | null> {
  if (sender.type === 'Bot') return `forkflush ignores bots: ${sender.login} cannot ${what}.`;
  const permission = await ctx.api.permission(sender.login);
  if (canWrite(permission)) return null;
  return `@${sender.login}: only people with write access to this repository can ${what} (yours: ${permission}).`;
}

/** What starting a run reads of an issue's payload. */
function issueRef(issue: {
  number: number;
  title: string;
  body?: string | null;
  user?: { login: string } | null;
}): IssueRef {
  return {
    number: issue.number,
    title: issue.title,
    body: issue.body ?? null,
    ...(issue.user?.login ? { author: issue.user.login } : {}),
  };
}

/** A writer's command; returns the reply, or null for none. */
async function runCommand(
  ctx: AppContext,
  parsed: { command: Command; args?: string },
  issue: IssueRef,
  asked: ChangeRequest,
): Promise<string | null> {
  const { command } = parsed;
  const run = issueRunId(issue.number);
  const stored = await ctx.api.loadRun(stateRef(run));
  if (!stored) {
    if (command === 'resume' || command === 'start') {
      const requested = parsed.args
        ? { words: parsed.args, source: `\`/autoresearch start\` by @${asked.by}` }
        : undefined;
      const out = await startRun(ctx, issue, asked, requested);
      return 'problem' in out ? `forkflush did not start: ${out.problem}` : null;
    }
    return `There is no forkflush run on this issue. Label it \`${GITHUB.label}\` to start one.`;
  }
  if (parsed.args && command === 'start')
    return `This issue has a forkflush run already: overrides (\`${parsed.args.slice(0, 200)}\`) apply only when a run starts. \`/autoresearch resume\` resumes it as it is.`;
  // A map asked by this comment whose handler died before its dispatch was recorded: dispatched now.
  if (command === 'map' && stored.files.map?.asked === asked.keys[0]) return askMap(ctx, stored, asked);
  // The same comment delivered again (or replayed) is the same command: it was carried out.
  if (command !== 'status' && seenAny(stored.files.seen, asked.keys)) {
    ctx.log(`${command}: this comment was acted on already`);
    return null;
  }
  return steerRun(ctx, command === 'start' ? 'resume' : command, stored, asked, parsed.args);
}

/** A writer's command on the issue's run; returns the reply, or null for none. */
async function steerRun(
  ctx: AppContext,
  command: Exclude<Command, 'start'>,
  stored: StoredRun,
  asked: ChangeRequest,
  toTry?: string,
): Promise<string | null> {
  const run = stored.state.id;
  switch (command) {
    case 'status':
      await syncRun(ctx, run);
      return null;
    case 'stop':
      if (stored.files.stopped) return 'The run is already stopped.';
      await setStopped(ctx, stored, true, asked);
      return null;
    case 'resume': {
      // A running run resumes nothing, unless its setup stopped it: then its round runs again.
      if (!stored.files.stopped && stored.state.status !== 'finished' && !retryStopped(stored.state)) {
        await syncRun(ctx, run);
        return null;
      }
      if (!stored.files.stopped && stored.state.status === 'finished')
        return 'The run is finished: `/autoresearch fork` runs one more fork round.';
      const busy = await runsPerRepo(ctx.api, stored.state.config, run, '`/autoresearch resume` again');
      if (busy) return `forkflush did not resume the run: ${busy}`;
      await setStopped(ctx, stored, false, asked);
      return null;
    }
    case 'fork': {
      if (stored.files.stopped) return 'The run is stopped: `/autoresearch resume` first.';
      const problem = forkProblem(stored.state, ctx.now);
      if (problem) return `forkflush opened no fork round: ${problem}`;
      // A finished run that forks runs again: within limits.runs_per_repo, as a resume is.
      const busy =
        stored.state.status === 'finished' &&
        (await runsPerRepo(ctx.api, stored.state.config, run, '`/autoresearch fork` again'));
      if (busy) return `forkflush opened no fork round: ${busy}`;
      await forkNow(ctx, stored, asked, toTry);
      return null;
    }
    case 'map':
      return askMap(ctx, stored, asked);
  }
}
