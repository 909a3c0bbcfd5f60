// Check runs: an episode's (queued when its round is dispatched, in progress when its job starts,
// completed with its score) and the run's own (GITHUB.check), made once, edited after.
import type { CheckAnnotation } from '../core/github-text.js';
import { createOnce, ONCE, type RepoScope, status } from './requests.js';

/** What a check run says: its status, its conclusion once completed, its page, its text. */
export interface CheckRunFields {
  status: 'queued' | 'in_progress' | 'completed';
  conclusion?: CheckConclusion;
  output?: { title: string; summary: string; text?: string; annotations?: CheckAnnotation[] };
  startedAt?: string;
  completedAt?: string;
  /** The page the check run links to: the job running its episode, or the workflow run that made the result. */
  detailsUrl?: string;
  /** Whose it is (`issue-7`, `issue-7/r0.b1`): several runs may start from one commit. */
  externalId?: string;
}

export type CheckConclusion = 'success' | 'neutral' | 'failure' | 'cancelled';
export type Reaction = 'eyes' | '+1' | '-1';

/** A check run's fields as the API takes them. */
function checkRunBody(f: CheckRunFields) {
  return {
    status: f.status,
    ...(f.conclusion ? { conclusion: f.conclusion } : {}),
    ...(f.startedAt ? { started_at: f.startedAt } : {}),
    ...(f.completedAt ? { completed_at: f.completedAt } : {}),
    ...(f.detailsUrl ? { details_url: f.detailsUrl } : {}),
    ...(f.externalId ? { external_id: f.externalId } : {}),
    ...(f.output ? { output: f.output } : {}),
  };
}

export class CheckRuns {
  constructor(private readonly scope: RepoScope) {}

  /**
   * Makes a check run: queued or in progress (an episode's when its round is dispatched, the run's
   * own while rounds run), or completed with its conclusion.
   */
  async create(args: { sha: string; name: string } & CheckRunFields): Promise<number> {
    return createOnce(
      async () => {
        const { data } = await this.scope.octokit.rest.checks.create({
          ...this.scope.r,
          head_sha: args.sha,
          name: args.name,
          ...checkRunBody(args),
          ...ONCE,
        });
        return data.id;
      },
      () => this.find(args.sha, args.name, args.externalId),
    );
  }

  /** A check run's status (queued, in_progress, completed), or null when it is gone. */
  async status(id: number): Promise<string | null> {
    return (await this.get(id))?.status ?? null;
  }

  /** When an episode's job started, as its check run in progress says (worker-events.ts onJobStarted), or null. */
  async jobStarted(id: number): Promise<string | null> {
    const run = await this.get(id);
    return run?.status === 'in_progress' ? (run.started_at ?? null) : null;
  }

  private async get(id: number) {
    try {
      return (await this.scope.octokit.rest.checks.get({ ...this.scope.r, check_run_id: id })).data;
    } catch (e) {
      if (status(e) === 404) return null;
      throw e;
    }
  }

  /** Changes a check run (an edit: repeat-safe). False when it is gone. */
  async update(id: number, fields: CheckRunFields): Promise<boolean> {
    try {
      await this.scope.octokit.rest.checks.update({ ...this.scope.r, check_run_id: id, ...checkRunBody(fields) });
      return true;
    } catch (e) {
      if (status(e) === 404) return false;
      throw e;
    }
  }

  /** The id of a check run with this name on a commit (and this external id, when given), if there is one. */
  async find(sha: string, name: string, externalId?: string): Promise<number | null> {
    // Every page: runs of many issues started on one commit each have a check of this name there.
    const runs = await this.scope.octokit.paginate(this.scope.octokit.rest.checks.listForRef, {
      ...this.scope.r,
      ref: sha,
      check_name: name,
      filter: 'all',
      per_page: 100,
    });
    return runs.find((c) => externalId === undefined || c.external_id === externalId)?.id ?? null;
  }
}
