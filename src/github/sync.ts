// One reconcile of a GitHub run. Every trigger (a label, a finished job, a comment command, the
// nightly tick) ends here: observe what landed, let the core decide, claim the work with a
// compare-and-swap of the run's records, do it, record it done. A duplicated, late or lost event
// changes nothing: the next sync finds the same state and does what is still due.
import { createHash } from 'node:crypto';
import { CONFIG_PATH, ConfigError, parseConfig } from '../core/config.js';
import {
  checkConclusion,
  checkRunOutput,
  contextNote,
  episodePrBody,
  episodePrTitle,
  finalPrBody,
  issueComment,
  loserComment,
  type RunPhase,
} from '../core/github-text.js';
import { forgeAlsoProtected, matchesAny } from '../core/globs.js';
import { parseCommitDetails, parseCommitMessage } from '../core/journal.js';
import {
  bestBranch,
  contextRef,
  episodeBranch,
  issueRunId,
  lineageBranch,
  roundRunTitle,
  stateRef,
} from '../core/names.js';
import { templateProblem } from '../core/prompts.js';
import { applyDecision, applyFinish, applyOpen, applyResult, reconcile } from '../core/reconcile.js';
import { mixSeed } from '../core/rng.js';
import { requestFork } from '../core/schedule.js';
import {
  type Episode,
  type EpisodeResult,
  failedResult,
  findEpisode,
  newRunState,
  type Round,
  type RunState,
} from '../core/state.js';
import { visibleText } from '../core/text.js';
import {
  ConflictError,
  type GitCommit,
  type GitHubForge,
  type RunFiles,
  type StoredRun,
  type TreeFile,
} from './forge.js';

/** The names forkflush uses on GitHub. */
export const GITHUB = {
  label: 'autoresearch',
  doneLabel: 'autoresearch: done',
  /** The worker workflow (examples/workflows/forkflush.yml), dispatched once per round. */
  workflow: 'forkflush.yml',
  /** Past its deadline a round's missing results count as failed: job timeout plus queueing. */
  deadlineSlackMinutes: 30,
  /** A claim older than this was left by a handler that crashed; the work is done again. */
  staleClaimMinutes: 10,
} as const;

export interface SyncContext {
  forge: GitHubForge;
  now: Date;
  log?: (line: string) => void;
  /** Episodes whose job ended without a result, from the event that triggered this sync. */
  failedJobs?: Record<string, string>;
  /** A round whose worker workflow run has completed (all its jobs ended), from the event. */
  roundEnded?: number;
}

/** Commits read during one sync, so no commit is fetched twice. */
type Commits = Map<string, GitCommit>;

async function commitOf(forge: GitHubForge, commits: Commits, sha: string): Promise<GitCommit> {
  const known = commits.get(sha);
  if (known !== undefined) return known;
  const commit = await forge.commit(sha);
  commits.set(sha, commit);
  return commit;
}

/** The protected files of a tree (mode, blob and path of each), as one digest. */
export function protectedDigest(tree: TreeFile[], globs: string[]): string {
  const lines = tree
    .filter((f) => matchesAny(f.path, globs))
    .map((f) => `${f.mode} ${f.sha}\t${f.path}`)
    .sort();
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}

/**
 * Why a result commit cannot be trusted, or null when it can: forkflush's worker commits every
 * result on the episode's base, with the protected paths of the run's base. Anything else was
 * pushed by someone else (a token that leaked, a hand on the branch), whatever its trailers say.
 */
async function provenanceProblem(
  forge: GitHubForge,
  state: RunState,
  files: RunFiles,
  e: Episode,
  sha: string,
  commit: GitCommit,
): Promise<string | null> {
  const short = sha.slice(0, 7);
  if (commit.parents.length !== 1 || commit.parents[0] !== e.base) {
    return `its commit ${short} is not on the episode's base ${e.base.slice(0, 7)}: forkflush commits every result there`;
  }
  if (!files.protectedDigest) return null;
  const tree = await forge.treeFiles(commit.tree);
  if (tree === null) return `the tree of its commit ${short} is too large to check its protected paths`;
  const globs = [...state.config.grader.protected, ...forgeAlsoProtected(files.configPath)];
  if (protectedDigest(tree, globs) !== files.protectedDigest) {
    return `its commit ${short} changes protected paths (${globs.join(', ')}) from the run's base`;
  }
  return null;
}

type Work = { key: string; run: () => Promise<void> };

