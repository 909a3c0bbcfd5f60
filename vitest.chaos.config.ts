// `npm run test:chaos`: seeded chaos runs of the GitHub app (test/chaos/run.mjs sets the run count).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // test/app-key.ts: one app key for every shard, not one per shard file.
    globalSetup: ['test/temp-root.ts', 'test/app-key.ts'],
    include: ['test/chaos/shard-*.chaos.ts'],
    testTimeout: 900_000,
    maxWorkers: 2,
    // A worker runs its next shard file in the same process: the modules of node_modules (Probot,
    // Octokit, ajv) stay loaded and compiled, where a fresh process would load them again (each
    // shard file still evaluates the suite's own modules afresh, and runs alone in its worker).
    isolate: false,
  },
});
