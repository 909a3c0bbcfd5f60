// The worker: one episode on one branch. The same code runs in the local runner and in the
// Action's matrix job. The caller checks the workspace out (cleanroom.ts `checkoutInto`) and
// prepares the context folder; this runs setup there (setup.ts; a setup that fails ends the
// episode as a setup result, without an agent), the agent in its sandbox within its budget, and
// once every process of it is gone, records the workspace with forkflush's own git (without what
// setup made), grades a fresh checkout of exactly that snapshot, after setup again, in a sandbox
// of its own, writes the journal line into the snapshot, and commits it on the episode's base.
// The caller moves the branch to the commit.
// (Over 400 lines: one episode's steps, in the order they run; each step's work is in its own module.)
import { appendFile, lstat, mkdir, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AgentAdapter } from '../agents/agent.js';
import {
  CONTEXT_MAX_BYTES,
  DISK_FULL_BELOW_BYTES,
  DISK_FULL_BELOW_INODES,
  FAILURE_QUOTE_MAX_CHARS,
  JOURNAL_LINE_MAX_CHARS,
  JOURNAL_READ_MAX_BYTES,
  JOURNAL_TAIL_LINES,
} from '../core/bounds.js';
import { chargeFor } from '../core/charge.js';
import { CONFIG_PATH, type Config } from '../core/config.js';
import { matchesAny } from '../core/globs.js';
import { appendToJournal, boundedResult, commitMessage, type EpisodeDetails, journalEntry } from '../core/journal.js';
import { withSection } from '../core/losers.js';
import type { Resource } from '../core/resources.js';
import type { Episode, EpisodeResult } from '../core/state.js';
import { formatNumber, plainText } from '../core/text.js';
import {
  addCleaned,
  type Cleaned,
  cleanAgentFolder,
  cleanedNote,
  NOTHING_CLEANED,
  removeTree,
  sweepTree,
} from '../io/agent-files.js';
import { GitStalledError } from '../io/git.js';
import { NO_ACCOUNT } from '../io/sandbox.js';
import { runTries, type Tried } from './agent-tries.js';
import {
  agentConfinement,
  type EpisodePlaces,
  episodeLogs,
  expandHome,
  graderConfinement,
  type Isolation,
  judgeFixedPaths,
  privateTmp,
  sessionSpawner,
  setupConfinement,
  withAccount,
} from './boundary.js';
import {
  baseSnapshot,
  checkoutInto,
  commitTree,
  diffStat,
  indexedText,
  type OwnRepo,
  rewriteFiles,
  type Snapshot,
  snapshot,
  untrackedPaths,
  writeIndexed,
  writeTracked,
} from './cleanroom.js';
import { startEgress } from './egress.js';
import { allowedEnv } from './env.js';
import { gradeAsJudge, type JudgeGrading, type JudgeMachine, runGrader } from './grade.js';
import { startGradeService } from './grade-service.js';
import { hiddenPathFailure } from './hidden-paths.js';
import { sealMessage } from './seal.js';
import { prepareWorkspace, runSetup, type SetupCache } from './setup.js';

export class InterruptedError extends Error {
  override name = 'InterruptedError';
  /** What the stopped attempt spent, where it is known: measured, reported, or estimated (core/charge.ts). */
  constructor(
    message: string,
    readonly spent: number | null = null,
    /** `spent` is an estimate: the agent reported no usage. */
    readonly estimated = false,
  ) {
    super(message);
  }
}

