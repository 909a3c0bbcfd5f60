// `forkflush probe [DIR]`: a few single runs, to see how much their scores spread (local/probe.ts).
import { MAX_COMPARE_SEEDS } from '../core/method.js';
import { probePlan, probeText } from '../core/probe.js';
import { runProbe } from '../local/probe.js';
import type { Parsed } from './args.js';
import { compareRunOptions, finishCompare } from './compare.js';
import { argvTail, integer, positive, str } from './flags.js';
import type { Io } from './io.js';

export async function probeCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const v = p.values;
  const out = v.json ? io.stderr : io.stdout;
  const budgetEach =
    v['budget-each'] !== undefined ? positive('--budget-each', str(v['budget-each']) ?? '') : undefined;
  const probe = await runProbe({
    ...compareRunOptions(dir, p, io),
    ...(v.runs !== undefined ? { runs: integer('--runs', str(v.runs) ?? '', 2, MAX_COMPARE_SEEDS) } : {}),
    ...(budgetEach !== undefined ? { budgetEach } : {}),
    log: (line) => out.write(`${line}\n`),
  });
  const { outcome: c, analysis, planned, budgetEach: each } = probe;
  if (v['dry-run']) {
    const plan = probePlan({
      runs: c.manifest.entries.length,
      each,
      planned,
      unit: c.results.budget.unit,
      initial: c.results.initial,
    });
    out.write(
      `${c.manifest.id}: ${plan}\nthe checks passed; no agent was started. Run it: forkflush probe ${dir}${argvTail(p)}\n`,
    );
    if (v.json)
      io.stdout.write(`${JSON.stringify({ ...c.results, dryRun: true, budgetEach: each, planned }, null, 2)}\n`);
    return 0;
  }
  const json = { ...c.results, probe: analysis };
  return finishCompare(c, `${probeText(analysis)}\n`, json, dir, io, v.json === true);
}
