// The local runner: the reconcile loop, executed with git worktrees and child processes.
// Each pass asks the core what is due, does it, and saves the state before the next pass.
import { agentFor } from '../agents/specs.js';
import { abandonedResult, chargeKilledStarts, recordStart, takeBackStart } from '../core/attempts.js';
import { recordLosers, sectionFor } from '../core/losers.js';
import { episodePrompt } from '../core/prompts.js';
import { applyInterrupted, applyResult, reconcile } from '../core/reconcile.js';
import type { Episode, EpisodeResult, Round, RunState } from '../core/state.js';
import { type RunStop, stopBefore, stopReason } from '../core/stop.js';
import { advance, carryOut, dueWork, markDone, NOTHING_DONE, type WorkDone } from '../core/work.js';
import { gitRunsFromTree } from '../io/git.js';
import { type Isolation, isolationFor } from '../worker/boundary.js';
import { runEpisode } from '../worker/episode.js';
import { DiskFullError, diskFull, InterruptedError } from '../worker/episode-errors.js';
import type { Charged, SharedMachine } from '../worker/episode-input.js';
import { SetupCache } from '../worker/setup.js';
import type { LocalForge } from './forge.js';
import type { RunEvent } from './progress.js';
import { writeReports } from './reports.js';
import { EpisodeFloor } from './shared-machine.js';
import type { RunInfo, RunStore } from './store.js';

export interface DriveOptions {
  store: RunStore;
  forge: LocalForge;
  info: RunInfo;
  /** How episodes are confined (default: from the config's sandbox mode). */
  isolation?: Isolation;
  /** Ctrl-C: running agents are stopped and the run can be resumed. */
  signal?: AbortSignal;
  onEvent?: (e: RunEvent) => void;
  /** The environment the agent's, setup's and grader's allowlists are taken from (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** The wait before an agent's retry (tests: none). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

export interface DriveResult {
  state: RunState;
  interrupted: boolean;
  /** Set when the run stopped itself: an agent that cannot work, a setup that cannot, no score (core/stop.ts). */
  stopped?: RunStop;
  /** Set with `interrupted` when the machine stopped it (a full disk): what to fix before resuming. */
  problem?: string;
}

export async function drive(initial: RunState, o: DriveOptions): Promise<DriveResult> {
  return o.store.locked(() => driveLocked(initial, o));
}

async function driveLocked(initial: RunState, options: DriveOptions): Promise<DriveResult> {
  const d = await Driver.open(initial, options);
  await d.o.forge.createLineages(d.state);
  for (;;) {
    // 1. The core's own steps, until it waits for episodes.
    await d.advanceCore();
    // 2. What is due next: a stop of the run's own, the user's stop, or a round's episodes.
    const actions = reconcile(d.state);
    const failure = stopBefore(d.state, actions[0]);
    if (failure) {
      await d.save();
      await writeReports(d.o.store, d.state);
      return { state: d.state, interrupted: false, stopped: failure };
    }
    if (d.o.signal.aborted) return { state: d.state, interrupted: true };
    const first = actions[0];
    if (first?.type !== 'run') break;
    // 3. The round's due episodes, up to the concurrency at once; then the loop asks again.
    const ids = new Set(actions.map((a) => (a.type === 'run' ? a.episode : '')));
    const ended = await d.runEpisodes(roundOf(d.state, first.round).episodes.filter((e) => ids.has(e.id)));
    if (ended) return ended;
    await d.setupCache.prune();
  }
  await writeReports(d.o.store, d.state);
  d.emit({ type: 'finished', state: d.state });
  return { state: d.state, interrupted: false };
}

/** One drive of a run: its state as it moves, its saves and its work queued one at a time. */
class Driver {
  /** The work the core's decisions call for (core/work.ts) that this process has carried out. */
  private done: WorkDone = NOTHING_DONE;
  private saving: Promise<void> = Promise.resolve();
  private working: Promise<void> = Promise.resolve();
  /** The episodes in flight on this machine: a judge that timed out beside them is graded again alone. */
  private readonly floor = new EpisodeFloor();

  private constructor(
    public state: RunState,
    readonly o: DriveOptions & { isolation: Isolation; signal: AbortSignal; alsoProtected: string[] },
    /** An agent or a setup that cannot work stops the episodes in flight too: they would fail the same way. */
    readonly halt: AbortController,
    readonly sealKey: Buffer | null,
    /** What setup made for a base, shared by that base's episodes (setup.cache): in the run folder. */
    readonly setupCache: SetupCache,
    readonly emit: (e: RunEvent) => void,
  ) {}

