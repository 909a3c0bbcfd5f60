// report.md and chart.svg in the run folder.
import { renderChartSvg } from '../core/chart.js';
import { renderReport } from '../core/report.js';
import type { RunState } from '../core/state.js';
import type { RunStore } from './store.js';

export async function writeReports(store: RunStore, state: RunState): Promise<{ report: string; chart: string }> {
  const chart = await store.write('chart.svg', renderChartSvg(state));
  const report = await store.write('report.md', renderReport(state, 'chart.svg'));
  return { report, chart };
}
