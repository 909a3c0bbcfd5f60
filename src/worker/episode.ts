// The worker: one episode on one branch. The same code runs in the local runner and in the
// Action's matrix job. The caller checks the workspace out (cleanroom.ts `checkoutInto`) and
// prepares the context folder; this runs setup there (setup.ts; a setup that fails ends the
// episode as a setup result, without an agent), the agent in its sandbox within its budget, and
// once every process of it is gone, records the workspace with forkflush's own git (without what
// setup made), grades a fresh checkout of exactly that snapshot, after setup again, in a sandbox
// of its own, writes the journal line into the snapshot, and commits it on the episode's base.
// The caller moves the branch to the commit.
// The steps, numbered in `episode`: the box and the agent are episode-agent.ts, the judge judge.ts,
// the commit episode-result.ts; what an episode is given is episode-input.ts.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FAILURE_QUOTE_MAX_CHARS } from '../core/bounds.js';
import { chargeFor } from '../core/charge.js';
import { CONFIG_PATH } from '../core/config.js';
import { IGNORED_ONLY } from '../core/end-warnings.js';
import type { Resource } from '../core/resources.js';
import type { EpisodeResult } from '../core/state.js';
import { UNRECORDED } from '../core/stop.js';
import { plainText } from '../core/text.js';
import {
  addCleaned,
  type Cleaned,
  CONTEXT_LIMITS,
  cleanAgentFolder,
  cleanedNote,
  removeTree,
} from '../io/agent-files.js';
import { GitStalledError } from '../io/git.js';
import { episodeLogs, expandHome, setupConfinement, withAccount } from './boundary.js';
import { type AgentRun, type EpisodeBox, prepareBox, runAgentStep } from './episode-agent.js';
import { DiskFullError, diskFull, InterruptedError } from './episode-errors.js';
import type { Charged, EpisodeJob } from './episode-input.js';
import { addLosersSection, commitResult, seconds, setupResult, triesNotes } from './episode-result.js';
import { gradeAsJudge, type JudgeGrading } from './grade.js';
import { judge, NO_GRADING } from './judge.js';
import { judgeRedactor } from './redact.js';
import { prepareWorkspace } from './setup.js';
import { baseSnapshot, ignoredFiles, type Snapshot, snapshot } from './snapshot.js';

export async function runEpisode(job: EpisodeJob): Promise<EpisodeResult> {
  const charged: Charged = job.charged ?? { spent: null };
  try {
    // Every git command of the episode stops with it (Ctrl-C, SIGTERM), whatever it is doing.
    return await episode(job.signal ? { ...job, own: job.own.with({ signal: job.signal }) } : job, charged);
  } catch (e) {
    // Whatever failed once the episode was stopped (a git command it stopped, say) is the stop.
    if (job.signal?.aborted && !(e instanceof InterruptedError))
      throw new InterruptedError(`episode ${job.episode.id} was interrupted`, charged.spent);
    const full = e instanceof InterruptedError ? null : await diskFull(e, [job.scratchDir, job.places.workspace]);
    if (full)
      throw new DiskFullError(
        `the disk is full (${full}): ${job.episode.id} was not recorded; free some space and resume the run`,
        charged.spent,
      );
    throw e;
  } finally {
    // The agent's home and /tmp hold nothing forkflush reads afterwards (its log and session are
    // elsewhere), and a CLI may unpack hundreds of megabytes there per episode (Copilot does).
    // A box that cannot be removed is left, never a reason to lose the episode's outcome.
    await removeTree(job.places.box).catch(() => {});
  }
}