  static async open(initial: RunState, options: DriveOptions): Promise<Driver> {
    const halt = new AbortController();
    const o = {
      ...options,
      isolation: options.isolation ?? (await isolationFor(initial.config.sandbox.mode)),
      signal: options.signal ? AbortSignal.any([options.signal, halt.signal]) : halt.signal,
      // Protected beside grader.protected: the config, and what the user's own git runs from the tree.
      alsoProtected: [
        ...(options.info.configPathInRepo ? [options.info.configPathInRepo] : []),
        ...(await gitRunsFromTree(options.info.repo).catch(() => [])),
      ],
    };
    const sealKey = await o.store.sealKey();
    const setupCache = new SetupCache(o.store.path('setup-cache'));
    return new Driver(initial, o, halt, sealKey, setupCache, o.onEvent ?? (() => {}));
  }

  /** Saves are queued so that concurrent episodes never write the state file at once. */
  save(): Promise<void> {
    const snapshot = this.state;
    this.saving = this.saving.then(() => this.o.store.save(snapshot));
    return this.saving;
  }

  /**
   * Carries out the work that is due. What was done lives in this process only: after a restart
   * it is all carried out again, and each step is idempotent on refs.
   */
  carry(): Promise<void> {
    this.working = this.working.then(async () => {
      for (const item of dueWork(this.state, this.done)) {
        await carryOut(this.o.forge, this.state, item);
        this.done = markDone(this.done, item);
      }
    });
    return this.working;
  }

  /** The core's own steps, until it waits for episodes; a setup that cannot work stops it first. */
  async advanceCore(): Promise<void> {
    const advanced = advance(this.state, (s, next) => stopBefore(s, next) !== null);
    // With fork.losers: journal, the losers' notes of each decided round, read before their branches go.
    this.state = await recordLosers(advanced.state, (commit) =>
      this.o.forge.journalAt(commit, this.state.config.journal),
    );
    if (advanced.steps.length > 0 || this.state !== advanced.state) await this.save();
    await this.carry();
    for (const step of advanced.steps) {
      if (step.type === 'open')
        this.emit({ type: 'round', state: this.state, round: roundOf(this.state, step.round.index) });
      if (step.type === 'decide')
        this.emit({ type: 'decided', state: this.state, round: roundOf(this.state, step.round) });
    }
    if (advanced.steps.some((s) => s.type === 'decide')) await writeReports(this.o.store, this.state);
  }

  /** Runs the episodes; the drive's result when it must end here, null when the loop goes on. */
  async runEpisodes(pending: Episode[]): Promise<DriveResult | null> {
    let problem: string | undefined;
    const interrupted = await runPool(pending, this.o.info.concurrency, (e) =>
      this.runPooled(e, (p) => {
        problem ??= p;
      }),
    );
    if (problem) {
      // The disk may refuse this save too: the state on disk is then the one before, just as sound.
      await this.save().catch(() => {});
      return { state: this.state, interrupted: true, problem };
    }
    if (interrupted && this.halt.signal.aborted) return null;
    if (interrupted) {
      await this.save();
      return { state: this.state, interrupted: true };
    }
    return null;
  }

  /** One episode of the pool: false when it was interrupted (`diskFull` told what the machine refused). */
  private async runPooled(e: Episode, diskFull: (problem: string) => void): Promise<boolean> {
    if (this.halt.signal.aborted) return false;
    // Saved once setup is done, before the agent runs (runEpisode calls it): a forkflush killed
    // with the agent in flight leaves it counted, and one killed in setup spent nothing.
    let started = false;
    const starting = async () => {
      this.state = recordStart(this.state, e.id);
      started = true;
      await this.save();
    };
    // The episode ended under forkflush's eyes (a result, or a stop of its own): not a start that never ended.
    const ended = (s: RunState) => (started ? takeBackStart(s, e.id) : s);
    // Its starts that forkflush died with are charged before it runs again (the last one may have left its result).
    const recovered = await this.o.forge.recoverResult(this.state, e, this.sealKey);
    this.state = chargeKilledStarts(this.state, e.id, recovered !== null);
    const result =
      recovered ??
      (await this.floor.run(() =>
        runOne(this.state, e, this.o, this.sealKey, this.setupCache, this.emit, starting, this.floor),
      ));
    if ('interrupted' in result) {
      // Stopped by forkflush itself: the start is taken back, and the episode runs again on resume.
      this.state = ended(applyInterrupted(this.state, e.id, result.interrupted ?? 0, result.estimated));
      if (result.failure) {
        // Failed unforeseen once its agent had run: charged what it spent, then the run's end.
        await this.save().catch(() => {});
        throw result.failure;
      }
      // A full disk stops the episodes in flight too: they would fail the same way.
      if (result.problem) {
        diskFull(result.problem);
        this.halt.abort('disk');
      }
      return false;
    }
    this.state = applyResult(ended(this.state), e.id, result);
    // The best branch moves before the result is saved: the best workspace is always on a ref.
    await this.carry();
    await this.save();
    this.emit({ type: 'episode-done', state: this.state, episode: e, result });
    if (stopReason(this.state)?.code === 2) this.halt.abort('stop');
    return true;
  }
}

