// The core's work items carried out on GitHub: a round is dispatched as one workflow run of
// matrix jobs, a result becomes a check run (and with branch pull requests, a pull request into its
// lineage), a decided round fast-forwards its winners and lets the rest go, the best ref moves, and a
// finished run gets its result pull request and labels. Each step is safe to repeat; what it did is
// noted in the run's record (`files`), which the sync saves.
//
// Where the work lives depends on the run's layout (core/names.ts RefsLayout): by default (2) on
// refs under refs/forkflush/<run>/ that no workflow triggers on, and only the result becomes a
// branch, `forkflush/<run>/result`, with one draft pull request kept current.
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
import { checkRunName, contextRef, GITHUB, type RunRefs, refName, roundRunTitle } from '../core/names.js';
import { type Episode, type Round, type RunState, setupFailed } from '../core/state.js';
import { type Forge, lineageMovedOutside } from '../core/work.js';
import type { GitHubForge, RunFiles } from './forge.js';
import type { Commits } from './observe.js';
import { layoutOf, refsOf, resultCommit, resultLineage, textDigest, viewOf } from './record.js';

export class GitHubWork implements Forge {
  constructor(
    private readonly forge: GitHubForge,
    private readonly commits: Commits,
    /** The run's record: each step notes here what it did. */
    readonly files: RunFiles,
    private readonly now: Date,
  ) {}

  private refs(state: RunState): RunRefs {
    return refsOf(state, this.files);
  }

  /**
   * Creates the round's refs at their bases and dispatches the worker workflow once. Taking
   * over the claim of a handler that died, it first looks for the run that handler may have
   * started: GitHub creates a dispatched run at once, and its title names the round.
   */
  async openRound(state: RunState, round: Round, retaking: boolean): Promise<void> {
    const refs = this.refs(state);
    // After a resume, only the episodes still without a result run again.
    const pending = round.episodes.filter((e) => !e.result);
    for (const e of pending) await this.forge.createRef(refs.episode(e.round, e.branch), e.base);
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
   * request into its lineage (`winners` opens one per fork round's winner when it is adopted).
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
        status: 'completed',
        conclusion: checkConclusion(r),
        output: checkRunOutput(state, e, r, details),
        completedAt: this.now.toISOString(),
        ...(detailsUrl ? { detailsUrl } : {}),
      }));
    // A failed setup left only the base and a journal line: the check run says what failed.
    const pr =
      state.config.pull_requests === 'episodes' && !setupFailed(e) && layoutOf(this.files) === 1
        ? await this.episodePullRequest(state, e)
        : null;
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

  /** Layout 1 only: an episode's branch's pull request into its lineage branch. */
  private async episodePullRequest(state: RunState, e: Episode): Promise<number | null> {
    const r = e.result;
    if (!r) return null;
    const refs = this.refs(state);
    const branch = refName(refs.episode(e.round, e.branch));
    const lineage = refName(refs.lineage(e.lineage, state.lineages.length));
    return this.forge.openPullRequest(branch, lineage, episodePrTitle(state, e, r), episodePrBody(state, e, r));
  }

  /**
   * Each adopted episode's commit is fast-forwarded into its lineage; the other episodes' refs and
   * contexts are deleted. With branch pull requests (layout 1) the winner's shows as merged and the
   * others are closed with their score against the winner's.
   */
  async settleRound(state: RunState, round: Round): Promise<void> {
    const refs = this.refs(state);
    const branchPrs = layoutOf(this.files) === 1;
    const adopted = round.decision?.adopted ?? [];
    const winner = round.episodes.find((e) => e.id === round.decision?.winner) ?? null;
    for (const e of round.episodes) {
      if (adopted.includes(e.id) && e.result) {
        // The winner's pull request, opened before its commit lands, shows as merged once it does.
        const published = this.files.published[e.id];
        if (
          branchPrs &&
          state.config.pull_requests === 'winners' &&
          round.kind === 'fork' &&
          published &&
          !published.pr
        ) {
          published.pr = await this.episodePullRequest(state, e);
        }
        const lineage = refs.lineage(e.lineage, state.lineages.length);
        const moved = await this.forge.fastForward(lineage, e.result.commit);
        const head = moved === 'diverged' ? await this.forge.refSha(lineage) : e.result.commit;
        const problem = lineageMovedOutside(state, round, e, head, refName(lineage));
        if (problem) throw new Error(problem);
      } else {
        const pr = this.files.published[e.id]?.pr;
        if (pr) await this.forge.closePullRequest(pr, loserComment(state, e, winner));
        // No later episode continues a rejected branch: its transcript has no reason to stay.
        await this.forge.deleteRef(contextRef(state.id, e.id));
      }
      await this.forge.deleteRef(refs.episode(e.round, e.branch));
    }
    this.files.settled.push(round.index);
  }

  async moveBest(state: RunState, commit: string): Promise<void> {
    await this.forge.setRef(this.refs(state).best, commit);
    this.files.bestCommit = commit;
  }

  /**
   * The run's result: its branch (layout 2: `forkflush/<run>/result`, made now, the first branch
   * the run pushes, and moved forward when a later round moves the lineage), one draft pull request
   * from it into the default branch, kept current, and the done label. The CI label comes off when
   * the result moves: what a person allowed to run was another commit.
   */
  async publishRun(state: RunState): Promise<void> {
    const refs = this.refs(state);
    const lineage = resultLineage(state);
    const branch = refs.resultBranch(lineage, state.lineages.length);
    const head = resultCommit(state);
    // Nothing beat the initial workspace: there is nothing to propose, and no branch is made.
    const changed = head !== state.base.commit;
    if (changed && layoutOf(this.files) === 2) {
      const ref = `refs/heads/${branch}`;
      const at = await this.forge.refSha(ref);
      if (at === null) await this.forge.createRef(ref, head);
      else if (at !== head && (await this.forge.fastForward(ref, head)) === 'diverged') {
        // Someone pushed to the result branch: their commits stay; the newer result is on the lineage ref.
        throw new Error(
          `the result branch ${branch} has commits forkflush did not make, so it was not moved to the run's newer result ` +
            `${head.slice(0, 10)} (on ${refs.lineage(lineage, state.lineages.length)}): merge that commit into it, or delete the branch, then \`/autoresearch status\``,
        );
      }
    }
    let pr = this.files.finalPr || null;
    if (changed && pr === null) {
      const title = finalPrTitle(state);
      const body = finalPrBody(state, this.files.issue, viewOf(state, this.files));
      // A draft: the result is the agents' work, for a person to review before it is merged.
      pr = await this.forge.openPullRequest(branch, this.files.defaultBranch, title, body, true);
      if (pr !== null) this.files.resultDigest = textDigest(`${title}\n${body}`);
    } else if (pr !== null && this.files.resultHead !== undefined && this.files.resultHead !== head) {
      await this.forge.removeLabel(pr, GITHUB.ciLabel);
    }
    await this.forge.addLabel(this.files.issue, GITHUB.doneLabel);
    await this.forge.removeLabel(this.files.issue, GITHUB.label);
    // Recorded last: until the labels are right, this work is not done (opening is repeat-safe).
    this.files.finalPr = pr ?? 0;
    this.files.resultHead = head;
  }
}
