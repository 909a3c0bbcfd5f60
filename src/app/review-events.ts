// Reviews of a run's pull request as directives: a review that requests changes, or whose text has
// `/autoresearch fork <what to try>`, from a person with write access, opens one fork round whose
// branches are told the review's words (the path of `/autoresearch fork <what>`: github/steer.ts
// forkNow). Once per review, whatever delivers it: its key is kept in the run's record with the
// round it asked for, and the answer on the pull request is written once (issues.commentOnce).
import type { Context } from 'probot';
import { FORK_ASK_MAX_CHARS, parseCommand } from '../core/github-text.js';
import { issueRunId, stateRef } from '../core/names.js';
import { deliveryKey, seenAny } from '../core/seen-events.js';
import { canWrite } from '../github/amend.js';
import { forkNow, forkProblem } from '../github/steer.js';
import { answeringTampered, type ContextOf } from './app-context.js';
import { runIssueOfPull } from './people-events.js';

/** The key of a review: one review is one request, whatever delivers it. */
export function reviewKey(id: number): string {
  return `review:${id}`;
}

/**
 * What a review asks the next fork round to try, or null when it asks for none: the words after
 * `/autoresearch fork`, else the whole text of a review that requests changes.
 */
export function reviewAsks(review: { state: string; body: string | null }): string | null {
  const body = review.body?.trim() ?? '';
  const command = parseCommand(body);
  if (command && 'command' in command && command.command === 'fork' && command.args) return command.args;
  if (review.state.toLowerCase() === 'changes_requested' && body !== '') return body.slice(0, FORK_ASK_MAX_CHARS);
  return null;
}

/** `pull_request_review.submitted` on a run's pull request: a writer's directive opens one fork round. */
export async function onReview(ctxOf: ContextOf, context: Context<'pull_request_review.submitted'>): Promise<void> {
  const { review, pull_request: pull, sender } = context.payload;
  if (sender.type === 'Bot') return;
  const toTry = reviewAsks({ state: review.state, body: review.body ?? null });
  if (toTry === null) return;
  const ctx = ctxOf(context, { pull: pull.number });
  // As with comments: a review from someone without write access gets no answer at all.
  const permission = await ctx.api.permission(sender.login);
  if (!canWrite(permission)) {
    ctx.log(`ignored a review from ${sender.login}, who has no write access (${permission})`);
    return;
  }
  const issue = await runIssueOfPull(ctx.api, pull.number);
  if (issue === null) return;
  const key = reviewKey(review.id);
  await answeringTampered(ctx, { issue: pull.number, key }, async () => {
    const stored = await ctx.api.loadRun(stateRef(issueRunId(issue)));
    if (!stored || seenAny(stored.files.seen, [key])) return;
    const refused = stored.files.stopped
      ? 'The run is stopped: `/autoresearch resume` on its issue first, then review again.'
      : forkProblem(stored.state, ctx.now);
    if (refused) {
      await ctx.api.issues.commentOnce(pull.number, key, `forkflush opened no fork round for this review: ${refused}`);
      return;
    }
    await forkNow(ctx, stored, { by: sender.login, keys: [key, deliveryKey(context.id)] }, toTry);
    await ctx.api.issues.commentOnce(
      pull.number,
      key,
      `forkflush opened a fork round for @${sender.login}'s review: its branches are told to try what the review says. This pull request moves when the round finds a better result.`,
    );
  });
}