export interface EpisodeJob {
  runId: string;
  /** The job's workflow run on the web, recorded in the commit for the check run to link (GitHub). */
  workflowRunUrl?: string;
  config: Config;
  episode: Episode;
  phase: string;
  /** forkflush's own git view of the repository the commit goes into. */
  own: OwnRepo;
  /** The workspace (checked out at `episode.base` by `checkoutInto`), context, box and private places. */
  places: EpisodePlaces;
  /** The index `checkoutInto` wrote for the workspace: the snapshot starts from it. */
  checkoutIndex: string;
  /** forkflush's private folder for the episode (the agent's log, the judge's copy); not in the box. */
  scratchDir: string;
  prompt: string;
  agent: AgentAdapter;
  isolation: Isolation;
  /** Extra paths to protect (e.g. the config file the run was started with). */
  alsoProtected?: string[];
  /** Notes for the result from whoever prepared the episode (a context that could not be opened). */
  notes?: string[];
  /** On a forge: how the context the episode leaves will be kept (recorded in the result). */
  contextStore?: EpisodeResult['contextStore'];
  /** Seals the result commit's message, so that a result read back later is known to be forkflush's. */
  sealKey?: Buffer;
  /** Aborts the episode (Ctrl-C); the episode is then left without a result. */
  signal?: AbortSignal;
  /** The environment the agent's and the grader's allowlists are taken from. */
  env?: NodeJS.ProcessEnv;
  /** The wait before a retry (tests: no real waiting); agent-tries.ts abortableSleep by default. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /**
   * Why the workspace could not be prepared before setup even ran (on GitHub: the agent's CLI
   * could not be installed): the episode ends as a setup result, its agent never started.
   */
  setupProblem?: string;
  /** Locally, with setup.cache: what setup made for a base, shared by the episodes of that base. */
  setupCache?: SetupCache;
  /**
   * With fork.losers: journal, the section of the branches that lost the fork round the episode's
   * base won (core/losers.ts sectionFor): appended to the journal before the agent runs.
   */
  journalSection?: string;
  /** One line per step of the episode's preparation (the Action's job log). */
  log?: (line: string) => void;
  /** How the judge watches the machine while it grades (grade.ts MACHINE; tests bring their own). */
  judgeMachine?: JudgeMachine;
}

/**
 * A full disk (or quota) during an episode: nobody's result, whoever filled it (the agent, a
 * sibling, the machine). The episode is not recorded; what its agent spent is charged, and it runs
 * again when the run is resumed.
 */
export class DiskFullError extends Error {
  override name = 'DiskFullError';
  constructor(
    message: string,
    /** What the attempt spent, where it is known. */
    readonly spent: number | null,
  ) {
    super(message);
  }
}

/** The line of an error that says the disk (or a quota) is full, or null. */
function diskFullLine(message: string): string | null {
  return (
    message
      .split('\n')
      .find((l) => /No space left on device|ENOSPC|Disk quota exceeded|EDQUOT/i.test(l))
      ?.trim()
      .slice(0, FAILURE_QUOTE_MAX_CHARS) ?? null
  );
}

/**
 * Whether an error is a full disk: it says so, and one of the episode's filesystems is nearly
 * full now. The words alone are not enough: error messages quote names the agent chose.
 */
async function diskFull(e: unknown, dirs: string[]): Promise<string | null> {
  const line = e instanceof Error ? diskFullLine(e.message) : null;
  if (!line) return null;
  for (const dir of dirs) {
    const s = await statfs(dir).catch(() => null);
    if (s && (s.bavail * s.bsize < DISK_FULL_BELOW_BYTES || (s.files > 0 && s.ffree < DISK_FULL_BELOW_INODES)))
      return line;
  }
  return null;
}

