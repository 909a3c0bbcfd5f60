// The core's work items carried out on GitHub: a round is dispatched as one workflow run of
// matrix jobs, a result becomes a check run (and with branch pull requests, a pull request into its
// lineage), a decided round fast-forwards its winners and lets the rest go, the best ref moves, and a
// finished run gets its result pull request and labels. Each step is safe to repeat; what it did is
// noted in the run's record (`files`), which the sync saves.
//
// Where the work lives depends on the run's layout (core/names.ts RefsLayout): by default (2) on
// refs under refs/forkflush/<run>/ that no workflow triggers on, and only the result becomes a
// branch, `forkflush/<run>/result`, with one draft pull request kept current.

import { finalPrBody, finalPrTitle, runCheckText } from '../core/github-status.js';
import {
  checkConclusion,
  checkRunOutput,
  episodeCheckPending,
  episodePrBody,
  episodePrTitle,
  loserComment,
} from '../core/github-text.js';
import { automationChanged } from '../core/globs.js';
import { parseCommitDetails, resultFromCommit } from '../core/journal.js';
import { roundDeadlineMinutes } from '../core/method.js';
import {
  BASE_JOB,
  checkExternalId,
  checkRunName,
  contextRef,
  GITHUB,
  type RunRefs,
  refName,
  roundRunTitle,
} from '../core/names.js';
import { type Episode, type Round, type RunState, setupFailed } from '../core/state.js';
import { type ForgeWork, lineageMovedOutsideProblem } from '../core/work.js';
import { workerDrift, workerDriftText } from '../core/worker-drift.js';
import { workerTimeoutProblem } from '../core/worker-workflow.js';
import type { GitHubApi, GitHubRunRecord } from './api.js';
import type { CheckRunFields } from './checks.js';
import { type Commits, PAST_DEADLINE } from './observe.js';
import { layoutOf, phaseOf, refsOf, resultCommit, resultLineage, textDigest, viewOf } from './record.js';

export class GitHubWork implements ForgeWork {
  constructor(
    private readonly api: GitHubApi,
    private readonly commits: Commits,
    /** The run's record: each step notes here what it did. */
    readonly files: GitHubRunRecord,
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
    const title = roundRunTitle(state.id, round.index);
    // A claim taken over: the handler that held it may have dispatched the round before it died.
    const live = retaking ? await this.api.workflows.liveRun(GITHUB.workflow, title) : null;
    // The branch its jobs' events name: the live run's own (the default branch may be renamed since).
    const branch = live?.branch ?? (await this.api.defaultBranch());
    if (!live) await this.checkWorker(state, branch);
    for (const e of pending) await this.api.createRef(refs.episode(e.round, e.branch), e.base);
    // What people see at once: the run's check (the first round makes it) and one per episode.
    await this.startRunCheck(state, retaking);
    for (const e of pending) await this.startEpisodeCheck(state, e, retaking);
    const runId =
      live?.id ??
      (await this.api.workflows.dispatch(GITHUB.workflow, branch, {
        run: state.id,
        round: String(round.index),
        // The opening round's dispatch grades the initial workspace too, until it is graded.
        episodes: JSON.stringify([
          ...pending.map((e) => e.id),
          ...(round.index === 0 && this.files.baseGrade === 'asked' ? [BASE_JOB] : []),
        ]),
      }));
    const deadline = new Date(this.now.getTime() + roundDeadlineMinutes(state.config) * 60_000);
    // The run's id, when known: only that run's events may end the round (app.ts).
    this.files.dispatched[String(round.index)] = {
      at: this.now.toISOString(),
      deadline: deadline.toISOString(),
      branch,
      ...(runId !== null ? { runId } : {}),
    };
  }

  /**
   * The worker workflow as it is now (a teammate may have edited it since the run started): one
   * whose jobs could not work gets no round (thrown: the run is stuck, saying why, and tries again
   * at the next event); the warnings (its timeout, its differences) are said anew.
   */
  private async checkWorker(state: RunState, branch: string): Promise<void> {
    const text = await this.api.readFile(`.github/workflows/${GITHUB.workflow}`, branch);
    if (text === null) return; // The dispatch says it: the workflow is not there.
    const drift = workerDrift(text, this.api.release);
    if (drift.stop.length > 0)
      throw new Error(
        `.github/workflows/${GITHUB.workflow} on ${branch} changed since the run started, and its jobs could not work: ${drift.stop.join('; ')}. Write it as \`forkflush init --github\` does`,
      );
    const warning = [workerTimeoutProblem(text, state.config), workerDriftText(drift, branch)].filter(
      (w): w is string => w !== null,
    );
    if (warning.length > 0) this.files.workerWarning = warning.join('\n\n');
    else delete this.files.workerWarning;
  }

