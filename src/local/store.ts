// Where a local run lives: `<task folder>/.forkflush/<run id>/`. The core's state is one JSON
// file, written atomically after every step, so a crash loses at most the step in flight; the
// episode commits themselves hold their results, so even that step is recovered from git.
import { chmod, link, mkdir, open, readdir, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { UserError } from '../core/errors.js';
import { RUNS_FOLDER } from '../core/names.js';
import {
  LOCAL_RUN_RECORD,
  type LocalRunInfo,
  parseLocalRun,
  parseRunState,
  RecordError,
  recordText,
  STATE_RECORD,
} from '../core/records.js';
import type { RunState } from '../core/state.js';
import { isAlive, startTime, stillRuns } from '../io/process-tree.js';
import { newSealKey } from '../worker/seal.js';

/** Outside every sandbox, like the rest of the run folder. */
const SEAL_KEY = 'seal.key';

/** Facts about a local run that the core does not need: its run.json (the schema is in core/records.ts). */
export type RunInfo = LocalRunInfo;

export class RunStore {
  constructor(readonly dir: string) {}

  static runsDir(taskDir: string): string {
    return join(taskDir, RUNS_FOLDER);
  }

  static forRun(taskDir: string, id: string): RunStore {
    return new RunStore(join(RunStore.runsDir(taskDir), id));
  }

  /** The ids of the runs in a task folder, oldest first. */
  static async list(taskDir: string): Promise<string[]> {
    const entries = await readdir(RunStore.runsDir(taskDir), { withFileTypes: true }).catch(() => []);
    const ids: string[] = [];
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const has = await readFile(join(RunStore.runsDir(taskDir), e.name, 'state.json'), 'utf8').then(
        () => true,
        () => false,
      );
      if (has) ids.push(e.name);
    }
    return ids.sort();
  }

  path(...parts: string[]): string {
    return join(this.dir, ...parts);
  }

  /** The agent's checkout: a plain folder with a .git of its own (not a git worktree). */
  workspace(episode: string): string {
    return this.path('workspaces', episode);
  }

  context(episode: string): string {
    return this.path('contexts', episode);
  }

  scratch(episode: string): string {
    return this.path('episodes', episode);
  }

  async init(info: RunInfo): Promise<void> {
    // forkflush's alone: under root the sandbox runs as nobody, and no other nobody process may
    // look into the workspaces, contexts and boxes it hands over to it.
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700);
    const keyFile = this.path(SEAL_KEY);
    await writeDurably(keyFile, newSealKey(), { mode: 0o600, flag: 'wx' }).catch(async (e) => {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return;
      // Not left part-written (a full disk): a damaged key stops every later resume.
      await rm(keyFile, { force: true });
      throw e;
    });
    await writeAtomic(this.path('run.json'), recordText(LOCAL_RUN_RECORD, info, 2));
  }

  /**
   * The key that seals this run's result commits; null for a run made before seals. A damaged one
   * (a power cut) is a RecordError: results sealed without it could never be recovered after a crash.
   */
  async sealKey(): Promise<Buffer | null> {
    const file = this.path(SEAL_KEY);
    const key = await readFile(file).catch((e) => {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    });
    if (key === null || key.length === 32) return key;
    throw new RecordError(
      `${file}: ${key.length} bytes where the run's key has 32: the file is damaged, and results sealed with it cannot be checked; start a new run`,
    );
  }

  /** The run's run.json, checked: a RecordError names the file and the field when it is not right. */
  async info(): Promise<RunInfo> {
    const file = this.path('run.json');
    return parseLocalRun(await readRecordFile(file), file);
  }

  /** The run's state.json, checked like run.json. */
  async load(): Promise<RunState> {
    const file = this.path('state.json');
    return parseRunState(await readRecordFile(file), file);
  }

  async save(state: RunState): Promise<void> {
    await writeAtomic(this.path('state.json'), recordText(STATE_RECORD, state, 1));
  }

  /**
   * Takes the run for this process: two processes driving one run would reset each other's
   * worktrees. A lock left by a process that is gone is taken over. Returns the release. This
   * process may take it again while it holds it (a drive inside `driveRun`'s hold across an
   * outage wait): the file goes with the last release.
   */
  async lock(): Promise<() => Promise<void>> {
    const file = this.path('lock');
    const holds = heldLocks.get(file) ?? 0;
    if (holds > 0) {
      heldLocks.set(file, holds + 1);
      return once(async () => this.release(file));
    }
    // The pid and its start time (after a crash or a reboot another process may have the pid),
    // written whole before the lock file is made from it in one step (a link): a process that
    // finds the lock never reads it half-written, taking it for one whose holder is gone.
    const mine = `${file}.${process.pid}`;
    await writeFile(mine, `${process.pid} ${startTime(process.pid) ?? ''}`.trim());
    try {
      for (let attempt = 0; attempt < 50; attempt++) {
        if (await linked(mine, file)) {
          heldLocks.set(file, 1);
          return once(async () => this.release(file));
        }
        const seen = await readFile(file, 'utf8').catch(() => null);
        if (seen === null) continue;
        const pid = holder(seen);
        if (pid && pid !== process.pid) {
          throw new UserError(
            `run ${this.dir} is being driven by process ${pid}: stop it first, or wait for it to end`,
          );
        }
        await removeStale(file, seen, mine);
      }
    } finally {
      await unlink(mine).catch(() => {});
    }
    throw new UserError(`could not take the lock ${file}`);
  }

  /** `fn` under the run's lock (lock), released however it ends. */
  async locked<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.lock();
    try {
      return await fn();
    } finally {
      await release();
    }
  }

  private async release(file: string): Promise<void> {
    const holds = (heldLocks.get(file) ?? 1) - 1;
    if (holds > 0) return void heldLocks.set(file, holds);
    heldLocks.delete(file);
    await unlink(file).catch(() => {});
  }

  /** The live process driving the run (the pid in its lock), or null: no one, or a process that is gone. */
  async driver(): Promise<number | null> {
    return holder(await readFile(this.path('lock'), 'utf8').catch(() => ''));
  }

  async write(name: string, content: string): Promise<string> {
    const file = this.path(name);
    await writeAtomic(file, content);
    return file;
  }
}

