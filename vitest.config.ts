import { defineConfig } from 'vitest/config';
import { WaitingFirst } from './test/waiting-first.js';

export default defineConfig({
  test: {
    globalSetup: ['test/temp-root.ts'],
    include: ['test/**/*.test.ts'],
    // The agent CLI suite has its own config (vitest.agents.config.ts) and command (npm run test:agents).
    exclude: ['test/agents/**', 'node_modules/**'],
    // Hang bounds, not speed targets (bench/ has those): CI's busy machine ran the suite at half the
    // speed of an idle one, and rows of 20 to 26 s idle came near a 60 s bound.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Integration tests spawn git, bwrap and node processes and wait on them (deadlines, stalls,
    // the GitHub box's webhooks): with two files at once the two cores idled half the time; three
    // took 424 s where two took 505 s (stop 34, beside other work).
    maxWorkers: 3,
    // Files that mostly wait start first (test/waiting-first.ts): on a fresh clone they ran last.
    sequence: { sequencer: WaitingFirst },
  },
});