export async function runEpisode(job: EpisodeJob): Promise<EpisodeResult> {
  const charged: Charged = { spent: null };
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

/** What an episode's agent spent, once known (a full disk after that still charges it). */
interface Charged {
  spent: number | null;
}

async function episode(job: EpisodeJob, charged: Charged): Promise<EpisodeResult> {
  const started = performance.now();
  const { config, episode, places, isolation } = job;
  const sandbox = isolation.sandbox;
  const source = job.env ?? process.env;
  const box = places.box;
  await removeTree(box);
  for (const dir of [join(box, 'home'), join(box, 'tmp'), job.scratchDir]) await mkdir(dir, { recursive: true });
  const promptFile = join(box, 'prompt.md');
  await writeFile(promptFile, job.prompt);
  // A home of the episode's own (no history, no credentials of the user's), and a private /tmp.
  const home = { HOME: join(box, 'home'), TMPDIR: sandbox ? '/tmp' : join(box, 'tmp') };
  const agentEnv = { ...allowedEnv(source, [...job.agent.passEnv, ...config.agent.env]), ...home };
  const graderEnv = allowedEnv(source, config.grader.env);
  const interrupt = job.signal ?? new AbortController().signal;
  // What was swept out of the workspace and the judge's checkout (git would have stalled on it).
  const swept: Cleaned = { ...NOTHING_CLEANED };

  // Setup, before the agent and outside its budget: a workspace it cannot prepare gets no agent.
  let excludes: string | null = null;
  if (job.setupProblem !== undefined || config.setup.commands.length > 0) {
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
              source,
              confine: sandbox
                ? {
                    sandbox,
                    confinement: {
                      ...setupConfinement(
                        places.workspace,
                        join(job.scratchDir, 'setup-tmp'),
                        places,
                        config,
                        source,
                        // Nothing of the agent's: its context, its box, the folders it shares.
                        [places.context, box, ...config.sandbox.write.map(expandHome)],
                      ),
                      account,
                    },
                  }
                : undefined,
              cache: job.setupCache,
              signal: interrupt,
              removed: swept,
            }),
          ).catch((e: unknown) => {
            // What setup left stalled forkflush's git: this base cannot be prepared.
            if (e instanceof GitStalledError) return { ok: false as const, reason: `after setup, ${e.message}` };
            throw e;
          });
    if (interrupt.aborted) throw new InterruptedError(`episode ${episode.id} was interrupted during its setup`, null);
    if (!prepared.ok) {
      job.log?.(`setup: ${prepared.reason}`);
      return setupResult(job, prepared.reason, started);
    }
    job.log?.(`setup: ${prepared.how}`);
    excludes = prepared.excludes;
  }

  // With fork.losers: journal, what the branches that lost the round this episode's base won wrote
  // (core/losers.ts), appended before the agent runs: the lineage's next commits carry it on.
  const start = await addLosersSection(job);
  if (start.note) job.log?.(start.note);

  const stopForBudget = new AbortController();
  const unit = config.budget.unit;
  // The agent and the gradings it asks for: one account, since both write the workspace.
  const account = sandbox?.account() ?? NO_ACCOUNT;
  const grading = await startGradeService({
    config,
    workdir: places.workspace,
    box,
    env: { ...graderEnv, ...home },
    ...(sandbox
      ? {
          confine: {
            sandbox,
            confinement: {
              ...graderConfinement(places.workspace, join(box, 'tmp'), places, config, source, [places.context]),
              account,
            },
          },
        }
      : {}),
    limit: unit === 'evaluations' ? Math.max(1, Math.floor(episode.allowance + 1e-9)) : Number.POSITIVE_INFINITY,
    onExhausted: () => stopForBudget.abort('budget'),
  }).catch((e: unknown) => {
    account.release();
    throw e;
  });
  // The agent's way out: forkflush's proxy, which holds its keys (worker/egress.ts).
  const egress = await startEgress({ config, env: agentEnv, sandboxed: sandbox !== null }).catch(async (e: unknown) => {
    await grading.close();
    account.release();
    throw e;
  });
  const confinement = { ...agentConfinement(places, config, source), account };
  // Bound, not handed over: the sockets stay forkflush's (open to the sandbox's user).
  confinement.shared = [...(confinement.shared ?? []), grading.socketDir, ...(egress.bind ? [egress.bind] : [])];
  const removed: Cleaned = { ...NOTHING_CLEANED };
  const confinedSpawn = sessionSpawner(sandbox, confinement, [places.context, box], removed, egress.wrap);
  // A log the agent's output could not be written to for a full disk stopped it: no result of its.
  let logFull: string | null = null;
  const spawn: typeof confinedSpawn = async (file, args, options) => {
    const r = await confinedSpawn(file, args, options);
    if (r.logProblem && diskFullLine(r.logProblem)) logFull ??= r.logProblem;
    return r;
  };
  const budgetMs = unit === 'minutes' ? episode.allowance * 60_000 : Number.POSITIVE_INFINITY;
  const agentTimeoutMs = config.agent.timeout * 1000;
  const deadlineMs = Math.min(budgetMs, agentTimeoutMs);
  const chargeBase = { unit, allowance: episode.allowance, limitSeconds: deadlineMs / 1000 };
  const agentLog = episodeLogs(job.scratchDir).agent;
  let tried: Tried;
  try {
    // The agent, tried again when it fails in a way that passes (agent-tries.ts).
    tried = await runTries({
      agent: job.agent,
      session: {
        workdir: places.workspace,
        prompt: job.prompt,
        promptFile,
        contextDir: places.context,
        usageFile: join(box, 'usage.json'),
        logFile: agentLog,
        gradeCommand: grading.command,
        allowance: episode.allowance,
        unit,
        seed: episode.seed,
        episodeId: episode.id,
        deadlineMs,
        deadlineIsBudget: budgetMs <= agentTimeoutMs,
        env: egress.env,
        signal: AbortSignal.any([interrupt, stopForBudget.signal]),
        spawn,
        confined: sandbox !== null,
      },
      interrupt,
      charge: chargeBase,
      evaluations: () => grading.evaluations(),
      refused: { count: egress.refusedCount, note: egress.note },
      ...(sandbox
        ? {
            hiddenCause: (missing: string[], text: string) =>
              hiddenPathFailure(missing, text, {
                workspace: places.workspace,
                path: (agentEnv as NodeJS.ProcessEnv).PATH ?? '',
                repositories: places.private,
              }),
          }
        : {}),
      mark: (line) => appendFile(agentLog, line),
      ...(job.sleep ? { sleep: job.sleep } : {}),
    });
  } finally {
    await grading.close();
    account.release();
    await egress.close();
  }
  const outcome = tried.outcome;
  const refused = egress.note();
  // A context too large to carry on goes whole (the adapter has read what it needs of it).
  addCleaned(removed, await cleanAgentFolder(places.context, CONTEXT_MAX_BYTES));
  const chargeOf = (unchanged: boolean) =>
    chargeFor({ ...chargeBase, tries: tried.tries, evaluations: grading.evaluations(), unchanged });
  if (interrupt.aborted) {
    // What the attempt spent: measured or reported, else estimated by the time it ran (core/charge.ts).
    const partial = chargeOf(false);
    throw new InterruptedError(`episode ${episode.id} was interrupted`, partial.spent, partial.basis === 'estimated');
  }
  // Charged before the snapshot, as if the workspace changed: a full disk after this still charges it.
  charged.spent = chargeOf(false).spent;
  if (logFull) throw new Error(`the agent's log could not be written: ${logFull}`);

  // The judge: the workspace's files as forkflush's own git records them, protected paths as
  // they were at the base, graded in a fresh checkout of exactly that tree.
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
    if (interrupt.aborted || (await diskFull(e, [job.scratchDir, places.workspace]))) throw e;
    // What the agent left cannot be committed (git refuses a file): the episode keeps its base.
    unrecorded = `the workspace could not be recorded (${(e as Error).message.split('\n')[0]?.slice(0, FAILURE_QUOTE_MAX_CHARS)})`;
    return baseSnapshot(job.own, snapshotIndex, episode.base);
  });
  addCleaned(swept, snap.cleaned);
  // Left as the episode found it: a crash with nothing to show (core/stop.ts), charged nothing if quick.
  const unchanged = !unrecorded && snap.protectedChanged.length === 0 && snap.tree === start.tree;
  const charge = chargeOf(unchanged);
  charged.spent = charge.spent;
  let score: number | null = null;
  let reason: string | undefined;
  let graderSeconds = 0;
  let judged: { machineShort?: Resource; note?: string } = {};
  if (unrecorded) {
    reason = unrecorded;
  } else if (snap.protectedChanged.length > 0) {
    reason = `the agent changed protected paths: ${snap.protectedChanged.join(', ')}`;
  } else {
    // Graded again when it failed for want of a resource; a machine that ran short twice voids the round.
    const g = await gradeAsJudge(
      async () => {
        const attempt = await judge(job, snap.tree, graderEnv, swept).catch((e: unknown): JudgeGrading => {
          // The graded code left what stalled forkflush's git in the judge's checkout: no score.
          if (!(e instanceof GitStalledError) || interrupt.aborted) throw e;
          return { ...NO_GRADING, reason: `in the judge's checkout, ${e.message}` };
        });
        // A grading (or the judge's setup) the stop cut short says nothing of the agent's work.
        if (interrupt.aborted)
          throw new InterruptedError(
            `episode ${episode.id} was interrupted while judged`,
            charge.spent,
            charge.basis === 'estimated',
          );
        return attempt;
      },
      [job.scratchDir],
      job.judgeMachine,
      interrupt,
    );
    judged = g;
    // The grader's whole output (after the judge's setup's), beside the agent's log: the reason names one line of it.
    const graded = g.setupFailed ? '' : `$ ${config.grader.command}\n${g.stdout}${g.stderr}`;
    await writeFile(episodeLogs(job.scratchDir).grader, `${g.setupLog ?? ''}${graded}`);
    graderSeconds = g.seconds;
    score = g.score;
    reason = g.reason;
  }
  // What the agent and the grader said is shown in terminals and reports: no control characters.
  addCleaned(removed, swept);
  const cleaned = cleanedNote(removed);
  const note = plainText(
    [
      ...(job.notes ?? []),
      ...(start.note ? [start.note] : []),
      ...(outcome.note ? [outcome.note] : []),
      ...(refused ? [refused] : []),
      ...triesNotes(tried),
      ...(charge.note ? [charge.note] : []),
      ...(cleaned ? [cleaned] : []),
      ...(judged.note ? [judged.note] : []),
    ].join('; '),
  );
  if (reason) reason = plainText(reason);
  const partial = {
    score,
    ...(reason ? { reason } : {}),
    ...(note ? { note } : {}),
    ...(outcome.usage ? { usage: outcome.usage } : {}),
    spent: charge.spent,
    ...(charge.basis !== 'measured' ? { spentBasis: charge.basis } : {}),
    exit: outcome.exit,
    protectedChanged: snap.protectedChanged,
    agentSeconds: seconds(outcome.seconds),
    graderSeconds: seconds(graderSeconds),
    sandbox: isolation.label,
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
    ...(unchanged ? { unchanged: true as const } : {}),
    ...(judged.machineShort ? { machineShort: judged.machineShort } : {}),
  };
  return commitResult(job, snap, partial, started);
}