/** Reconciles one run until it waits for jobs (or is finished or stopped). */
export async function syncRun(ctx: SyncContext, run: string): Promise<RunState | null> {
  const stored = await ctx.forge.loadRun(stateRef(run));
  return stored ? syncOrYield(ctx, stored) : null;
}

/**
 * syncStored, where losing a race to another handler is no error: that handler saved first, and
 * its work stands (a command's or an event's, say the events of the app's own changes).
 */
async function syncOrYield(ctx: SyncContext, stored: StoredRun): Promise<RunState | null> {
  try {
    return await syncStored(ctx, stored);
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
    ctx.log?.(`${stored.state.id}: another handler changed the run first; leaving the work to it`);
    return null;
  }
}

async function syncStored(ctx: SyncContext, stored: StoredRun): Promise<RunState> {
  const { forge, now } = ctx;
  let state = stored.state;
  const files: RunFiles = structuredClone(stored.files);
  let sha = stored.sha;
  let saved = JSON.stringify([stored.state, stored.files]);
  const persist = async () => {
    const next = JSON.stringify([state, files]);
    if (next === saved) return;
    sha = await forge.saveRun(stateRef(state.id), state, files, sha, `forkflush: ${summaryLine(state)}`);
    saved = next;
  };
  const commits: Commits = new Map();
  if (!files.stopped) {
    state = await observe(ctx, state, files, commits);
    state = decideWhatIsDue(state);
  }
  // Claim the work in the same compare-and-swap that records the decisions: of two racing
  // handlers, only the one whose save lands does the work.
  const due = dueWork(ctx, state, files, commits);
  // A stale claim on work no longer due: its handler did the work, then died before letting go.
  // (A stopped run keeps its other claims: they tell whoever resumes it what may be half done.)
  for (const [key, at] of Object.entries(files.claims)) {
    if (!due.some((w) => w.key === key) && isUnclaimed(at, now)) delete files.claims[key];
  }
  const work = files.stopped ? [] : due.filter((w) => isUnclaimed(files.claims[w.key], now));
  for (const w of work) files.claims[w.key] = now.toISOString();
  await persist();
  const record = async (released: string[]) => {
    if (JSON.stringify([state, files]) === saved) return;
    sha = await recordDone(ctx, state, files, released, sha);
    saved = JSON.stringify([state, files]);
  };
  let failure: unknown = null;
  try {
    for (const w of work) {
      await w.run();
      delete files.claims[w.key];
    }
    const phase: RunPhase = files.stopped ? 'stopped' : state.status === 'finished' ? 'finished' : 'running';
    const notes = [
      ...(files.hiddenInTask
        ? [
            `The issue text had ${files.hiddenInTask} hidden part(s) (HTML comments or invisible characters). The agent gets the text as GitHub shows it, without them.`,
          ]
        : []),
      ...contextNote(state, files.privateRepository),
      ...(forge.sealsRecords
        ? []
        : [
            "This run's record is not sealed (the app has no FORKFLUSH_RECORD_KEY): forkflush cannot tell a record it wrote from one rewritten with a leaked token.",
          ]),
    ];
    const body = issueComment(state, phase, notes);
    const digest = createHash('sha256').update(body).digest('hex').slice(0, 16);
    if (digest !== files.commentDigest || files.commentId === null) {
      files.commentId = await forge.upsertComment(files.issue, files.commentId, body);
      files.commentDigest = digest;
    }
  } catch (e) {
    failure = e;
  }
  // What was done is recorded, in one save, even when another handler saved meanwhile or an item failed.
  await record(work.map((w) => w.key).filter((key) => !(key in files.claims)));
  if (failure) throw failure;
  return state;
}

/**
 * Saves what this handler did. When another handler saved first (a conflict), the latest record is
 * read again and this handler's facts are merged into it: rounds dispatched and settled, results
 * published, the best branch, the final pull request, the comment, and the claims it released.
 */
async function recordDone(ctx: SyncContext, state: RunState, mine: RunFiles, released: string[], expected: string) {
  let candidate = { state, files: mine, sha: expected };
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await ctx.forge.saveRun(
        stateRef(state.id),
        candidate.state,
        candidate.files,
        candidate.sha,
        'forkflush: work done',
      );
    } catch (e) {
      // A failed save would leave this work claimed but not recorded, and done again once the claim
      // goes stale: a server error is worth another try, with the same record.
      if (isServerError(e)) continue;
      if (!(e instanceof ConflictError)) throw e;
      const latest = await ctx.forge.loadRun(stateRef(state.id));
      if (!latest) throw e;
      candidate = { state: latest.state, files: mergeDone(latest.files, mine, released), sha: latest.sha };
    }
  }
  throw new ConflictError(`${state.id}: could not record the work done after 5 tries`);
}