/** The run locks this process holds, by file, and how many times each is taken. */
const heldLocks = new Map<string, number>();

/** Whether `to` was made as a link of `from`; false when it is there already. */
async function linked(from: string, to: string): Promise<boolean> {
  try {
    await link(from, to);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
}

/**
 * Removes a lock whose holder is gone (its text `seen`), if it is still that one. One process at a
 * time (`<lock>.break`, made from `mine`): two that found it stale at once, the one removing it
 * after the other took the lock, would both hold the run. A guard whose maker is gone is removed.
 */
async function removeStale(file: string, seen: string, mine: string): Promise<void> {
  const guard = `${file}.break`;
  if (!(await linked(mine, guard))) {
    if (holder(await readFile(guard, 'utf8').catch(() => '')) === null) await unlink(guard).catch(() => {});
    else await new Promise((r) => setTimeout(r, 20));
    return;
  }
  try {
    if ((await readFile(file, 'utf8').catch(() => null)) === seen) await unlink(file).catch(() => {});
  } finally {
    await unlink(guard).catch(() => {});
  }
}

/** `f` that runs its first call only: a release called twice releases once. */
function once(f: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | null = null;
  return () => (done ??= f());
}

/** The live process a lock names (`pid start`, or a pid alone as older locks have it), or null. */
function holder(lock: string): number | null {
  const [pid, start] = lock.trim().split(' ');
  const n = Number(pid);
  if (!Number.isInteger(n) || n <= 0) return null;
  return (start ? stillRuns(n, start) : isAlive(n)) ? n : null;
}

/** A record file's text; one that is not there is a RecordError, like one that is not right. */
async function readRecordFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    throw new RecordError(`${file}: missing: the run folder is not a whole forkflush run`);
  }
}

let tmpCount = 0;

/**
 * Writes a file whole or not at all: a crash leaves the old one (a rename replaces it at once).
 * Each write has a temp file of its own: two at once (a compare's runs finishing together) must
 * not rename one temp file twice.
 */
export async function writeAtomic(file: string, content: string): Promise<void> {
  const tmp = `${file}.${process.pid}.${++tmpCount}.tmp`;
  // On the disk before the rename: after a power cut the file is the old one or the new one, never
  // an empty one (which some filesystems leave of a rename whose data was not yet written). A write
  // refused (a full disk) takes its part-written temp file with it: it held the space the next needs.
  try {
    await writeDurably(tmp, content, { flag: 'w' });
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

/** Writes a file and syncs it to the disk before it returns. */
async function writeDurably(file: string, content: string | Buffer, how: { flag: string; mode?: number }) {
  const handle = await open(file, how.flag, how.mode);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
}