/**
 * Appends `job.journalSection` to the journal of the workspace and its checkout index, once (a
 * journal that holds it already is left alone): the tree the episode starts from, and a note when
 * it could not be added (the journal is protected, too large to read, or a link).
 */
async function addLosersSection(job: EpisodeJob): Promise<{ tree: string; note?: string }> {
  const { config, episode } = job;
  const baseTree = () => job.own.out(['rev-parse', `${episode.base}^{tree}`]);
  if (!job.journalSection) return { tree: await baseTree() };
  const why = (reason: string) => `the notes of the branches that lost were not added to ${config.journal}: ${reason}`;
  if (matchesAny(config.journal, [...config.grader.protected, ...(job.alsoProtected ?? [CONFIG_PATH])]))
    return { tree: await baseTree(), note: why('it is a protected path') };
  const journal = await indexedText(job.own, job.checkoutIndex, config.journal, JOURNAL_READ_MAX_BYTES);
  const size = (await lstat(join(job.places.workspace, config.journal)).catch(() => null))?.size ?? 0;
  if (journal === '' && size > 0) return { tree: await baseTree(), note: why('it is too large or not a file') };
  const text = withSection(journal, job.journalSection);
  if (text === journal) return { tree: await baseTree() };
  const tree = await writeTracked(job.own, job.places.workspace, job.checkoutIndex, config.journal, text);
  if (tree === null) return { tree: await baseTree(), note: why('a link or a file stands in its way') };
  job.log?.(`journal: the notes of the branches that lost added to ${config.journal}`);
  return { tree };
}