function isServerError(e: unknown): boolean {
  const status = typeof e === 'object' && e !== null && 'status' in e ? Number((e as { status: unknown }).status) : 0;
  return status >= 500;
}

/** The latest record, with what `mine` did added and the claims `released` given back. */
export function mergeDone(latest: RunFiles, mine: RunFiles, released: string[]): RunFiles {
  const claims = { ...latest.claims };
  for (const key of released) delete claims[key];
  return {
    ...latest,
    dispatched: { ...latest.dispatched, ...mine.dispatched },
    published: { ...latest.published, ...mine.published },
    settled: [...new Set([...latest.settled, ...mine.settled])].sort((a, b) => a - b),
    finalPr: latest.finalPr ?? mine.finalPr,
    bestCommit: mine.bestCommit ?? latest.bestCommit,
    commentId: latest.commentId ?? mine.commentId,
    commentDigest: mine.commentDigest ?? latest.commentDigest,
    claims,
  };
}

/** Reads the results that landed on the open round's branches (one call for all of them). */
async function observe(ctx: SyncContext, state: RunState, files: RunFiles, commits: Commits): Promise<RunState> {
  const open = state.rounds.find((r) => !r.decision);
  const dispatched = open ? files.dispatched[String(open.index)] : undefined;
  if (!open || !dispatched) return state;
  const heads = await ctx.forge.branchHeads(`forkflush/${state.id}/round-${open.index}/`);
  let next = state;
  for (const e of open.episodes) {
    if (e.result) continue;
    const head = heads.get(episodeBranch(state.id, e.round, e.branch));
    let result: EpisodeResult | null = null;
    if (head && head !== e.base) {
      const commit = await commitOf(ctx.forge, commits, head);
      const parsed = parseCommitMessage(commit.message, head);
      const problem =
        parsed && parsed.runId === state.id && parsed.episode === e.id
          ? await provenanceProblem(ctx.forge, state, files, e, head, commit)
          : `its branch moved to ${head.slice(0, 7)}, which is not a result of this episode`;
      result = problem === null && parsed ? parsed.result : failedResult(e, problem ?? 'not a result');
    } else if (ctx.failedJobs?.[e.id]) {
      result = failedResult(e, ctx.failedJobs[e.id] as string);
    } else if (ctx.roundEnded === open.index) {
      result = failedResult(e, "its round's workflow run ended without a result for it");
    } else if (ctx.now.getTime() > Date.parse(dispatched.deadline)) {
      result = failedResult(e, `no result by the round's deadline (${dispatched.deadline})`);
    }
    if (result) next = applyResult(next, e.id, result);
  }
  return next;
}

/** Applies every decision the core can make now, until it waits for jobs. */
function decideWhatIsDue(initial: RunState): RunState {
  let state = initial;
  for (let guard = 0; guard < 1000; guard++) {
    const [first] = reconcile(state);
    if (!first || first.type === 'run') return state;
    if (first.type === 'open') state = applyOpen(state, first.round);
    else if (first.type === 'decide') state = applyDecision(state, first.round, first.decision);
    else return applyFinish(state);
  }
  throw new Error(`${initial.id}: the schedule did not settle`);
}

