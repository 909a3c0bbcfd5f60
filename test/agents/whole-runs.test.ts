// Whole runs with each real agent kind (aider: the fake, see contract/aider.ts) against the scripted
// model server, in forkflush's sandbox, with tiny budgets. Per kind, what is the kind's own in a
// whole run: a fork-and-flush run whose branches resume copies of the CLI's real session, then the
// map of that run with the kind as its judge (its specs and triplet answers are the CLI's final
// messages). Not aider as a judge: it writes its repository map's cache into the folder it reads,
// and the judge's is read-only (README, "Idea maps"). compare and probe drive ordinary runs, the
// same whatever the kind: they run once here, with one kind's real CLI (the main suite runs them
// with command agents). The model writes the same value every time, so every run scores the same.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { cliWith } from '../integration/cli-io.js';
import { KINDS, withTask } from './real-runs.js';

/** What the model says as the judge: a spec's text, and "b" as the last line of every triplet answer. */
const SAID = 'Both solutions write the number 7 into value.txt and do nothing else.\nb';

const json = (file: string) => JSON.parse(readFileSync(file, 'utf8'));

// The kinds side by side (two at a time): each has its own mock model and task, and the time is mostly the CLIs'.
describe('whole runs with the real agent CLIs', () => {
  it.for(KINDS.map((k) => [k.h.kind, k] as const))(
    '%s: a fork-and-flush run to the end, then its map with the kind as the judge',
    { concurrent: true, timeout: 900_000 },
    async ([kind, k], { expect }) =>
      withTask(
        k,
        'runs',
        // Four episodes' worth: the opening (half), then K = 2 branches of one episode each.
        (episode) => [
          `budget: {total: ${4 * episode}, unit: tokens, episode: ${episode}}`,
          'fork: {branches: 2, at: [0.5], branch_budget: 0.25}',
          // The judge is the task's agent; a few questions, and a budget with room for them.
          `map: {triplets: 10, budget: ${100 * episode}}`,
        ],
        async (dir, env) => {
          const run = await cliWith(['run', dir], { env });
          expect(run.code, run.err).toBe(0);
          const status = JSON.parse((await cliWith(['status', dir, '--json'], { env })).out);
          expect(status, JSON.stringify(status)).toMatchObject({ status: 'finished', best: { score: 7 } });
          // Its budget spent, within one episode's allowance (as compare's "spent its budget" checks).
          expect(Math.abs(status.budget.spent - status.budget.total)).toBeLessThanOrEqual(status.budget.total / 4);
          // The fork round ran its two branches, each from the opening's session (a carried copy).
          const state = json(join(status.folder, 'state.json'));
          const fork = state.rounds.find((r: { episodes: unknown[] }) => r.episodes.length === 2);
          expect(fork, JSON.stringify(state.rounds)).toBeDefined();
          for (const e of fork.episodes) expect(e.result?.score, JSON.stringify(e)).toBe(7);
          // No episode asked for a host its kind's sandbox refuses (spec egress.hosts).
          for (const e of state.rounds.flatMap((r: { episodes: { result?: { note?: string } }[] }) => r.episodes))
            expect(e.result?.note ?? '').not.toContain('the agent was refused');
          if (kind === 'aider') return;

          k.h.model.answer(SAID);
          const before = k.h.model.calls().length;
          const r = await cliWith(['map', dir, '--json'], { env });
          expect(r.code, r.err).toBe(0);
          const map = JSON.parse(r.out);
          expect(map.points.length).toBeGreaterThanOrEqual(3);
          expect(map.calls.spec).toEqual({ made: map.points.length, cached: 0, failed: 0 });
          expect(map.judgments).toBe(10);
          for (const t of map.triplets) expect(t.answer).toBe('b');
          expect(map.judge.kind).toBe(kind);
          // The prompts the model got: a spec's and a triplet's, with the specs it wrote quoted.
          const prompts = k.h.model
            .calls()
            .slice(before)
            .flatMap((c) => c.prompts);
          expect(prompts.some((p) => p.includes('Write a functional specification of the solution'))).toBe(true);
          expect(prompts.some((p) => p.includes('Which of A and B takes an approach closer') && p.includes(SAID))).toBe(
            true,
          );
          const report = readFileSync(join(dir, '.forkflush', map.target.id, 'report.md'), 'utf8');
          expect(report).toContain('## Idea map');
        },
      ),
  );

  const first = KINDS[0] as (typeof KINDS)[number];
  it(
    `${first.h.kind}: compares fork-and-flush with single-run at equal spend, then probes: the runs agree`,
    {
      concurrent: true,
      timeout: 900_000,
    },
    async ({ expect }) =>
      withTask(
        first,
        'compare',
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
