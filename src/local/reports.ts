// report.md and chart.svg in the run folder.
import { existsSync } from 'node:fs';
import { renderChartSvg } from '../core/chart.js';
import { type RunPlace, renderReport } from '../core/report.js';
import type { RunState } from '../core/state.js';
import type { RunStore } from './store.js';

const LOGS = [
  { name: 'agent log', file: 'agent.log' },
  { name: 'grader log', file: 'grader.log' },
  { name: 'setup log', file: 'setup.log' },
];

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
      // Each episode's folder holds agent.log, and grader.log when the grader ran.
      episodeLogs: (id) =>
        LOGS.filter((l) => existsSync(store.path(`episodes/${id}/${l.file}`))).map((l) => ({
          name: l.name,
          path: `episodes/${id}/${l.file}`,
        })),
    }),
  );
  return { report, chart };
}
