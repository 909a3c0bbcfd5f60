// The webhook check: the committed subset of GitHub's webhooks description is current, the
// community's example payloads (@octokit/webhooks-examples) pass it except where they are known to
// be older than GitHub's schema, and the check names what is wrong and where.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import examples from '@octokit/webhooks-examples';
import { describe, expect, it } from 'vitest';
import { checkWebhook } from './openapi/webhooks.js';
import subset from './openapi/webhooks-subset.json' with { type: 'json' };

const ROOT = join(import.meta.dirname, '../..');
const KEYS = Object.keys(subset.webhooks);

type Example = { name: string; examples: Record<string, any>[] };
const keyOf = (event: string, action: unknown) =>
  (typeof action === 'string' ? `${event}-${action}` : event).replaceAll('_', '-');
/** Every example of a webhook of the subset: `<event>.<action>#<index among the event's examples>`. */
const CASES = (examples as unknown as Example[]).flatMap((e) =>
  e.examples.flatMap((payload, i) =>
    KEYS.includes(keyOf(e.name, payload.action))
      ? [{ id: `${e.name}.${payload.action ?? '-'}#${i}`, event: e.name, payload }]
      : [],
  ),
);
function example(id: string): any {
  const found = CASES.find((c) => c.id === id);
  if (!found) throw new Error(`no example ${id} in @octokit/webhooks-examples`);
  return structuredClone(found.payload);
}

/**
 * The examples GitHub's schema rejects, with exactly what it says. Each is a payload captured
 * before GitHub added fields its schema now requires (the event's other examples have them), or,
 * for installation, one that keeps the webhook-only shape of its day: `created_at`/`updated_at`
 * as Unix seconds (1557933591) and no `app_slug`, where GitHub's description reuses the REST API's
 * `installation` schema (date-time strings, `app_slug` required). Octokit's own schemas, which the
 * examples are kept against, allow both (payload-schemas/.../common/installation.schema.json:
 * created_at `oneOf: [date-time string, integer]`, app_slug optional).
 */
const KNOWN_DISAGREEMENTS: Record<string, string[]> = {
  'installation.created#1': [
    "webhook installation-created: body/installation must have required property 'app_slug'",
    'webhook installation-created: body/installation/created_at must be string',
    'webhook installation-created: body/installation/updated_at must be string',
  ],
  'installation.created#2': [
    "webhook installation-created: body/installation must have required property 'app_slug'",
    'webhook installation-created: body/installation/created_at must be string',
    'webhook installation-created: body/installation/updated_at must be string',
  ],
  // 2019: before comments and issues carried reactions and performed_via_github_app, issues
  // active_lock_reason, and labels description.
  'issue_comment.created#0': [
    "webhook issue-comment-created: body/comment must have required property 'performed_via_github_app'",
    "webhook issue-comment-created: body/comment must have required property 'reactions'",
    "webhook issue-comment-created: body/issue must have required property 'active_lock_reason'",
    "webhook issue-comment-created: body/issue must have required property 'reactions'",
    "webhook issue-comment-created: body/issue/labels/0 must have required property 'description'",
  ],
  // From before repositories carried has_discussions (2022), and with an empty homepage (GitHub's is null or a URL).
  'issues.transferred#21': [
    "webhook issues-transferred: body/changes/new_repository must have required property 'has_discussions'",
    'webhook issues-transferred: body/repository/homepage must match format "uri"',
  ],
  // Both from before repositories carried has_discussions (2022).
  'pull_request.labeled#8': [
    "webhook pull-request-labeled: body/pull_request/base/repo must have required property 'has_discussions'",
    "webhook pull-request-labeled: body/pull_request/head/repo must have required property 'has_discussions'",
  ],
  'pull_request.labeled#9': [
    "webhook pull-request-labeled: body/pull_request/base/repo must have required property 'has_discussions'",
    "webhook pull-request-labeled: body/pull_request/head/repo must have required property 'has_discussions'",
  ],
  // From before pull requests carried draft, auto_merge and active_lock_reason, and repositories
  // has_discussions, topics and visibility; the other two only before has_discussions (2022).
  'pull_request_review.submitted#0': [
    "webhook pull-request-review-submitted: body/pull_request must have required property 'draft'",
    "webhook pull-request-review-submitted: body/pull_request must have required property 'auto_merge'",
    "webhook pull-request-review-submitted: body/pull_request must have required property 'active_lock_reason'",
    "webhook pull-request-review-submitted: body/pull_request/base/repo must have required property 'has_discussions'",
    "webhook pull-request-review-submitted: body/pull_request/base/repo must have required property 'topics'",
    "webhook pull-request-review-submitted: body/pull_request/base/repo must have required property 'visibility'",
    "webhook pull-request-review-submitted: body/pull_request/head/repo must have required property 'has_discussions'",
    "webhook pull-request-review-submitted: body/pull_request/head/repo must have required property 'topics'",
    "webhook pull-request-review-submitted: body/pull_request/head/repo must have required property 'visibility'",
  ],
  'pull_request_review.submitted#2': [
    "webhook pull-request-review-submitted: body/pull_request/base/repo must have required property 'has_discussions'",
    "webhook pull-request-review-submitted: body/pull_request/head/repo must have required property 'has_discussions'",
  ],
  'pull_request_review.submitted#3': [
    "webhook pull-request-review-submitted: body/pull_request/base/repo must have required property 'has_discussions'",
    "webhook pull-request-review-submitted: body/pull_request/head/repo must have required property 'has_discussions'",
  ],
  // 2019: before auto-merge.
  'pull_request.opened#0': ["webhook pull-request-opened: body/pull_request must have required property 'auto_merge'"],
  // June 2021, the week workflow_job shipped: before run_attempt, workflow_name, head_branch, created_at.
  'workflow_job.in_progress#0': [
    "webhook workflow-job-in-progress: body/workflow_job must have required property 'run_attempt'",
    "webhook workflow-job-in-progress: body/workflow_job must have required property 'workflow_name'",
    "webhook workflow-job-in-progress: body/workflow_job must have required property 'head_branch'",
    "webhook workflow-job-in-progress: body/workflow_job must have required property 'created_at'",
  ],
  // December 2021: before workflow runs carried actor, triggering_actor and path.
  'workflow_run.completed#0': [
    "webhook workflow-run-completed: body/workflow_run must have required property 'actor'",
    "webhook workflow-run-completed: body/workflow_run must have required property 'path'",
    "webhook workflow-run-completed: body/workflow_run must have required property 'triggering_actor'",
  ],
};

