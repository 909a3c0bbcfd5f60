// `forkflush run [DIR]`: starts a run (or checks one, --dry-run) and drives it to its end.
import { UserError } from '../core/errors.js';
import { judgeHint } from '../core/judge-hints.js';
import { planTable, widthText } from '../core/plan.js';
import { startRun } from '../local/start.js';
import type { Parsed } from './args.js';
import { driveRun, sandboxLine } from './drive.js';
import { argvTail, integer, readOverrides, str } from './flags.js';
import type { Io } from './io.js';
import { smoke } from './smoke.js';

export async function runCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const v = p.values;
  // --dry-run promises that no agent starts; --smoke starts one.
  if (v.smoke === true && v['dry-run'] === true)
    throw new UserError('--dry-run starts no agent and --smoke starts one: give one of them');
  if (v.smoke === true) return smoke({ dir, configFile: str(v.config), overrides: readOverrides(v) }, io);
  const dryRun = v['dry-run'] === true;
  const open = await startRun({
    dir,
    ...(v.config ? { configFile: str(v.config) } : {}),
    overrides: readOverrides(v),
    ...(v.seed !== undefined ? { seed: integer('--seed', str(v.seed) ?? '', 0) } : {}),
    ...(v.concurrency !== undefined ? { concurrency: integer('--concurrency', str(v.concurrency) ?? '', 1) } : {}),
    keepRejected: v['keep-rejected'] === true,
    now: io.now(),
    dryRun,
    ...(io.env ? { env: io.env } : {}),
  });
  for (const w of open.warnings) io.stderr.write(`forkflush: note: ${w}\n`);
  const s = open.state;
  const c = s.config;
  io.stdout.write(
    `forkflush ${dryRun ? 'dry run' : `run ${s.id}`}: ${c.strategy}, budget ${c.budget.total} ${c.budget.unit}${widthText(c)}, seed ${s.seed}\n` +
      `sandbox: ${sandboxLine(open)}\n` +
      `initial workspace: ${s.base.score === null ? `no score (${s.base.reason})` : `score ${s.base.score}`}\n`,
  );
  if (dryRun) {
    // Graded as committed, like the working tree with its uncommitted files (start.ts): no score in both.
    const unscored =
      s.base.score === null
        ? 'note: the initial workspace has no score, as committed and as it is: fine for a task that starts from nothing; ' +
          `otherwise fix the grader first${judgeHint([s.base.reason ?? ''])} (the run stops after its opening round if no episode gets a score either)\n`
        : '';
    io.stdout.write(
      `\n${planTable(c)}\n\n${unscored}the checks passed; no agent was started. Run it: forkflush run ${dir}${argvTail(p)}\n`,
    );
    return 0;
  }
  return driveRun(open, io);
}