/**
 * Writes the journal line into the snapshot and commits it on the episode's base, with the
 * result in the trailers (sealed where there is a key).
 */
async function commitResult(
  job: EpisodeJob,
  snap: Snapshot,
  made: Omit<EpisodeResult, 'commit' | 'wallSeconds'>,
  started: number,
): Promise<EpisodeResult> {
  const { config, episode } = job;
  // What the agent wrote, as every reader gets it: the journal, the commit, the run's state.
  const partial = boundedResult(made);
  // The journal line goes into the snapshot, never through a file the agent could have linked.
  const existing = await indexedText(job.own, snap.index, config.journal, JOURNAL_READ_MAX_BYTES);
  const journal = appendToJournal(
    existing,
    journalEntry(config, job.phase, episode, { ...partial, commit: '', wallSeconds: 0 }),
  );
  const tree = await writeIndexed(job.own, snap.index, config.journal, journal);
  const details: EpisodeDetails = {
    diffStat: await diffStat(job.own, snap.index, episode.base),
    journalTail: journalTail(journal),
    ...(job.workflowRunUrl ? { workflowRunUrl: job.workflowRunUrl } : {}),
  };
  const wallSeconds = seconds((performance.now() - started) / 1000);
  let message = commitMessage(job.runId, config.budget.unit, episode, { ...partial, wallSeconds }, details);
  if (job.sealKey) message = sealMessage(job.sealKey, message, tree, episode.base);
  const commit = await commitTree(job.own, tree, episode.base, message);
  return { ...partial, commit, wallSeconds };
}

