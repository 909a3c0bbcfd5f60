// forkflush compare and probe with each real agent kind: whole runs of the real CLIs (aider: the
// fake, see contract/aider.ts) against the scripted model server, in forkflush's sandbox, with
// tiny budgets. The model writes the same value every time, so every run scores the same: the
// compare's runs are all at equal spend, and the probe finds that the runs agree.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { cliWith } from '../integration/cli-io.js';
import { KINDS, withTask } from './real-runs.js';

// The kinds side by side: each has its own mock model and task, and the time is mostly the CLIs'.
describe('compare and probe with the real agent CLIs', () => {
  it.for(KINDS.map((k) => [k.h.kind, k] as const))(
    '%s: compares fork-and-flush with single-run at equal spend, then probes: the runs agree',
    { concurrent: true, timeout: 900_000 },
    async ([, k], { expect }) =>
      withTask(
        k,
        'compare',
        // Four episodes' worth: K = 2 branches of one episode each in two fork rounds (the opening, at 0.5).
        (episode) => [
          `budget: {total: ${4 * episode}, unit: tokens, episode: ${episode}}`,
          'fork: {branches: 2, at: [0.5], branch_budget: 0.25}',
        ],
        async (dir, env) => {
          const compare = ['--strategies', 'fork-and-flush,single-run', '--seeds', '1', '--branches', '2'];
          const r = await cliWith(['compare', dir, ...compare, '--concurrency', '3', '--seed', '1', '--json'], { env });
          expect(r.code, `${r.err}`).toBe(0);
          const results = JSON.parse(r.out);
          expect(results.runs).toHaveLength(2);
          for (const run of results.runs) {
            expect(run, JSON.stringify(run)).toMatchObject({ status: 'finished', best: 7, spendOk: true });
            expect(run.episodes).toBeGreaterThanOrEqual(3);
          }
          expect(results.summary.map((s: { strategy: string; mean: number }) => [s.strategy, s.mean])).toEqual([
            ['fork-and-flush', 7],
            ['single-run', 7],
          ]);
          expect(results.comparisons[0].paired).toMatchObject({ pairs: 1, ties: 1 });
          const folder = readdirSync(join(dir, '.forkflush')).find((n) => n.startsWith('compare-')) as string;
          const report = readFileSync(join(dir, '.forkflush', folder, 'report.md'), 'utf8');
          expect(report).toContain('Every run spent its budget');

          const p = await cliWith(['probe', dir, '--runs', '2', '--seed', '1', '--concurrency', '2', '--json'], {
            env,
          });
          expect(p.code, p.err).toBe(0);
          const out = JSON.parse(p.out);
          expect(out.runs.map((x: { best: number }) => x.best)).toEqual([7, 7]);
          expect(out.probe).toMatchObject({ improved: 2, range: 0, recommendation: 'little to gain' });
          expect(out.probe.next).toBe(`forkflush run ${dir} --strategy single-run`);
        },
      ),
  );
});