async function episode(job: EpisodeJob, charged: Charged): Promise<EpisodeResult> {
  const started = performance.now();
  // 1. The box: a home, a /tmp and the prompt of the episode's own.
  const b = await prepareBox(job);
  // 2. Setup, before the agent and outside its budget: a workspace it cannot prepare gets no agent.
  const setup = await setupStep(job, b);
  if ('failed' in setup) return setupResult(job, setup.failed, started);
  // 3. With fork.losers: journal, what the branches that lost the round this episode's base won
  //    wrote (core/losers.ts), appended before the agent runs: the lineage's next commits carry it on.
  const start = await addLosersSection(job);
  if (start.note) job.log?.(start.note);
  // 4. The agent, in its sandbox, within its budget.
  await job.agentStarting?.();
  const ran = await runAgentStep(job, b);
  // 5. What it spent, charged before the snapshot, as if the workspace changed: a full disk after
  //    this still charges it. A context too large to carry on goes whole (the adapter has read it).
  addCleaned(ran.removed, await cleanAgentFolder(job.places.context, CONTEXT_LIMITS));
  const chargeOf = (unchanged: boolean) =>
    chargeFor({ ...ran.chargeBase, tries: ran.tried.tries, evaluations: ran.evaluations(), unchanged });
  if (b.interrupt.aborted) {
    // What the attempt spent: measured or reported, else estimated by the time it ran (core/charge.ts).
    const partial = chargeOf(false);
    throw new InterruptedError(
      `episode ${job.episode.id} was interrupted`,
      partial.spent,
      partial.basis === 'estimated',
    );
  }
  const ranCharge = chargeOf(false);
  Object.assign(charged, { spent: ranCharge.spent, estimated: ranCharge.basis === 'estimated' });
  if (ran.logFull) throw new Error(`the agent's log could not be written: ${ran.logFull}`);
  // 6. The workspace as forkflush's own git records it, protected paths as they were at the base.
  const recorded = await recordStep(job, b, setup.excludes, start.tree);
  // Left as the episode found it: a crash with nothing to show (core/stop.ts), charged nothing if quick.
  const unchanged =
    !recorded.unrecorded && recorded.snap.protectedChanged.length === 0 && recorded.snap.tree === start.tree;
  const charge = chargeOf(unchanged);
  Object.assign(charged, { spent: charge.spent, estimated: charge.basis === 'estimated' });
  // Nothing recorded: what it wrote may all be where the workspace's .gitignore leaves it out.
  const ignored = unchanged ? await ignoredFiles(job.own, job.places.workspace, recorded.snap) : [];
  // 7. The judge grades a fresh checkout of exactly that tree.
  const graded = await gradeStep(job, b, recorded, charge);
  // 8. The result, committed on the episode's base.
  const made = resultOf(job, { ran, start, charge, graded, snap: recorded.snap, unchanged, ignored, swept: b.swept });
  return commitResult(job, recorded.snap, made, started);
}

/** Setup in the workspace (setup.ts), or why the workspace could not be prepared. */
async function setupStep(job: EpisodeJob, b: EpisodeBox): Promise<{ excludes: string | null } | { failed: string }> {
  const { config, episode, places, isolation } = job;
  const sandbox = isolation.sandbox;
  if (job.setupProblem === undefined && config.setup.commands.length === 0) return { excludes: null };
  const prepared =
    job.setupProblem !== undefined
      ? { ok: false as const, reason: job.setupProblem }
      : await withAccount(sandbox, (account) =>
          prepareWorkspace({
            config,
            own: job.own,
            base: episode.base,
            episode: episode.id,
            workspace: places.workspace,
            checkoutIndex: job.checkoutIndex,
            scratchDir: job.scratchDir,
            source: b.source,
            confine: sandbox
              ? {
                  sandbox,
                  confinement: {
                    ...setupConfinement(
                      places.workspace,
                      join(job.scratchDir, 'setup-tmp'),
                      places,
                      config,
                      b.source,
                      // Nothing of the agent's: its context, its box, the folders it shares.
                      [places.context, b.box, ...config.sandbox.write.map(expandHome)],
                    ),
                    account,
                  },
                }
              : undefined,
            cache: job.setupCache,
            signal: b.interrupt,
            removed: b.swept,
          }),
        ).catch((e: unknown) => {
          // What setup left stalled forkflush's git: this base cannot be prepared.
          if (e instanceof GitStalledError) return { ok: false as const, reason: `after setup, ${e.message}` };
          throw e;
        });
  if (b.interrupt.aborted) throw new InterruptedError(`episode ${episode.id} was interrupted during its setup`, null);
  if (!prepared.ok) {
    job.log?.(`setup: ${prepared.reason}`);
    return { failed: prepared.reason };
  }
  job.log?.(`setup: ${prepared.how}`);
  return { excludes: prepared.excludes };
}

