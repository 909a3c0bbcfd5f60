// report.md and chart.svg in the run folder.
import { existsSync } from 'node:fs';
import { renderChartSvg } from '../core/chart.js';
import { type RunPlace, renderReport } from '../core/report.js';
import type { RunState } from '../core/state.js';
import { episodeLogs } from '../worker/boundary.js';
import type { RunStore } from './store.js';

const LOG_NAMES = { agent: 'agent log', grader: 'grader log', setup: 'setup log' } as const;

export async function writeReports(
  store: RunStore,
  state: RunState,
  place?: RunPlace,
): Promise<{ report: string; chart: string }> {
  const chart = await store.write('chart.svg', renderChartSvg(state));
  const report = await store.write(
    'report.md',
    renderReport(state, {
      chartFile: 'chart.svg',
      ...(place ? { place } : {}),
      // Each episode's folder (its scratch folder) holds the logs it made: the agent's, the grader's, setup's.
      episodeLogs: (id) =>
        Object.entries(episodeLogs(`episodes/${id}`))
          .filter(([, path]) => existsSync(store.path(path)))
          .map(([log, path]) => ({ name: LOG_NAMES[log as keyof typeof LOG_NAMES], path })),
    }),
  );
  return { report, chart };
}