function roundOf(state: RunState, index: number): Round {
  return state.rounds.find((r) => r.index === index) as Round;
}

/** Runs one episode, or says what its interrupted attempt spent (it is then re-run on resume). */
async function runOne(
  state: RunState,
  e: Episode,
  o: DriveOptions & { isolation: Isolation; alsoProtected: string[] },
  sealKey: Buffer | null,
  setupCache: SetupCache,
  emit: (e: RunEvent) => void,
  starting: () => Promise<void>,
  sharedMachine: SharedMachine,
): Promise<EpisodeResult | { interrupted: number | null; estimated?: boolean; problem?: string; failure?: unknown }> {
  // An episode that killed forkflush every time it ran is given up (core/attempts.ts).
  const abandoned = abandonedResult(roundOf(state, e.round).episodes.find((x) => x.id === e.id) ?? e);
  if (abandoned) return abandoned;
  const prepared = await o.forge.prepareEpisode(state, e).catch(async (err) => {
    // Before its start is recorded: a full disk charges nothing, and the episode runs on resume.
    const full = err instanceof DiskFullError ? err.message : await diskFull(err, [o.store.path()]);
    if (full)
      return { problem: `the disk is full (${full}): ${e.id} could not be set up; free some space and resume the run` };
    throw err;
  });
  if ('problem' in prepared) return { interrupted: 0, problem: prepared.problem };
  const round = state.rounds[e.round] as Round;
  const prompt = episodePrompt(state, e, o.info.task, o.info.templates);
  const section = sectionFor(state, e);
  emit({ type: 'episode-start', state, episode: e });
  const charged: Charged = { spent: null };
  try {
    const result = await runEpisode({
      runId: state.id,
      config: state.config,
      episode: e,
      phase: round.phase,
      own: prepared.own,
      places: prepared.places,
      checkoutIndex: prepared.checkoutIndex,
      scratchDir: prepared.scratchDir,
      prompt,
      agent: agentFor(state.config),
      isolation: o.isolation,
      alsoProtected: o.alsoProtected,
      notes: prepared.notes,
      ...(section ? { journalSection: section } : {}),
      setupCache,
      sharedMachine,
      ...(sealKey ? { sealKey } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.env ? { env: o.env } : {}),
      ...(o.sleep ? { sleep: o.sleep } : {}),
      warn: (warning) => emit({ type: 'episode-warning', state, episode: e, warning }),
      agentStarting: starting,
      charged,
    }).catch((err: unknown) => {
      if (err instanceof InterruptedError || err instanceof DiskFullError || charged.spent === null) throw err;
      // A step after the agent failed unforeseen (a disk turned read-only, no file handles left):
      // the agent's spend is known, not a killed start's to estimate on resume.
      return { interrupted: charged.spent, estimated: charged.estimated ?? false, failure: err };
    });
    if ('failure' in result) return result;
    // A disk the judge found full twice stays full here: the run stops, and the episode runs again
    // on resume (on GitHub the job's machine is gone with it, and its round is void instead).
    if (result.machineShort === 'disk')
      return {
        interrupted: result.spent,
        estimated: result.spentBasis === 'estimated',
        problem: `the disk is full (the judge ran out of it grading ${e.id}, twice): ${e.id} was not recorded; free some space and resume the run`,
      };
    await o.forge.recordResult(prepared, result.commit, `forkflush: ${e.id} done`);
    return result;
  } catch (err) {
    if (err instanceof InterruptedError) return { interrupted: err.spent, estimated: err.estimated };
    if (err instanceof DiskFullError) return { interrupted: err.spent, problem: err.message };
    throw err;
  }
}

/**
 * Runs tasks with at most `limit` at once. Returns true when a task reported an interruption
 * (returned false); the others still finish or stop on the shared signal.
 */
async function runPool<T>(items: T[], limit: number, task: (item: T) => Promise<boolean>): Promise<boolean> {
  let next = 0;
  let interrupted = false;
  const workers = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length && !interrupted) {
      const item = items[next++] as T;
      if (!(await task(item))) interrupted = true;
    }
  });
  const results = await Promise.allSettled(workers);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return interrupted;
}
