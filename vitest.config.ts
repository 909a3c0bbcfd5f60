import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/temp-root.ts'],
    include: ['test/**/*.test.ts'],
    // The agent CLI suite has its own config (vitest.agents.config.ts) and command (npm run test:agents).
    exclude: ['test/agents/**', 'node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests spawn git and node processes; two cores are plenty busy with two files at once.
    maxWorkers: 2,
  },
});
