// How forkflush sends requests to GitHub's API: the scope of one repository, GitHub's refusals
// read, and the creates that must not happen twice.
//
// Retries. Probot's Octokit retries a request that failed with a server error or a lost connection
// (Octokit reports a reset as a 500), three times after 1, 4 and 9 s (@octokit/plugin-retry), and
// paces writes (@octokit/plugin-throttling). A server error may come after GitHub did the work, so a
// request is only left to that plugin when sending it twice does no harm: every read, and the
// writes that are repeat-safe by themselves (a ref update to a given commit, a delete, a label, a
// close, an edit; a tree or commit object made twice is the same or an orphan). The creates GitHub
// has no idempotency key for go out with the plugin's retries off: after a failure that may hide a
// success, a pull request, a check run, a workflow dispatch or a comment is looked for before the
// next try (createOnce). A handler that fails anyway leaves its claim, and the handler that takes
// it over checks before it redoes anything.
import type { ProbotOctokit } from 'probot';

export type Octokit = InstanceType<typeof ProbotOctokit>;

/** One repository's API: the client, and the owner and name every request names. */
export class RepoScope {
  constructor(
    readonly octokit: Octokit,
    readonly owner: string,
    readonly repo: string,
  ) {}

  /** The owner and name, as every request takes them. */
  get r(): { owner: string; repo: string } {
    return { owner: this.owner, repo: this.repo };
  }
}

/** Another handler changed the run first: its work stands, this one stops. */
export class ConflictError extends Error {
  override name = 'ConflictError';
}

export function status(e: unknown): number | undefined {
  return typeof e === 'object' && e !== null && 'status' in e ? Number((e as { status: unknown }).status) : undefined;
}

/**
 * What a refusal says: GitHub's message and those of its `errors` (a 422 says "Validation Failed",
 * and why in `errors`: `{"resource":"PullRequest","code":"custom","message":"No commits between …"}`).
 */
export function refusal(e: unknown): { messages: string[]; errors: { field?: string; code?: string }[] } {
  const data = (e as { response?: { data?: unknown } }).response?.data;
  if (typeof data !== 'object' || data === null) return { messages: [], errors: [] };
  const { message, errors } = data as { message?: unknown; errors?: unknown };
  const list = Array.isArray(errors) ? (errors as { message?: unknown; field?: string; code?: string }[]) : [];
  const messages = [message, ...list.map((x) => x?.message)].filter((m): m is string => typeof m === 'string');
  return { messages, errors: list };
}

/**
 * Whether GitHub refused a pull request because one is there already, there is nothing to propose
 * (no commits between base and head), or the head branch is gone: not because of what was sent.
 */
export function nothingToOpen(e: unknown): boolean {
  if (status(e) !== 422) return false;
  const { messages, errors } = refusal(e);
  return (
    messages.some((m) => /^(A pull request already exists for |No commits between )/.test(m)) ||
    errors.some((x) => x?.field === 'head' && x.code === 'invalid')
  );
}

/**
 * Whether GitHub refused a request for its rate limits (a secondary one answers 403 with
 * `retry-after`), not for what it asks: a refusal to retry later, not one to act on.
 */
export function rateLimited(e: unknown): boolean {
  if (status(e) !== 403 && status(e) !== 429) return false;
  const headers = (e as { response?: { headers?: Record<string, unknown> } }).response?.headers ?? {};
  return headers['retry-after'] !== undefined || refusal(e).messages.some((m) => /rate limit/i.test(m));
}

/** A failure after which GitHub may still have done the request: a server error, a lost connection. */
export function mayHaveLanded(e: unknown): boolean {
  return (status(e) ?? 0) >= 500;
}

/** Request options that turn the retry plugin off for one request (a create, see createOnce). */
export const ONCE = { request: { retries: 0 } };

/** Tries of a create before its handler gives up (createOnce). */
const CREATE_TRIES = 3;

/**
 * The pause before the n-th retry of a create is n² times `baseMs` (1 s, 4 s: the retry plugin's
 * own schedule, retryAfterBaseValue). The tests shorten it, as they shorten the plugins' timings.
 */
export const createRetry = { baseMs: 1000 };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A create GitHub has no idempotency key for, sent with the retry plugin off (ONCE). After a
 * failure that may hide a success (a server error, a lost connection) it pauses, then `find`
 * looks for what the try made before the next try; any other failure is GitHub's answer.
 */
export async function createOnce<T>(create: () => Promise<T>, find: () => Promise<T | null>): Promise<T> {
  for (let tries = 1; ; tries++) {
    let failure: unknown;
    try {
      return await create();
    } catch (e) {
      if (!mayHaveLanded(e)) throw e;
      failure = e;
    }
    await sleep(createRetry.baseMs * tries ** 2);
    const found = await find();
    if (found !== null) return found;
    if (tries >= CREATE_TRIES) throw failure;
  }
}
