// `forkflush resume [DIR] [--run ID]`: continues an interrupted or stopped run where it was saved.
import { stat } from 'node:fs/promises';
import { UserError } from '../core/errors.js';
import { bestBranch } from '../core/names.js';
import { setupFailed } from '../core/state.js';
import { retryStopped, runStop } from '../core/stop.js';
import { type OpenRun, openRun, retryStop } from '../local/start.js';
import type { Parsed } from './args.js';
import { driveRun, printResult, saidDiskFull, sandboxLine } from './drive.js';
import { str } from './flags.js';
import type { Io } from './io.js';

export async function resumeCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const open = await openRun(dir, str(p.values.run));
  // Its worktrees, branches and records name the folder it was made in: a run cannot move with it.
  const made = open.info.taskDir;
  if (!(await stat(made).catch(() => null)))
    throw new UserError(
      `run ${open.state.id} was made in ${made}, which is gone (the folder moved?): a run cannot go on from another folder; ` +
        `move the folder back to go on with it, or start a new run here: forkflush run ${dir}`,
    );
  const driver = await open.store.driver();
  if (driver !== null)
    throw new UserError(
      `run ${open.state.id} is being driven by process ${driver}: stop it first, or wait for it to end`,
    );
  // The run's lock from here to the end, and the state read again under it: a run that finished or
  // was interrupted between the first read and now was resumed from the stale one (a finished run's
  // rounds settled again, an interrupted episode counted as killed and charged its whole allowance).
  let release: () => Promise<void>;
  try {
    release = await open.store.lock();
  } catch (e) {
    // The lock is the first file a resume writes: a disk that filled since the run stopped says so here.
    if (await saidDiskFull(e, open, io)) return 1;
    throw e;
  }
  try {
    open.state = await open.store.load();
    return await resumeLocked(open, io);
  } finally {
    await release();
  }
}

async function resumeLocked(open: OpenRun, io: Io): Promise<number> {
  if (open.state.status === 'finished') {
    io.stdout.write(`run ${open.state.id} is already finished.\n`);
    // The best branch as the state has it, before the result names it: a power cut can leave git's
    // loose ref empty, and the take-home command would then fail (git will not overwrite it either).
    const best = open.state.best;
    const broken = best ? await open.forge.moveBest(open.state, best.commit).catch((e: Error) => e) : undefined;
    if (best && broken) {
      const ref = `refs/heads/${bestBranch(open.state.id)}`;
      io.stderr.write(
        `forkflush: the best branch ${bestBranch(open.state.id)} cannot be set to the best workspace, ${best.commit} ` +
          `(${broken.message.split('\n').find((l) => l.startsWith('fatal:')) ?? broken.message.split('\n')[0]}).\n` +
          `Take it home by its commit (git merge --no-overwrite-ignore ${best.commit}), or remove the broken ref's file ` +
          `(rm "$(git rev-parse --git-path ${ref})") and resume again to restore the branch.\n`,
      );
      return 1;
    }
    return printResult(open, io);
  }
  const stop = runStop(open.state);
  if (stop && !retryStopped(open.state)) {
    // Nothing a resume could do: the run keeps its config, and the stop says what needs a new run.
    io.stderr.write(`forkflush: run ${open.state.id} stopped: ${stop.message}\n`);
    return stop.code;
  }
  for (const w of open.warnings) io.stderr.write(`forkflush: note: ${w}\n`);
  io.stdout.write(`forkflush: resuming run ${open.state.id}\nsandbox: ${sandboxLine(open)}\n`);
  const stopping = retryStopped(open.state)?.episodes ?? [];
  const again = await retryStop(open);
  if (again !== null)
    io.stdout.write(
      stopping.every(setupFailed)
        ? `round ${again}: every branch's setup failed last time; running it again\n`
        : `round ${again}: ${stopping.map((e) => e.id).join(', ')} stopped the run last time; running ${stopping.length === 1 ? 'it' : 'them'} again\n`,
    );
  return driveRun(open, io);
}