/** The GitHub work the state calls for that is not done yet, in the order it must happen. */
function dueWork(ctx: SyncContext, state: RunState, files: RunFiles, commits: Commits): Work[] {
  const { forge, now } = ctx;
  const work: Work[] = [];
  const lineages = state.lineages.length;
  for (const round of state.rounds) {
    for (const e of round.episodes) {
      if (!e.result || files.published[e.id]) continue;
      const result = e.result;
      // A claim left behind: its handler may have made the check run before it died.
      const retaking = files.claims[`publish:${e.id}`] !== undefined;
      work.push({
        key: `publish:${e.id}`,
        run: () => publish(forge, commits, state, files, e, result, now, retaking),
      });
    }
    if (round.decision && !files.settled.includes(round.index)) {
      work.push({ key: `settle:${round.index}`, run: () => settle(forge, state, files, round) });
    }
  }
  const open = state.rounds.find((r) => !r.decision);
  if (open && !files.dispatched[String(open.index)]) {
    // A claim left behind (stale, or it would not be taken): its handler may have dispatched.
    const retaking = files.claims[`dispatch:${open.index}`] !== undefined;
    work.push({ key: `dispatch:${open.index}`, run: () => dispatch(forge, state, files, open, now, retaking) });
  }
  if (state.status === 'finished' && files.finalPr === null) {
    work.push({
      key: 'final',
      run: async () => {
        // The lineage that holds the best score (best-of-n keeps several); 0: nothing to propose,
        // the lineage never moved past the default branch.
        const best = state.best ? findEpisode(state, state.best.episode) : undefined;
        const pr = await forge.openPullRequest(
          lineageBranch(state.id, best?.lineage ?? 0, lineages),
          files.defaultBranch,
          `forkflush ${state.id}: best score ${state.best?.score ?? 'none'}`,
          finalPrBody(state),
        );
        await forge.addLabel(files.issue, GITHUB.doneLabel);
        await forge.removeLabel(files.issue, GITHUB.label);
        // Recorded last: until the labels are right, this work is not done (opening is repeat-safe).
        files.finalPr = pr ?? 0;
      },
    });
  }
  const best = state.best;
  if (best && best.commit !== files.bestCommit) {
    work.push({
      key: 'best',
      run: async () => {
        await forge.setBranch(bestBranch(state.id), best.commit);
        files.bestCommit = best.commit;
      },
    });
  }
  return work;
}

/** A pull request (base: the lineage) and a check run for an episode whose result landed. */
async function publish(
  forge: GitHubForge,
  commits: Commits,
  state: RunState,
  files: RunFiles,
  e: Episode,
  r: EpisodeResult,
  now: Date,
  retaking: boolean,
) {
  const branch = episodeBranch(state.id, e.round, e.branch);
  const lineage = lineageBranch(state.id, e.lineage, state.lineages.length);
  // A failed job left no commit of its own: there is nothing to review or check.
  if (r.commit === e.base) {
    files.published[e.id] = { pr: null, check: null };
    return;
  }
  const name = `forkflush ${e.id}`;
  const found = retaking ? await forge.findCheckRun(r.commit, name) : null;
  const check =
    found ??
    (await forge.createCheckRun({
      sha: r.commit,
      name,
      conclusion: checkConclusion(r),
      output: checkRunOutput(state, e, r, parseCommitDetails((await commitOf(forge, commits, r.commit)).message)),
      completedAt: now.toISOString(),
    }));
  const pr = await forge.openPullRequest(branch, lineage, episodePrTitle(state, e, r), episodePrBody(state, e, r));
  files.published[e.id] = { pr, check };
}

/**
 * Carries out a decision: each adopted episode's commit is fast-forwarded into its lineage (its
 * pull request then shows as merged); the other branches are closed with their score against
 * the winner's and deleted.
 */
async function settle(forge: GitHubForge, state: RunState, files: RunFiles, round: Round) {
  const adopted = round.decision?.adopted ?? [];
  const winner = round.episodes.find((e) => e.id === round.decision?.winner) ?? null;
  for (const e of round.episodes) {
    const branch = episodeBranch(state.id, e.round, e.branch);
    if (adopted.includes(e.id) && e.result) {
      const lineage = lineageBranch(state.id, e.lineage, state.lineages.length);
      const moved = await forge.fastForward(lineage, e.result.commit);
      const head = moved === 'diverged' ? await forge.refSha(`refs/heads/${lineage}`) : e.result.commit;
      // A later round of this lineage may have been settled first (this round's handler died
      // holding its claim): its winner descends from this one, so the lineage is past it already.
      if (head !== e.result.commit && !laterAdopted(state, round, e.lineage).includes(head ?? '')) {
        throw new Error(
          `${lineage} moved outside forkflush; it must descend from ${e.base.slice(0, 7)} to adopt ${e.id}`,
        );
      }
    } else {
      const pr = files.published[e.id]?.pr;
      if (pr) await forge.closePullRequest(pr, loserComment(state, e, winner));
      // No later episode continues a rejected branch: its transcript has no reason to stay.
      await forge.deleteRef(contextRef(state.id, e.id));
    }
    await forge.deleteBranch(branch);
  }
  files.settled.push(round.index);
}

