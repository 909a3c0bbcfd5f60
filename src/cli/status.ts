// `forkflush status [DIR] [--run ID] [--json]`: where a run is, who drives it, how to continue it.
import { LEADERBOARD_HEADER, leaderboardRows, statusJson, summary } from '../core/report.js';
import { outageStop, retryStopped, runStop } from '../core/stop.js';
import { textTable } from '../core/text.js';
import { openRun } from '../local/start.js';
import type { Parsed } from './args.js';
import { str } from './flags.js';
import type { Io } from './io.js';

export async function statusCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const open = await openRun(dir, str(p.values.run));
  const { state } = open;
  const pid = state.status === 'finished' ? null : await open.store.driver();
  // A run its setup stopped is resumed only where a resume runs the round again (retryStopped).
  const stop = pid === null ? runStop(state) : null;
  const resumable = state.status !== 'finished' && pid === null && (!stop || retryStopped(state) !== null);
  const resume = resumable ? `forkflush resume ${dir} --run ${state.id}` : null;
  if (p.values.json) {
    const json = statusJson(state, { folder: open.store.dir, live: pid ? { pid } : null, resume });
    io.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
    return 0;
  }
  // A live process with its run stopped by an outage is waiting it out, then goes on by itself (cli/drive.ts).
  const waiting = pid && outageStop(state) ? ", waiting out its provider's outage to try again" : '';
  const where =
    state.status === 'finished'
      ? ''
      : pid
        ? `, running in process ${pid}${waiting}`
        : stop
          ? ', stopped'
          : ', interrupted';
  io.stdout.write(`run ${state.id} (${open.store.dir})${where}\n${summary(state)}\n`);
  const current = state.rounds.find((r) => !r.decision);
  if (current) {
    const left = current.episodes.filter((e) => !e.result).map((e) => e.id);
    io.stdout.write(
      `open round ${current.index} (${current.phase}): waiting for ${left.join(', ') || 'the decision'}\n`,
    );
  }
  if (resume)
    io.stdout.write(
      stop ? `after the fix, continue it with ${resume}\n` : `nothing is driving it: continue it with ${resume}\n`,
    );
  io.stdout.write(`\n${textTable(LEADERBOARD_HEADER, leaderboardRows(state, 10))}\n`);
  return 0;
}
