// Driving a local run to its end (run and resume): the progress view, then what stopped it or its
// result (the leaderboard, the lineage, the reports), as lines for the user and an exit code.

import { existsSync } from 'node:fs';
import { endWarnings, nothingDone } from '../core/end-warnings.js';
import { UserError } from '../core/errors.js';
import { AUTOMATION, matchesAny } from '../core/globs.js';
import { OUTAGE_WAIT_MINUTES } from '../core/method.js';
import { bestBranch, lineageBranch } from '../core/names.js';
import { RecordError } from '../core/records.js';
import { LEADERBOARD_HEADER, leaderboardRows, summary, takeHomeLines } from '../core/report.js';
import type { RunState } from '../core/state.js';
import { outageStop, retryStopped } from '../core/stop.js';
import { shownName, textTable } from '../core/text.js';
import { Git, gitRunsFromTree } from '../io/git.js';
import { progressView, type RunEvent } from '../local/progress.js';
import { writeReports } from '../local/reports.js';
import { drive } from '../local/runner.js';
import { type OpenRun, retryStop } from '../local/start.js';
import { abortableSleep } from '../worker/agent-tries.js';
import { diskFull } from '../worker/episode-errors.js';
import type { Io } from './io.js';

export function sandboxLine(open: OpenRun): string {
  return open.isolation.sandbox
    ? `${open.isolation.label}: the agent and the grader are confined (workspace, context and box writable; home, repository and run folders hidden)`
    : `OFF, ${open.isolation.label.replace(/^off /, '')}: agents run with your user's rights`;
}

/**
 * Drives the open run until it finishes, stops or is interrupted; its exit code. Under the run's
 * lock throughout, its reports too: across the outage waits (each drive inside takes it again), and
 * until the last report is written, so that no resume starts from a state this process still moves.
 */
export async function driveRun(open: OpenRun, io: Io): Promise<number> {
  return open.store.locked(() => driveLocked(open, io));
}

async function driveLocked(open: OpenRun, io: Io): Promise<number> {
  let view: ReturnType<typeof progressView> | undefined;
  let result: Awaited<ReturnType<typeof drive>>;
  try {
    // The monotonic clock: a wall clock set back (NTP after a laptop wakes) would count backwards.
    const start = performance.now();
    const shown = progressView(io.stdout, start, () => performance.now(), io.env ?? process.env);
    view = shown;
    result = await driveThroughOutages(open, io, (e) => shown.onEvent(e));
  } catch (e) {
    // What failed unforeseen is the run's end for now, not its loss: every finished episode is saved.
    const continueWith = `forkflush resume ${open.info.taskDir} --run ${open.state.id}`;
    if (await saidDiskFull(e, open, io)) return 1;
    // Its folder moved or deleted under it: what failed is only a symptom (git in a folder that is gone).
    if (!existsSync(open.store.dir)) {
      io.stderr.write(
        `\nforkflush: ${open.store.dir} is gone: the repository was moved or deleted while the run went on. ` +
          `Move it back to ${open.info.taskDir}, then: ${continueWith}\n`,
      );
      return 1;
    }
    if (e instanceof Error && !(e instanceof UserError || e instanceof RecordError))
      e.message += `\nthe run is saved: after the fix, continue it with ${continueWith}`;
    throw e;
  } finally {
    view?.close();
  }
  open.state = result.state;
  if (result.stopped) {
    await writeReports(open.store, result.state, placeOf(open));
    // One line: what happened, the agent's own words, what to do, and the command that continues.
    const resume = retryStopped(result.state)
      ? `; after the fix: forkflush resume ${open.info.taskDir} --run ${result.state.id}`
      : '';
    io.stderr.write(`\nforkflush: ${result.stopped.message}${resume}\n`);
    io.stdout.write(`report: ${open.store.path('report.md')}\n`);
    return result.stopped.code;
  }
  if (result.problem) {
    // No reports: the disk that is full would refuse them.
    io.stderr.write(
      `\nforkflush: ${result.problem}\nthen: forkflush resume ${open.info.taskDir} --run ${result.state.id}\n`,
    );
    return 1;
  }
  if (result.interrupted) {
    await writeReports(open.store, result.state, placeOf(open));
    io.stdout.write(
      `\ninterrupted: finished episodes are saved. Continue with: forkflush resume ${open.info.taskDir} --run ${result.state.id}\n`,
    );
    return 130;
  }
  return printResult(open, io);
}