/** The commits later decided rounds adopted into a lineage: each descends from this round's. */
function laterAdopted(state: RunState, round: Round, lineage: number): string[] {
  return state.rounds
    .filter((r) => r.index > round.index && r.decision)
    .flatMap((r) => r.episodes.filter((e) => e.lineage === lineage && r.decision?.adopted.includes(e.id)))
    .flatMap((e) => (e.result ? [e.result.commit] : []));
}

/**
 * Creates the round's branches at their bases and dispatches the worker workflow once. Taking
 * over the claim of a handler that died, it first looks for the run that handler may have
 * started: GitHub creates a dispatched run at once, and its title names the round.
 */
async function dispatch(
  forge: GitHubForge,
  state: RunState,
  files: RunFiles,
  round: Round,
  now: Date,
  retaking: boolean,
) {
  // After a resume, only the episodes still without a result run again.
  const pending = round.episodes.filter((e) => !e.result);
  for (const e of pending) await forge.createBranch(episodeBranch(state.id, e.round, e.branch), e.base);
  const started = retaking && (await forge.hasLiveRun(GITHUB.workflow, roundRunTitle(state.id, round.index)));
  if (!started) {
    await forge.dispatchWorkflow(GITHUB.workflow, files.defaultBranch, {
      run: state.id,
      round: String(round.index),
      episodes: JSON.stringify(pending.map((e) => e.id)),
    });
  }
  const c = state.config;
  const minutes = (c.agent.timeout + 2 * c.grader.timeout) / 60 + GITHUB.deadlineSlackMinutes;
  files.dispatched[String(round.index)] = {
    at: now.toISOString(),
    deadline: new Date(now.getTime() + minutes * 60_000).toISOString(),
  };
}

function isUnclaimed(claimedAt: string | undefined, now: Date): boolean {
  return claimedAt === undefined || now.getTime() - Date.parse(claimedAt) > GITHUB.staleClaimMinutes * 60_000;
}

function summaryLine(state: RunState): string {
  const open = state.rounds.find((r) => !r.decision);
  return open ? `round ${open.index} (${open.phase})` : state.status;
}

// Starting, stopping and steering a run.

export interface IssueRef {
  number: number;
  title: string;
  body: string | null;
}

/** Starts the run of an issue (or resumes a stopped one). Returns a message for the user on a problem. */
export async function startRun(
  ctx: SyncContext,
  issue: IssueRef,
): Promise<{ problem: string } | { state: RunState | null }> {
  const { forge } = ctx;
  const run = issueRunId(issue.number);
  const existing = await forge.loadRun(stateRef(run));
  if (existing) {
    if (existing.files.stopped) return { state: await setStopped(ctx, existing, false) };
    return { state: await syncRun(ctx, run) };
  }
  const repository = await forge.repository();
  const branch = repository.defaultBranch;
  const text = await forge.readFile(CONFIG_PATH, branch);
  if (text === null) {
    return {
      problem: `There is no \`${CONFIG_PATH}\` on \`${branch}\`: add one (see the forkflush README), then label the issue again.`,
    };
  }
  let config: ReturnType<typeof parseConfig>;
  try {
    config = parseConfig(text, CONFIG_PATH);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return {
      problem: `\`${CONFIG_PATH}\` on \`${branch}\` is not valid, so no run started. Fix these and label the issue again:\n\n${e.problems.map((p) => `- ${p}`).join('\n')}`,
    };
  }
  const templates: RunFiles['templates'] = {};
  for (const kind of ['branch', 'continuation'] as const) {
    const path = config.prompts[kind];
    if (!path) continue;
    const t = await forge.readFile(path, branch);
    if (t === null) return { problem: `prompts.${kind}: \`${path}\` is not on \`${branch}\`.` };
    templates[kind] = t;
  }
  const templateError = templateProblem(config, templates);
  if (templateError)
    return { problem: `${templateError} (fix the template on \`${branch}\`, then label the issue again).` };
  const base = await forge.refSha(`refs/heads/${branch}`);
  if (!base) return { problem: `The default branch \`${branch}\` has no commits.` };
  // What every result must keep of the base: its protected files (checked against each result's tree).
  const baseTree = await forge.treeFiles((await forge.commit(base)).tree);
  const globs = [...config.grader.protected, ...forgeAlsoProtected(CONFIG_PATH)];
  const state = newRunState({ id: run, seed: mixSeed(issue.number), config, baseCommit: base, baseScore: null });
  const task = visibleText(`# ${issue.title}\n\n${issue.body ?? ''}`);
  const files: RunFiles = {
    task: task.text,
    ...(task.hidden > 0 ? { hiddenInTask: task.hidden } : {}),
    templates,
    configPath: CONFIG_PATH,
    defaultBranch: branch,
    issue: issue.number,
    commentId: null,
    stopped: false,
    dispatched: {},
    published: {},
    settled: [],
    finalPr: null,
    bestCommit: null,
    lastNightly: null,
    claims: {},
    ...(baseTree ? { protectedDigest: protectedDigest(baseTree, globs) } : {}),
    privateRepository: repository.private,
  };
  for (const l of state.lineages) await forge.createBranch(lineageBranch(run, l.index, state.lineages.length), base);
  try {
    const sha = await forge.saveRun(stateRef(run), state, files, null, 'forkflush: new run');
    return { state: await syncStored(ctx, { state, files, sha }) };
  } catch (e) {
    if (e instanceof ConflictError) return { state: null };
    throw e;
  }
}