interface Recorded {
  snap: Snapshot;
  /** Why the workspace could not be recorded (the episode keeps its base), or null. */
  unrecorded: string | null;
}

/** The workspace's files as forkflush's own git records them, protected paths as they were at the base. */
async function recordStep(
  job: EpisodeJob,
  b: EpisodeBox,
  excludes: string | null,
  /** The tree the agent started from: the base, with the losers' section when it got one. */
  startTree: string,
): Promise<Recorded> {
  const { config, episode, places } = job;
  const snapshotIndex = join(job.scratchDir, 'snapshot.index');
  let unrecorded: string | null = null;
  const snap = await snapshot(
    job.own,
    places.workspace,
    job.checkoutIndex,
    snapshotIndex,
    episode.base,
    [...config.grader.protected, ...(job.alsoProtected ?? [CONFIG_PATH])],
    excludes,
  ).catch(async (e: unknown) => {
    // A full disk is the machine's, not the agent's (runEpisode says so); a stop is nobody's result.
    if (b.interrupt.aborted || (await diskFull(e, [job.scratchDir, places.workspace]))) throw e;
    // What the agent left cannot be committed (git refuses a file): the episode keeps the tree it
    // started from (its base, and the losers' section the lineage carries on).
    unrecorded = `${UNRECORDED} (${(e as Error).message.split('\n')[0]?.slice(0, FAILURE_QUOTE_MAX_CHARS)})`;
    return baseSnapshot(job.own, snapshotIndex, startTree);
  });
  addCleaned(b.swept, snap.cleaned);
  return { snap, unrecorded };
}

interface Graded {
  score: number | null;
  reason?: string | undefined;
  graderSeconds: number;
  machineShort?: Resource | undefined;
  note?: string | undefined;
}

/** The snapshot graded by the judge, again when it failed for want of a resource; or why it was not. */
async function gradeStep(
  job: EpisodeJob,
  b: EpisodeBox,
  { snap, unrecorded }: Recorded,
  charge: { spent: number | null; basis: string },
): Promise<Graded> {
  if (unrecorded) return { score: null, reason: unrecorded, graderSeconds: 0 };
  if (snap.protectedChanged.length > 0)
    return {
      score: null,
      reason: `the agent changed protected paths: ${snap.protectedChanged.join(', ')}`,
      graderSeconds: 0,
    };
  // A machine that ran short twice voids the round.
  const judged = () =>
    gradeAsJudge(
      async () => {
        const attempt = await judge(job, snap.tree, b.graderEnv, b.swept).catch((e: unknown): JudgeGrading => {
          // The graded code left what stalled forkflush's git in the judge's checkout: no score.
          if (!(e instanceof GitStalledError) || b.interrupt.aborted) throw e;
          return { ...NO_GRADING, reason: `in the judge's checkout, ${e.message}` };
        });
        // A grading (or the judge's setup) the stop cut short says nothing of the agent's work.
        if (b.interrupt.aborted)
          throw new InterruptedError(
            `episode ${job.episode.id} was interrupted while judged`,
            charge.spent,
            charge.basis === 'estimated',
          );
        return attempt;
      },
      [job.scratchDir],
      job.judgeMachine,
      b.interrupt,
    );
  const shared = job.sharedMachine;
  const contended = shared?.othersSince();
  let g = await judged();
  // A time-out while other branches ran may be theirs (they can starve it of CPU): once more, alone.
  if (g.timedOut && shared && contended?.()) {
    const first = g.reason;
    g = await shared.alone(judged, b.interrupt);
    g = {
      ...g,
      note: [`graded again with no other branch running: the first grading (${first}) ran beside others`, g.note]
        .filter(Boolean)
        .join('; '),
    };
  }
  // The grader's whole output (after the judge's setup's), beside the agent's log: the reason names one line of it.
  // Neither shows what grader.env and setup.env hold: the graded code could print it.
  const hide = judgeRedactor(job.config, b.source);
  const graded = g.setupFailed ? '' : `$ ${job.config.grader.command}\n${g.stdout}${g.stderr}`;
  await writeFile(episodeLogs(job.scratchDir).grader, hide(`${g.setupLog ?? ''}${graded}`));
  return {
    score: g.score,
    reason: g.reason === undefined ? g.reason : hide(g.reason),
    graderSeconds: g.seconds,
    machineShort: g.machineShort,
    note: g.note === undefined ? g.note : hide(g.note),
  };
}