/**
 * The result of an episode whose workspace could not be prepared: the agent never ran, nothing
 * was spent, the base's files are committed as they were (with the journal line), and `reason`
 * says what failed. Its own kind (exit `setup`): never a winner, never adopted.
 */
async function setupResult(job: EpisodeJob, reason: string, started: number): Promise<EpisodeResult> {
  const snap = await baseSnapshot(job.own, join(job.scratchDir, 'snapshot.index'), job.episode.base);
  const note = job.notes && job.notes.length > 0 ? plainText(job.notes.join('; ')) : '';
  return commitResult(
    job,
    snap,
    {
      score: null,
      reason: plainText(reason),
      ...(note ? { note } : {}),
      spent: 0,
      exit: 'setup',
      protectedChanged: [],
      agentSeconds: 0,
      graderSeconds: 0,
      sandbox: job.isolation.label,
      ...(job.contextStore ? { contextStore: job.contextStore } : {}),
    },
    started,
  );
}

/**
 * Grades the snapshot: its tree checked out into a fresh folder the agent never saw (no .git, and
 * none of the stored objects in sight), the grader run there, the folder removed.
 */
async function judge(job: EpisodeJob, tree: string, env: NodeJS.ProcessEnv, swept: Cleaned): Promise<JudgeGrading> {
  const { config, places, isolation } = job;
  const dir = join(job.scratchDir, 'judge');
  const tmp = join(job.scratchDir, 'judge-tmp');
  const index = join(job.scratchDir, 'judge.index');
  const source = job.env ?? process.env;
  // A checkout that fails (a full disk) leaves no half copy behind.
  await checkoutInto(job.own, tree, dir, index).catch(async (e: unknown) => {
    await removeTree(dir).catch(() => {});
    throw e;
  });
  await removeTree(tmp);
  await mkdir(join(tmp, 'home'), { recursive: true });
  const sandbox = isolation.sandbox;
  // Everything the agent could write or read by id: its places, the objects, the shared folders.
  const agentPlaces = [
    places.workspace,
    places.context,
    places.box,
    ...places.objects,
    ...config.sandbox.write.map(expandHome),
  ];
  const judgePlaces = { objects: [], private: places.private };
  const protectedGlobs = [...config.grader.protected, ...(job.alsoProtected ?? [CONFIG_PATH])];
  const treeFiles = (await job.own.out(['ls-tree', '-r', '-z', '--name-only', tree])).split('\0').filter(Boolean);
  const protectedFiles = treeFiles.filter((f) => matchesAny(f, protectedGlobs));
  // Files in the checkout that the commit does not have, at protected paths.
  const madeAtProtectedPaths = async () =>
    (await untrackedPaths(job.own, dir, index, { folders: false })).filter((p) => matchesAny(p, protectedGlobs));
  const listSome = (paths: string[], n: number) => `${paths.slice(0, n).join(', ')}${paths.length > n ? ', ...' : ''}`;
  // The judge's own account (its setup and its grader), never the agent's: no sibling and no
  // agent counts against its limits.
  const account = sandbox?.account() ?? NO_ACCOUNT;
  try {
    // Setup again, in the judge's checkout: what the grader needs of it (node_modules, .venv) is
    // made afresh from the committed tree, never taken from the agent's workspace or a cache.
    let setupLog: string | undefined;
    if (config.setup.commands.length > 0) {
      const setupTmp = join(job.scratchDir, 'judge-setup-tmp');
      const run = await runSetup({
        config,
        dir,
        restore: { own: job.own, index },
        tmp: setupTmp,
        source,
        confine: sandbox
          ? {
              sandbox,
              confinement: { ...setupConfinement(dir, setupTmp, judgePlaces, config, source, agentPlaces), account },
            }
          : undefined,
        signal: job.signal,
      });
      addCleaned(swept, run.cleaned);
      setupLog = `${run.log}(setup in the judge's checkout: ${run.failure ?? 'done'})\n`;
      if (run.failure) {
        return { ...NO_GRADING, reason: `in the judge's checkout, ${run.failure}`, setupLog, setupFailed: true };
      }
      // Setup ran the commit's code (install scripts): what it made under a protected path (a
      // tests/conftest.py, a data file) is not the base's, and the grader must not read it; and
      // the protected files are written afresh, so that no hard link it made reaches them.
      const planted = await madeAtProtectedPaths();
      for (const p of planted) await removeTree(join(dir, p));
      if (planted.length > 0) setupLog += `(removed what setup made under protected paths: ${listSome(planted, 5)})\n`;
      await rewriteFiles(job.own, dir, index, protectedFiles);
    }
    // A home and a /tmp of the judge's own: nothing the agent left (in its home, its box, or a
    // shared sandbox.write folder) can reach the grading of its work. The protected paths are
    // read-only while the grader runs the agent's code: a solver could rewrite the checker.
    const fixed = sandbox ? judgeFixedPaths(treeFiles, protectedGlobs) : undefined;
    const grading = await runGrader(
      config,
      dir,
      { ...env, ...privateTmp(tmp, sandbox !== null), ...JUDGE_PYTHON },
      sandbox
        ? {
            sandbox,
            confinement: { ...graderConfinement(dir, tmp, judgePlaces, config, source, agentPlaces, fixed), account },
          }
        : undefined,
      job.signal,
    );
    // What the graded code left that would stall git goes before git lists the checkout.
    const left = await sweepTree(dir, job.signal);
    addCleaned(swept, left.cleaned);
    // A file at a protected path the checkout did not have was made while the grader ran the
    // agent's code (a conftest.py in a protected tests folder): what it graded was not the commit.
    // A FIFO or a socket there counts too, swept or not.
    const tracked = new Set(treeFiles);
    const sweptThere = left.paths.filter((p) => !tracked.has(p) && matchesAny(p, protectedGlobs));
    const written = [...sweptThere, ...(await madeAtProtectedPaths())];
    const result =
      written.length > 0 && grading.score !== null
        ? {
            ...grading,
            score: null,
            reason: `the graded code wrote under protected paths while the grader ran: ${listSome(written, 3)}`,
          }
        : grading;
    return { ...result, ...(setupLog !== undefined ? { setupLog } : {}) };
  } finally {
    account.release();
    // The judge's copy holds the agent's files, any names, any depth: rm -rf, and never a reason to fail.
    for (const d of [dir, tmp]) await removeTree(d).catch(() => {});
  }
}

