// `npm run test:chaos`: seeded chaos runs of the GitHub app (test/chaos/run.mjs sets the run count).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/temp-root.ts'],
    include: ['test/chaos/shard-*.chaos.ts'],
    testTimeout: 900_000,
    maxWorkers: 2,
  },
});