describe('the subset of GitHub’s webhooks description', () => {
  it('is what scripts/extract-webhooks.mjs makes from @octokit/openapi-webhooks now', async (ctx) => {
    try {
      createRequire(import.meta.url).resolve('@octokit/openapi-webhooks/generated/api.github.com.json');
    } catch {
      ctx.skip(
        '@octokit/openapi-webhooks is not installed: cannot compare webhooks-subset.json with a fresh extraction',
      );
    }
    const run = promisify(execFile);
    const { stdout } = await run(process.execPath, ['scripts/extract-webhooks.mjs', '--check'], { cwd: ROOT }).catch(
      (e: { stderr?: string; message: string }) => {
        throw new Error(e.stderr || e.message);
      },
    );
    expect(stdout).toMatch(/is current/);
  });

  it('has examples for every webhook but issues-closed, which a reopened example stands in for', () => {
    const covered = new Set(CASES.map((c) => keyOf(c.event, c.payload.action)));
    expect(KEYS.filter((k) => !covered.has(k))).toEqual(['issues-closed']);
    const closed = example('issues.reopened#20');
    closed.action = 'closed';
    closed.issue.state = 'closed';
    closed.issue.closed_at = '2019-05-15T15:21:02Z';
    expect(checkWebhook('issues', closed)).toEqual([]);
  });
});

describe('the examples of @octokit/webhooks-examples', () => {
  it.each(CASES.map((c) => [c.id, c] as const))('%s is valid, or fails as known', (id, c) => {
    expect(checkWebhook(c.event, c.payload)).toEqual(KNOWN_DISAGREEMENTS[id] ?? []);
  });

  it('lists no known disagreement that is not an example', () => {
    expect(Object.keys(KNOWN_DISAGREEMENTS).filter((id) => !CASES.some((c) => c.id === id))).toEqual([]);
  });
});

describe('checkWebhook', () => {
  it('names a missing required field by its path', () => {
    const p = example('issues.labeled#9');
    delete p.issue.user.login;
    delete p.sender;
    expect(checkWebhook('issues', p)).toEqual([
      "webhook issues-labeled: body must have required property 'sender'",
      "webhook issues-labeled: body/issue/user must have required property 'login'",
    ]);
  });

  it('names a wrong type, a null where none is allowed, a value outside an enum', () => {
    const p = example('issue_comment.created#1');
    p.issue.number = '7';
    p.comment.body = null;
    p.comment.author_association = 'OWNERISH';
    expect(checkWebhook('issue_comment', p)).toEqual([
      'webhook issue-comment-created: body/comment/author_association must be equal to one of the allowed values ("COLLABORATOR", "CONTRIBUTOR", "FIRST_TIMER", "FIRST_TIME_CONTRIBUTOR", "MANNEQUIN", "MEMBER", "NONE", "OWNER")',
      'webhook issue-comment-created: body/comment/body must be string',
      'webhook issue-comment-created: body/issue/number must be integer',
    ]);
  });

  it('checks date-time and uri formats, and takes GitHub’s own formats as they are', () => {
    const p = example('workflow_run.completed#1');
    p.workflow_run.created_at = '16 Dec 2021';
    p.workflow_run.html_url = 'github.com/o/r/actions/runs/1';
    p.repository.keys_url = 'not a template {';
    expect(checkWebhook('workflow_run', p)).toEqual([
      'webhook workflow-run-completed: body/workflow_run/created_at must match format "date-time"',
      'webhook workflow-run-completed: body/workflow_run/html_url must match format "uri"',
    ]);
  });

  it('says when the subset has no schema for the event and action', () => {
    expect(checkWebhook('issues', { action: 'pinned' })).toEqual([
      'webhook issues-pinned: not in webhooks-subset.json (X-GitHub-Event issues, body/action "pinned"); add it to WEBHOOKS in scripts/extract-webhooks.mjs and run it',
    ]);
    expect(checkWebhook('push', {})).toEqual([
      'webhook push: not in webhooks-subset.json (X-GitHub-Event push, no body/action); add it to WEBHOOKS in scripts/extract-webhooks.mjs and run it',
    ]);
    expect(checkWebhook('ping', example('ping.-#0'))).toEqual([]);
  });
});