/** A judge that graded nothing (its setup failed, or git stalled): the reason is added. */
const NO_GRADING = { score: null, seconds: 0, exitCode: null, signal: null, stdout: '', stderr: '' } as const;

/**
 * Python in the judge reads no bytecode the graded code could have written or committed (a .pyc
 * that stands in for a protected module: __pycache__ is no protected path) and no user site
 * folder in the judge's home (a usercustomize.py): its cache goes to a path that cannot exist.
 */
const JUDGE_PYTHON = {
  PYTHONPYCACHEPREFIX: '/dev/null/forkflush-no-bytecode',
  PYTHONDONTWRITEBYTECODE: '1',
  PYTHONNOUSERSITE: '1',
};

/** The journal's last entries, for the commit body. */
function journalTail(journal: string): string[] {
  return journal
    .split('\n')
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== '')
    .slice(-JOURNAL_TAIL_LINES)
    .map((l) => (l.length > JOURNAL_LINE_MAX_CHARS ? `${l.slice(0, JOURNAL_LINE_MAX_CHARS)}...` : l));
}

/** What the tries said: the failures retried, and why the retries were given up on. */
function triesNotes(t: Tried): string[] {
  const retried = t.retries.map((r) => `${r.kind} (waited ${formatNumber(r.waitedSeconds, 1)} s)`);
  return [
    ...(retried.length > 0 ? [`tried ${t.tries.length} times: ${retried.join(', ')}`] : []),
    ...(t.gaveUp && t.failure ? [`gave up on the ${t.failure.kind} failure: ${t.gaveUp}`] : []),
  ];
}

/** Seconds to the millisecond, as the commit records them. */
function seconds(s: number): number {
  return Math.round(s * 1000) / 1000;
}
