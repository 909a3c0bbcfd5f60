// `npm run test:chaos -- --runs N [--seed S] [--load L]` (also the last step of `npm test`): N seeded
// chaos runs of the GitHub app (chaos.ts), split over the workers by the shard files (*.chaos.ts, so
// vitest's own run leaves them out); each shard writes its outcomes for run.mjs to sum up.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { assertNoOpenApiViolations } from '../github/fake-github.js';
import { chaosRun, type Outcome } from './chaos.js';
import { offline } from './offline.js';

/** Runs in flight at once in a worker. */
const CONCURRENT = 8;

/** Runs this shard's seeds: first + shard, first + shard + shards, ... below first + runs. */
export async function runShard(shard: number, shards: number): Promise<Outcome[]> {
  const runs = Number(process.env.FORKFLUSH_CHAOS_RUNS ?? 200);
  const first = Number(process.env.FORKFLUSH_CHAOS_SEED ?? 1);
  const seeds: number[] = [];
  for (let i = shard; i < runs; i += shards) seeds.push(first + i);
  const out: Outcome[] = [];
  /** What broke GitHub's OpenAPI description that no run's own check saw (a request after it). */
  const unseen: string[] = [];
  // Each run has its own GitHub (the box) and app server on 127.0.0.1; nothing else is reachable.
  const online = offline();
  try {
    // A few runs at once: most of a run's time is spent waiting on the other runs' requests. Each
    // that ends makes room for the next seed, so that no worker waits on the slowest run of a batch.
    let next = 0;
    const lane = async () => {
      while (next < seeds.length) {
        const o = await chaosRun(seeds[next++] as number);
        out.push(o);
        // Every step of a run that broke an invariant (of every run with FORKFLUSH_CHAOS_DEBUG=1).
        if (process.env.FORKFLUSH_CHAOS_DEBUG || o.violations.length > 0)
          console.log(`seed ${o.seed}, ${o.requests} requests:\n  ${o.steps.join('\n  ')}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENT }, lane));
    out.sort((a, b) => a.seed - b.seed);
    // Each run checked its own fake before it closed (its outcome lists what broke GitHub's
    // OpenAPI description); this checks every fake the shard made once more, after the last run
    // ended. Anything found here came after a run's check: it fails the shard below, once the
    // outcomes are written.
    try {
      assertNoOpenApiViolations();
    } catch (e) {
      unseen.push(`seeds ${seeds.join(', ')}: ${(e as Error).message}`);
    }
  } finally {
    online();
  }
  const dir = process.env.FORKFLUSH_CHAOS_OUT;
  if (dir) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `shard-${shard}.json`), JSON.stringify(out));
  }
  const bad = out.filter((o) => o.violations.length > 0);
  expect(bad.map((o) => `seed ${o.seed}: ${o.violations.join('; ')}`)).toEqual([]);
  expect(unseen).toEqual([]);
  return out;
}
