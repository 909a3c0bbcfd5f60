import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests spawn git and node processes; two cores are plenty busy with two files at once.
    maxWorkers: 2,
  },
});
