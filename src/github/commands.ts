// Starting, stopping and steering a GitHub run: the label that starts (or resumes) it, the
// comment commands, and the nightly tick. Each changes the run's record, then syncs.
import { CONFIG_PATH, ConfigError, parseConfig } from '../core/config.js';
import { forgeAlsoProtected } from '../core/globs.js';
import { GITHUB, issueRunId, lineageBranch, stateRef } from '../core/names.js';
import { loadTemplates } from '../core/prompts.js';
import { mixSeed } from '../core/rng.js';
import { requestFork } from '../core/schedule.js';
import { newRunState, type RunState } from '../core/state.js';
import { visibleText } from '../core/text.js';
import { ConflictError, type RunFiles, type StoredRun } from './forge.js';
import { protectedDigest } from './observe.js';
import { amend } from './record.js';
import { type SyncContext, syncOrYield, syncRun, syncStored } from './sync.js';

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
  const loaded = await loadTemplates(config, (path) => forge.readFile(path, branch), `\`${branch}\``);
  if ('problem' in loaded)
    return { problem: `${loaded.problem} (fix it on \`${branch}\`, then label the issue again).` };
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
    templates: loaded.templates,
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
 * Stops a run cleanly (cancels its jobs, closes its open pull requests), or resumes it: the open
 * round's episodes still without a result are dispatched again, since stopping cancelled them.
 */
export async function setStopped(ctx: SyncContext, stored: StoredRun, stopped: boolean): Promise<RunState | null> {
  const run = stored.state.id;
  const next = await amend(ctx.forge, run, stopped ? 'forkflush: stop' : 'forkflush: resume', (s) => {
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
  const next = await amend(ctx.forge, stored.state.id, 'forkflush: fork requested', (s) => ({
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