/** The episode's result from its steps, its notes and reasons as plain text (terminals and reports show them). */
function resultOf(
  job: EpisodeJob,
  r: {
    ran: AgentRun;
    start: { note?: string };
    charge: ReturnType<typeof chargeFor>;
    graded: Graded;
    snap: Snapshot;
    unchanged: boolean;
    ignored: string[];
    swept: Cleaned;
  },
): Omit<EpisodeResult, 'commit' | 'wallSeconds'> {
  const { tried } = r.ran;
  const outcome = tried.outcome;
  addCleaned(r.ran.removed, r.swept);
  const cleaned = cleanedNote(r.ran.removed);
  const note = plainText(
    [
      // First, where only forkflush writes: nothingDone reads it (IGNORED_ONLY); names quoted as JSON.
      ...(r.ignored.length > 0
        ? [`${IGNORED_ONLY}: ${JSON.stringify(r.ignored)}, which no commit takes and the judge never sees`]
        : []),
      // The agent's words in quotes it cannot close.
      ...(r.unchanged && outcome.lastWords
        ? [`its final message, changing nothing: "${outcome.lastWords.replaceAll('"', "'")}"`]
        : []),
      ...(job.notes ?? []),
      ...(r.start.note ? [r.start.note] : []),
      ...(outcome.note ? [outcome.note] : []),
      ...(r.ran.egressNote ? [r.ran.egressNote] : []),
      ...triesNotes(tried),
      ...(r.charge.note ? [r.charge.note] : []),
      ...(cleaned ? [cleaned] : []),
      ...(r.graded.note ? [r.graded.note] : []),
    ].join('; '),
  );
  const reason = r.graded.reason ? plainText(r.graded.reason) : undefined;
  return {
    score: r.graded.score,
    ...(reason ? { reason } : {}),
    ...(note ? { note } : {}),
    ...(outcome.usage ? { usage: outcome.usage } : {}),
    spent: r.charge.spent,
    ...(r.charge.basis !== 'measured' ? { spentBasis: r.charge.basis } : {}),
    exit: outcome.exit,
    protectedChanged: r.snap.protectedChanged,
    agentSeconds: seconds(outcome.seconds),
    graderSeconds: seconds(r.graded.graderSeconds),
    sandbox: job.isolation.label,
    ...(job.contextStore ? { contextStore: job.contextStore } : {}),
    ...(tried.failure
      ? {
          failure: {
            kind: tried.failure.kind,
            quote: tried.failure.quote,
            ...(tried.failure.fix ? { fix: tried.failure.fix } : {}),
          },
        }
      : {}),
    ...(tried.retries.length > 0 ? { retries: tried.retries } : {}),
    ...(r.unchanged ? { unchanged: true as const } : {}),
    ...(r.graded.machineShort ? { machineShort: r.graded.machineShort } : {}),
  };
}
