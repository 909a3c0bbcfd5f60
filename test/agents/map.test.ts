// forkflush map with each real agent kind as its judge: a short run of the real CLI against the
// scripted model server, then a map whose specs and triplet answers are the real CLI's final
// messages, in forkflush's sandbox. Not aider: it writes its repository map's cache into the folder
// it reads, and the judge's is read-only (README, "Idea maps"). The model says the
// same thing every time, "... b", so each spec is that message and each judgment is "b".
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { cliWith } from '../integration/cli-io.js';
import { KINDS, withTask } from './real-runs.js';

/** Every kind but aider (above). */
const JUDGES = KINDS.filter((k) => k.h.kind !== 'aider');

const SAID = 'Both solutions write the number 7 into value.txt and do nothing else.\nb';

// The kinds side by side: each has its own mock model and task, and the time is mostly the CLIs'.
describe('the real agent CLIs as the map judge', () => {
  it.for(JUDGES.map((k) => [k.h.kind, k] as const))(
    '%s writes each spec and answers each triplet in its final message',
    { concurrent: true, timeout: 900_000 },
    async ([, k], { expect }) =>
      withTask(
        k,
        'map',
        (episode) => [
          `budget: {total: ${3 * episode}, unit: tokens, episode: ${episode}}`,
          'strategy: single-run',
          // The judge is the task's agent; a few questions, and a budget with room for them.
          `map: {triplets: 10, budget: ${100 * episode}}`,
        ],
        async (dir, env) => {
          const run = await cliWith(['run', dir], { env });
          expect(run.code, run.err).toBe(0);
          k.h.model.answer(SAID);
          const before = k.h.model.calls().length;
          const r = await cliWith(['map', dir, '--json'], { env });
          expect(r.code, r.err).toBe(0);
          const map = JSON.parse(r.out);
          expect(map.points.length).toBeGreaterThanOrEqual(3);
          expect(map.calls.spec).toEqual({ made: map.points.length, cached: 0, failed: 0 });
          expect(map.judgments).toBe(10);
          for (const t of map.triplets) expect(t.answer).toBe('b');
          expect(map.judge.kind).toBe(k.h.kind);
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
});
