// The core's work items carried out on GitHub: a round is dispatched as one workflow run of
// matrix jobs, a result becomes a check run and a pull request into its lineage, a decided round
// fast-forwards its winners and closes the rest, the best branch moves, and a finished run gets
// its final pull request and labels. Each step is safe to repeat; what it did is noted in the
// run's record (`files`), which the sync saves.
import {
  checkConclusion,
  checkRunOutput,
  episodePrBody,
  episodePrTitle,
  finalPrBody,
  finalPrTitle,
  loserComment,
} from '../core/github-text.js';
import { parseCommitDetails } from '../core/journal.js';
import { roundDeadlineMinutes } from '../core/method.js';
import {
  bestBranch,
  checkRunName,
  contextRef,
  episodeBranch,
  GITHUB,
  lineageBranch,
  roundRunTitle,
} from '../core/names.js';
import { type Episode, findEpisode, type Round, type RunState, setupFailed } from '../core/state.js';
import { type Forge, lineageMovedOutside } from '../core/work.js';
import type { GitHubForge, RunFiles } from './forge.js';
import type { Commits } from './observe.js';

export class GitHubWork implements Forge {
  constructor(
    private readonly forge: GitHubForge,
    private readonly commits: Commits,
    /** The run's record: each step notes here what it did. */
    readonly files: RunFiles,
    private readonly now: Date,
  ) {}

  /**
   * Creates the round's branches at their bases and dispatches the worker workflow once. Taking
   * over the claim of a handler that died, it first looks for the run that handler may have
   * started: GitHub creates a dispatched run at once, and its title names the round.
   */
  async openRound(state: RunState, round: Round, retaking: boolean): Promise<void> {
    // After a resume, only the episodes still without a result run again.
    const pending = round.episodes.filter((e) => !e.result);
    for (const e of pending) await this.forge.createBranch(episodeBranch(state.id, e.round, e.branch), e.base);
    const title = roundRunTitle(state.id, round.index);
    // A claim taken over: the handler that held it may have dispatched the round before it died.
    const live = retaking ? await this.forge.liveRunId(GITHUB.workflow, title) : null;
    const runId =
      live ??
      (await this.forge.dispatchWorkflow(GITHUB.workflow, this.files.defaultBranch, {
        run: state.id,
        round: String(round.index),
        episodes: JSON.stringify(pending.map((e) => e.id)),
      }));
    const deadline = new Date(this.now.getTime() + roundDeadlineMinutes(state.config) * 60_000);
    // The run's id, when known: only that run's events may end the round (app.ts).
    this.files.dispatched[String(round.index)] = {
      at: this.now.toISOString(),
      deadline: deadline.toISOString(),
      ...(runId !== null ? { runId } : {}),
    };
  }

  /**
   * A check run for an episode whose result landed, and with `pull_requests: episodes` a pull
   * request into its lineage (fewer pull requests: `winners` opens one per fork round's winner
   * when it is adopted, `final` only the last).
   */
  async publishResult(state: RunState, e: Episode, retaking: boolean): Promise<void> {
    const r = e.result;
    if (!r) throw new Error(`${e.id} has no result to publish`);
    // A failed job left no commit of its own: there is nothing to review or check.
    if (r.commit === e.base) {
      this.files.published[e.id] = { pr: null, check: null };
      return;
    }
    const name = checkRunName(e.id);
    // A claim left behind: its handler may have made the check run before it died.
    const found = retaking ? await this.forge.findCheckRun(r.commit, name) : null;
    const details = parseCommitDetails((await this.commits.get(r.commit)).message);
    const detailsUrl = this.ownRunUrl(details?.workflowRunUrl);
    const check =
      found ??
      (await this.forge.createCheckRun({
        sha: r.commit,
        name,
        conclusion: checkConclusion(r),
        output: checkRunOutput(state, e, r, details),
        completedAt: this.now.toISOString(),
        ...(detailsUrl ? { detailsUrl } : {}),
      }));
    // A failed setup left only the base and a journal line: the check run says what failed.
    const pr =
      state.config.pull_requests === 'episodes' && !setupFailed(e) ? await this.episodePullRequest(state, e) : null;
    this.files.published[e.id] = { pr, check };
  }