  /**
   * The run's own check run (GITHUB.check), made once on the commit the run starts from, in
   * progress; the sync keeps what it says current, and publishRun moves it to the result.
   */
  private async startRunCheck(state: RunState, retaking: boolean): Promise<void> {
    if (this.files.runCheck && !this.files.runCheck.done) return;
    // The commit the run stands on: where it started, or its result once it has one.
    const sha = this.files.finalPr && this.files.resultHead ? this.files.resultHead : state.base.commit;
    const fields = runCheckFields(state, this.files, this.now);
    // Taking a claim over: the check its handler may have made is the newest with the run's name.
    const found = retaking && !this.files.runCheck ? await this.api.checks.find(sha, GITHUB.check, state.id) : null;
    const id = found ?? (await this.api.checks.create({ sha, name: GITHUB.check, ...fields }));
    this.files.runCheck = { id, sha, ...(found === null ? { digest: fields.digest } : {}) };
  }

  /** An episode's check run, queued on the commit it starts from (its job makes it in progress). */
  private async startEpisodeCheck(state: RunState, e: Episode, retaking: boolean): Promise<void> {
    if (this.files.checks?.[e.id] !== undefined) return;
    const name = checkRunName(e.id);
    const externalId = checkExternalId(state.id, e.id);
    const found = retaking ? await this.api.checks.find(e.base, name, externalId) : null;
    const id =
      found ??
      (await this.api.checks.create({
        sha: e.base,
        name,
        status: 'queued',
        externalId,
        output: episodeCheckPending(state, e, 'queued'),
      }));
    this.files.checks = { ...this.files.checks, [e.id]: id };
  }

  /**
   * The episode's check run completed with its result, and with `pull_requests: episodes` (layout
   * 1) a pull request into its lineage (`winners` opens one per fork round's winner when adopted).
   */
  async publishResult(state: RunState, e: Episode, retaking: boolean): Promise<void> {
    const r = e.result;
    if (!r) throw new Error(`${e.id} has no result to publish`);
    // A failed job left no commit of its own: its check says why, from what the job left.
    const own = r.commit !== e.base;
    const details = own ? parseCommitDetails((await this.commits.get(r.commit)).message) : null;
    const detailsUrl = this.ownRunUrl(details?.workflowRunUrl);
    const fields = {
      status: 'completed' as const,
      conclusion: checkConclusion(r),
      output: checkRunOutput(state, e, r, details),
      completedAt: this.now.toISOString(),
      ...(detailsUrl ? { detailsUrl } : {}),
    };
    const started = this.files.checks?.[e.id];
    let check: number | null =
      started !== undefined && (await this.api.checks.update(started, fields)) ? started : null;
    if (check === null) {
      // A round dispatched before episodes had checks (an older app), or one a person deleted.
      const name = checkRunName(e.id);
      const externalId = checkExternalId(state.id, e.id);
      // A claim left behind (its handler may have made the check run before it died), or a check
      // that answered 404 (gone, or not readable yet: GitHub's replicas lag behind its writes). The
      // one found is completed here, or it would stay queued beside a new one.
      const found = retaking || started !== undefined ? await this.api.checks.find(e.base, name, externalId) : null;
      check =
        found !== null && (await this.api.checks.update(found, fields))
          ? found
          : await this.api.checks.create({ sha: e.base, name, externalId, ...fields });
    }
    if (!own) {
      this.files.published[e.id] = { pr: null, check };
      return;
    }
    // A failed setup left only the base and a journal line: the check run says what failed.
    const pr =
      state.config.pull_requests === 'episodes' && !setupFailed(e) && layoutOf(this.files) === 1
        ? await this.episodePullRequest(state, e)
        : null;
    this.files.published[e.id] = { pr, check };
  }

  /**
   * The run's check goes where its result is: made on the result's commit (the head of its pull
   * request, where a branch protection rule may require it), and the one it replaces completed.
   */
  private async moveRunCheck(state: RunState, head: string): Promise<void> {
    const old = this.files.runCheck;
    if (old?.sha === head) return;
    const fields = runCheckFields(state, this.files, this.now);
    if (old)
      await this.api.checks.update(old.id, {
        ...fields,
        status: 'completed',
        conclusion: fields.conclusion ?? 'neutral',
      });
    const found = await this.api.checks.find(head, GITHUB.check, state.id);
    const id = found ?? (await this.api.checks.create({ sha: head, name: GITHUB.check, ...fields }));
    this.files.runCheck = {
      id,
      sha: head,
      ...(found === null ? { digest: fields.digest, done: fields.status === 'completed' } : {}),
    };
  }

