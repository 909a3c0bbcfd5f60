// report.md and chart.svg in the run folder; report.md shows the run's idea map when `forkflush map`
// made one (map.json beside it).
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { renderChartSvg } from '../core/chart.js';
import { type MapRecord, parseMapRecord } from '../core/map/record.js';
import { mapSection } from '../core/map/report.js';
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
  const map = await readMap(store.dir);
  const report = await store.write(
    'report.md',
    `${renderReport(state, {
      chartFile: 'chart.svg',
      ...(place ? { place } : {}),
      // Each episode's folder (its scratch folder) holds the logs it made: the agent's, the grader's, setup's.
      episodeLogs: (id) =>
        Object.entries(episodeLogs(`episodes/${id}`))
          .filter(([, path]) => existsSync(store.path(path)))
          .map(([log, path]) => ({ name: LOG_NAMES[log as keyof typeof LOG_NAMES], path })),
    })}${map ? `\n${mapSection(map, { image: 'map.svg' })}` : ''}`,
  );
  return { report, chart };
}

/** The idea map in a run's or a compare's folder, or null: none made, or one this forkflush cannot read. */
export async function readMap(dir: string): Promise<MapRecord | null> {
  const text = await readFile(join(dir, 'map.json'), 'utf8').catch(() => null);
  if (text === null) return null;
  const map = parseMapRecord(text);
  return 'problem' in map ? null : map;
}