  /** A workflow run page of this repository (the commit says which run made it), or null. */
  private ownRunUrl(url: string | undefined): string | null {
    if (!url) return null;
    try {
      const u = new URL(url);
      const [, owner, repo, ...rest] = u.pathname.split('/');
      const own = owner === this.forge.owner && repo === this.forge.repo;
      return (u.protocol === 'https:' || u.protocol === 'http:') &&
        own &&
        /^actions\/runs\/\d+(\/attempts\/\d+)?$/.test(rest.join('/'))
        ? u.toString()
        : null;
    } catch {
      return null;
    }
  }

  private async episodePullRequest(state: RunState, e: Episode): Promise<number | null> {
    const r = e.result;
    if (!r) return null;
    const branch = episodeBranch(state.id, e.round, e.branch);
    const lineage = lineageBranch(state.id, e.lineage, state.lineages.length);
    return this.forge.openPullRequest(branch, lineage, episodePrTitle(state, e, r), episodePrBody(state, e, r));
  }

  /**
   * Each adopted episode's commit is fast-forwarded into its lineage (its pull request then shows
   * as merged); the other branches are closed with their score against the winner's and deleted.
   */
  async settleRound(state: RunState, round: Round): Promise<void> {
    const adopted = round.decision?.adopted ?? [];
    const winner = round.episodes.find((e) => e.id === round.decision?.winner) ?? null;
    for (const e of round.episodes) {
      if (adopted.includes(e.id) && e.result) {
        // The winner's pull request, opened before its commit lands, shows as merged once it does.
        const published = this.files.published[e.id];
        if (state.config.pull_requests === 'winners' && round.kind === 'fork' && published && !published.pr) {
          published.pr = await this.episodePullRequest(state, e);
        }
        const lineage = lineageBranch(state.id, e.lineage, state.lineages.length);
        const moved = await this.forge.fastForward(lineage, e.result.commit);
        const head = moved === 'diverged' ? await this.forge.refSha(`refs/heads/${lineage}`) : e.result.commit;
        const problem = lineageMovedOutside(state, round, e, head, lineage);
        if (problem) throw new Error(problem);
      } else {
        const pr = this.files.published[e.id]?.pr;
        if (pr) await this.forge.closePullRequest(pr, loserComment(state, e, winner));
        // No later episode continues a rejected branch: its transcript has no reason to stay.
        await this.forge.deleteRef(contextRef(state.id, e.id));
      }
      await this.forge.deleteBranch(episodeBranch(state.id, e.round, e.branch));
    }
    this.files.settled.push(round.index);
  }

  async moveBest(state: RunState, commit: string): Promise<void> {
    await this.forge.setBranch(bestBranch(state.id), commit);
    this.files.bestCommit = commit;
  }

  /** The final pull request, from the lineage that holds the best score, and the done label. */
  async publishRun(state: RunState): Promise<void> {
    // Best-of-n keeps several lineages; lineage 0 when nothing beat the default branch.
    const best = state.best ? findEpisode(state, state.best.episode) : undefined;
    // A draft: the result is the agents' work, for a person to review before it is merged.
    const pr = await this.forge.openPullRequest(
      lineageBranch(state.id, best?.lineage ?? 0, state.lineages.length),
      this.files.defaultBranch,
      finalPrTitle(state),
      finalPrBody(state, this.files.issue),
      true,
    );
    await this.forge.addLabel(this.files.issue, GITHUB.doneLabel);
    await this.forge.removeLabel(this.files.issue, GITHUB.label);
    // Recorded last: until the labels are right, this work is not done (opening is repeat-safe).
    this.files.finalPr = pr ?? 0;
  }
}
