// `forkflush plan [DIR] [--json]`: the phases a run's budget buys, with the notes a run would print.
import { plan, planTable, planWarnings } from '../core/plan.js';
import { loadConfig } from '../local/start.js';
import type { Parsed } from './args.js';
import { readOverrides, str } from './flags.js';
import type { Io } from './io.js';

export async function planCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const v = p.values;
  const { config } = await loadConfig(dir, str(v.config), readOverrides(v));
  if (v.json) {
    const json = {
      strategy: config.strategy,
      budget: config.budget,
      branches: config.fork.branches,
      phases: plan(config),
      warnings: planWarnings(config),
    };
    io.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  } else {
    // The notes a run would print before it starts, on the plan they are about.
    for (const w of planWarnings(config)) io.stderr.write(`forkflush: note: ${w}\n`);
    io.stdout.write(`${planTable(config)}\n`);
  }
  return 0;
}
