// Pull requests: the run's result pull request (a draft, kept current), and with the older
// layout an episode's into its lineage; each opened once, found again rather than made twice.
import type { Issues } from './issues.js';
import { createOnce, nothingToOpen, ONCE, type RepoScope, status } from './requests.js';

export class PullRequests {
  constructor(
    private readonly scope: RepoScope,
    private readonly issues: Issues,
  ) {}

  /**
   * Opens a pull request, or finds the one already made for the same head and base (open, merged
   * or closed: a head gets one pull request, and a closed one is not opened again, unless
   * `anew`: then only an open one is found); null when there is nothing to propose (no commits
   * between base and head, or the head is gone).
   */
  async open(
    head: string,
    base: string,
    title: string,
    body: string,
    o: { draft?: boolean; anew?: boolean } = {},
  ): Promise<number | null> {
    const { draft = false, anew = false } = o;
    // Looked for first: a handler whose answer was lost, or the one whose claim this handler took
    // over, may have made it, and GitHub refuses a second one only while the first is open.
    const made = await this.find(head, base, anew);
    if (made !== null) return made;
    try {
      return await createOnce(
        async () => {
          const { data } = await this.scope.octokit.rest.pulls.create({
            ...this.scope.r,
            head,
            base,
            title,
            body,
            ...(draft ? { draft } : {}),
            ...ONCE,
          });
          return data.number;
        },
        () => this.find(head, base),
      );
    } catch (e) {
      // One was made meanwhile, or there is nothing to propose. Any other refusal (a body too
      // long, say) is a failure: taken for "nothing to propose", it would leave no pull request.
      if (!nothingToOpen(e)) throw e;
      return this.find(head, base, anew);
    }
  }

  /** The pull request from `head` into `base`, the open one first, else (unless `openOnly`) the newest; null if none. */
  private async find(head: string, base: string, openOnly = false): Promise<number | null> {
    const { data } = await this.scope.octokit.rest.pulls.list({
      ...this.scope.r,
      head: `${this.scope.owner}:${head}`,
      base,
      state: 'all',
      per_page: 100,
    });
    const into = data.filter((p) => p.base.ref === base);
    return (into.find((p) => p.state === 'open') ?? (openOnly ? undefined : into[0]))?.number ?? null;
  }

  /** Edits a pull request's title and body (repeat-safe). */
  async edit(pr: number, title: string, body: string): Promise<void> {
    await this.scope.octokit.rest.pulls.update({ ...this.scope.r, pull_number: pr, title, body });
  }

  /** A pull request's head branch and whether it is open; null when there is none. */
  async get(pr: number): Promise<{ head: string; open: boolean } | null> {
    try {
      const { data } = await this.scope.octokit.rest.pulls.get({ ...this.scope.r, pull_number: pr });
      return { head: data.head.ref, open: data.state === 'open' };
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  async close(pr: number, comment: string): Promise<void> {
    await this.issues.write(pr, comment);
    await this.scope.octokit.rest.pulls.update({ ...this.scope.r, pull_number: pr, state: 'closed' });
  }
}