/**
 * Changes a run's record: reads it, applies the change, compare-and-swaps; on a conflict it reads
 * the newer record and applies the change again (the changes here are idempotent intents).
 */
async function amend(
  ctx: SyncContext,
  run: string,
  message: string,
  change: (stored: StoredRun) => { state: RunState; files: RunFiles },
): Promise<StoredRun | null> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const stored = await ctx.forge.loadRun(stateRef(run));
    if (!stored) return null;
    const next = change(stored);
    try {
      return { ...next, sha: await ctx.forge.saveRun(stateRef(run), next.state, next.files, stored.sha, message) };
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
    }
  }
  throw new ConflictError(`${run}: the run kept changing; try again`);
}

/**
 * Stops a run cleanly (cancels its jobs, closes its open pull requests), or resumes it: the open
 * round's episodes still without a result are dispatched again, since stopping cancelled them.
 */
export async function setStopped(ctx: SyncContext, stored: StoredRun, stopped: boolean): Promise<RunState | null> {
  const run = stored.state.id;
  const next = await amend(ctx, run, stopped ? 'forkflush: stop' : 'forkflush: resume', (s) => {
    const files = { ...structuredClone(s.files), stopped };
    const open = s.state.rounds.find((r) => !r.decision);
    if (!stopped && open) {
      delete files.dispatched[String(open.index)];
      delete files.claims[`dispatch:${open.index}`];
    }
    return { state: s.state, files };
  });
  if (!next) return null;
  if (stopped) {
    await ctx.forge.cancelRuns(GITHUB.workflow, run);
    for (const round of next.state.rounds.filter((r) => !next.files.settled.includes(r.index))) {
      for (const e of round.episodes) {
        const pr = next.files.published[e.id]?.pr;
        if (pr) await ctx.forge.closePullRequest(pr, 'The run was stopped; this branch is kept as it is.');
      }
    }
  }
  return syncOrYield(ctx, next);
}

/** `/autoresearch fork`: one more fork round of the leader, now. */
export async function forkNow(ctx: SyncContext, stored: StoredRun): Promise<RunState | null> {
  const next = await amend(ctx, stored.state.id, 'forkflush: fork requested', (s) => ({
    state: requestFork(s.state),
    files: s.files,
  }));
  return next ? syncOrYield(ctx, next) : null;
}

/**
 * The nightly tick: repairs every run a lost event left behind, and forks the leader of finished
 * runs configured with `schedule: nightly` into one more round (once a day).
 */
export async function nightly(ctx: SyncContext): Promise<string[]> {
  const touched: string[] = [];
  for (const run of await ctx.forge.listRuns()) {
    const stored = await ctx.forge.loadRun(stateRef(run));
    if (!stored || stored.files.stopped) continue;
    const today = ctx.now.toISOString().slice(0, 10);
    const wantsRound =
      stored.state.config.schedule === 'nightly' &&
      stored.state.status === 'finished' &&
      stored.state.lineages.length === 1 &&
      stored.files.lastNightly !== today;
    try {
      if (wantsRound) {
        const files = { ...stored.files, lastNightly: today };
        const state = requestFork(stored.state);
        const sha = await ctx.forge.saveRun(stateRef(run), state, files, stored.sha, 'forkflush: nightly round');
        await syncStored(ctx, { state, files, sha });
      } else {
        // Finished runs too: a lost event may have left their last decision or final pull request undone.
        await syncStored(ctx, stored);
      }
      touched.push(run);
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
    }
  }
  return touched;
}
