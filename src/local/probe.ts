// `forkflush probe`: N short independent single runs (a compare of single-run alone, in
// `.forkflush/probe-<id>/`, resumable like one), then their spread and the recommendation
// (core/probe.ts). Each run keeps the planned run's episode size, so a probe run is the start of
// a real one, not a run of many tiny episodes.

import { join } from 'node:path';
import { renderCompareReport } from '../core/compare/report.js';
import { PROBE_RUNS } from '../core/method.js';
import { analyzeProbe, type ProbeAnalysis, probeBudgetEach, probeText } from '../core/probe.js';
import { type CompareOptions, type CompareOutcome, runCompare } from './compare.js';
import { loadConfig } from './start.js';
import { writeAtomic } from './store.js';

export interface ProbeOptions
  extends Omit<CompareOptions, 'kind' | 'strategies' | 'seeds' | 'variants' | 'branches' | 'planned'> {
  runs?: number;
  budgetEach?: number;
}

export interface ProbeOutcome {
  outcome: CompareOutcome;
  analysis: ProbeAnalysis;
  planned: number;
  budgetEach: number;
}

export async function runProbe(o: ProbeOptions): Promise<ProbeOutcome> {
  const { budgetEach: asked, runs, budget, ...rest } = o;
  const { config: planned } = await loadConfig(o.dir, o.configFile, budget !== undefined ? { budget } : {});
  const budgetEach = asked ?? probeBudgetEach(planned.budget);
  const outcome = await runCompare({
    ...rest,
    kind: 'probe',
    strategies: ['single-run'],
    seeds: runs ?? PROBE_RUNS,
    variants: [{ name: 'probe', set: { 'budget.episode': Math.min(planned.budget.episode, budgetEach) } }],
    budget: budgetEach,
    planned: planned.budget.total,
  });
  // A resumed probe runs as it was planned (its flags are refused): its figures come from its manifest.
  const each = outcome.manifest.budget ?? budgetEach;
  const total = outcome.manifest.planned ?? planned.budget.total;
  const r = outcome.results;
  // Runs in which no agent did any work are left out: their initial score is no measure of the spread.
  const done = r.runs.filter((x) => x.status === 'finished' || x.status === 'stopped');
  const ended = done.length + r.runs.filter((x) => x.status === 'idle').length;
  const analysis = analyzeProbe(done, {
    direction: r.direction,
    initial: r.initial,
    dir: o.dir,
    planned: budget ?? (total !== planned.budget.total ? total : null),
    budgetEach: each,
    unit: r.budget.unit,
    ...(outcome.idle && done.length === 0 ? { idle: outcome.idle } : {}),
    ...(ended < r.runs.length ? { unfinishedOf: r.runs.length } : {}),
  });
  if (!o.dryRun) {
    const folder = outcome.folder;
    await writeAtomic(join(folder, 'results.json'), `${JSON.stringify({ ...r, probe: analysis }, null, 2)}\n`);
    const report = renderCompareReport(r, { chartFile: 'chart.svg' }).split('\n').slice(1).join('\n');
    await writeAtomic(
      join(folder, 'report.md'),
      `# forkflush probe ${r.compare}\n\n\`\`\`\n${probeText(analysis)}\n\`\`\`\n${report}`,
    );
  }
  return { outcome, analysis, planned: total, budgetEach: each };
}