/** Whether `e` is a full disk under the run folder; if so it is said, with the command that goes on once there is room. */
export async function saidDiskFull(e: unknown, open: OpenRun, io: Io): Promise<boolean> {
  const full = await diskFull(e, [open.store.path()]);
  if (full)
    io.stderr.write(
      `\nforkflush: the disk is full (${full}): free some space\nthen: forkflush resume ${open.info.taskDir} --run ${open.state.id}\n`,
    );
  return full !== null;
}

/** Drives the run, and again after each outage wait: a provider's outage at night is waited out, a few times, before the run ends. */
async function driveThroughOutages(open: OpenRun, io: Io, onEvent: (e: RunEvent) => void) {
  const once = () =>
    drive(open.state, {
      store: open.store,
      forge: open.forge,
      info: open.info,
      isolation: open.isolation,
      onEvent,
      ...(io.signal ? { signal: io.signal } : {}),
      ...(io.env ? { env: io.env } : {}),
      ...(io.sleep ? { sleep: io.sleep } : {}),
    });
  let result = await once();
  for (const minutes of OUTAGE_WAIT_MINUTES) {
    if (!result.stopped || !outageStop(result.state) || io.signal?.aborted) break;
    open.state = result.state;
    io.stderr.write(
      `\nforkflush: ${result.stopped.message}\nforkflush: waiting ${minutes} min, then trying again by itself (Ctrl-C to stop now)\n`,
    );
    await (io.sleep ?? abortableSleep)(minutes * 60_000, io.signal ?? new AbortController().signal);
    if (io.signal?.aborted) break;
    // The run as saved: the stopped episodes reopened, or (where it moved on meanwhile) as it is now.
    await retryStop(open);
    result = await once();
  }
  return result;
}

/** Files that run without anyone asking (CI of any forge, git hooks and their managers, submodules, git attributes) the best branch changes. */
async function automationChanged(repo: string, state: RunState): Promise<string[]> {
  const runs = await gitRunsFromTree(repo).catch(() => []);
  const r = await new Git(repo).exec(
    ['diff', '--name-only', '-z', state.base.commit, `refs/heads/${bestBranch(state.id)}`],
    {
      check: false,
    },
  );
  if (r.exitCode !== 0) return [];
  const globs = [...AUTOMATION, ...runs];
  return r.stdout.split('\0').filter((p) => p !== '' && matchesAny(p, globs));
}

const placeOf = (open: OpenRun) => ({ repo: open.info.repo, taskDir: open.info.taskDir, scratch: open.info.scratch });

export async function printResult(open: OpenRun, io: Io): Promise<number> {
  const state: RunState = open.state;
  const { report, chart } = await writeReports(open.store, state, placeOf(open));
  io.stdout.write(`\n${textTable(LEADERBOARD_HEADER, leaderboardRows(state, 10))}\n\n${summary(state)}\n`);
  const where = open.info.scratch ? ` (in ${open.info.repo})` : '';
  io.stdout.write(
    `lineage: ${lineageBranch(state.id, 0, state.lineages.length)}${where}\n` +
      `report:  ${report}\nchart:   ${chart}\n`,
  );
  const home = takeHomeLines(state, placeOf(open));
  if (home.length > 0) io.stdout.write(`\n${home.join('\n')}\n`);
  const automation = home.length > 0 ? await automationChanged(open.info.repo, state) : [];
  if (automation.length > 0)
    io.stderr.write(
      `forkflush: warning: the best workspace changes what runs by itself once merged and pushed (CI, git): ${automation.slice(0, 20).map(shownName).join(', ')}` +
        `${automation.length > 20 ? ` and ${automation.length - 20} more` : ''}; the agent wrote them: read them before you merge\n`,
    );
  for (const warning of endWarnings(state)) io.stderr.write(`forkflush: warning: ${warning}\n`);
  const nothing = nothingDone(state);
  if (nothing) {
    io.stderr.write(
      `forkflush: ${nothing}: see the reasons in the report, and the agents' and graders' logs in episodes/ of the run folder\n`,
    );
    return 1;
  }
  return 0;
}