  /** A workflow run page of this repository (the commit says which run made it), or null. */
  private ownRunUrl(url: string | undefined): string | null {
    if (!url) return null;
    try {
      const u = new URL(url);
      const [, owner, repo, ...rest] = u.pathname.split('/');
      const own = owner === this.api.owner && repo === this.api.repo;
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
    return this.api.pulls.open(branch, lineage, episodePrTitle(state, e, r), episodePrBody(state, e, r));
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
    const heads = await this.api.refHeads(refs.round(round.index));
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
        const moved = await this.api.fastForward(lineage, e.result.commit);
        const head = moved === 'diverged' ? await this.api.refSha(lineage) : e.result.commit;
        const problem = lineageMovedOutsideProblem(state, round, e, head, refName(lineage));
        if (problem) throw new Error(problem);
      } else {
        const pr = this.files.published[e.id]?.pr;
        if (pr) await this.api.pulls.close(pr, loserComment(state, e, winner));
        // No later episode continues a rejected branch: its transcript has no reason to stay.
        await this.api.deleteRef(contextRef(state.id, e.id));
      }
      const ref = refs.episode(e.round, e.branch);
      const at = heads.get(ref);
      if (at === undefined || (await this.leftByForkflush(state, e, at))) await this.api.deleteRef(ref);
      else this.files.keptRefs = { ...this.files.keptRefs, [ref]: at };
    }
    // Decided by its deadline: the jobs still queued (or hung) would only find it decided, and hold
    // runners (a self-hosted one's queue) meanwhile.
    const runId = this.files.dispatched[String(round.index)]?.runId;
    if (runId !== undefined && round.episodes.some((e) => e.result?.reason?.startsWith(PAST_DEADLINE)))
      await this.api.workflows.cancel(runId);
    this.files.settled.push(round.index);
  }

  /**
   * Whether an episode's ref is where forkflush left it: its base, its result, or (for an episode
   * recorded without one: its job failed, its deadline passed) a result of it that landed late.
   * Anything else is a person's push (a reviewer's fix on its pull request, an amended result),
   * which deleting the ref would lose.
   */
  private async leftByForkflush(state: RunState, e: Episode, at: string): Promise<boolean> {
    if (at === e.base || at === e.result?.commit) return true;
    if (e.result && e.result.commit !== e.base) return false;
    return 'result' in resultFromCommit(state.id, e, { sha: at, ...(await this.api.commit(at)) });
  }

  async moveBest(state: RunState, commit: string): Promise<void> {
    await this.api.setRef(this.refs(state).best, commit);
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
      const at = await this.api.refSha(ref);
      if (at === null) await this.api.createRef(ref, head);
      else if (at !== head && (await this.api.fastForward(ref, head)) === 'diverged') {
        // Someone pushed to the result branch: their commits stay; the newer result is on the lineage ref.
        throw new Error(
          `the result branch ${branch} has commits forkflush did not make, so it was not moved to the run's newer result ` +
            `${head.slice(0, 10)} (on ${refs.lineage(lineage, state.lineages.length)}): merge that commit into it, or delete the branch, then \`/autoresearch status\``,
        );
      }
    }
    let pr = this.files.finalPr || null;
    const moved = changed && this.files.resultHead !== head;
    if (moved || (changed && this.files.resultAutomation === undefined))
      this.files.resultAutomation = await this.automationOf(state, head);
    // A person closed the draft (or merged it) and the result moved on since (a nightly round): a
    // new draft proposes the newer result; the closed one is left as they left it.
    const anew = moved && pr !== null && (await this.api.pulls.get(pr))?.open === false;
    if (anew) pr = null;
    if (changed && pr === null) {
      const title = finalPrTitle(state);
      const body = finalPrBody(state, this.files.issue, viewOf(state, this.files));
      // A draft: the result is the agents' work, for a person to review before it is merged.
      pr = await this.api.pulls.open(branch, await this.api.defaultBranch(), title, body, { draft: true, anew });
      if (pr !== null) this.files.resultDigest = textDigest(`${title}\n${body}`);
    } else if (pr !== null && this.files.resultHead !== undefined && this.files.resultHead !== head) {
      await this.api.issues.removeLabel(pr, GITHUB.ciLabel);
    }
    if (changed) await this.moveRunCheck(state, head);
    await this.api.issues.addLabel(this.files.issue, GITHUB.doneLabel);
    await this.api.issues.removeLabel(this.files.issue, GITHUB.label);
    // Recorded last: until the labels are right, this work is not done (opening is repeat-safe).
    this.files.finalPr = pr ?? 0;
    this.files.resultHead = head;
  }

  /** The files that run by themselves the result changes (none said where a listing was truncated). */
  private async automationOf(state: RunState, head: string): Promise<string[]> {
    const [base, result] = await Promise.all(
      [state.base.commit, head].map(async (c) => this.api.treeFiles((await this.api.commit(c)).tree)),
    );
    return base && result ? automationChanged(base, result) : [];
  }
}

/** What the run's check says now (the sync edits it when this changes: `runCheck.digest`). */
export function runCheckFields(
  state: RunState,
  files: GitHubRunRecord,
  now: Date,
): CheckRunFields & { digest: string } {
  const text = runCheckText(state, phaseOf(state, files), viewOf(state, files));
  const digest = textDigest(JSON.stringify(text));
  return {
    status: text.status,
    ...(text.conclusion ? { conclusion: text.conclusion, completedAt: now.toISOString() } : {}),
    output: { title: text.title, summary: text.summary },
    externalId: state.id,
    digest,
  };
}
