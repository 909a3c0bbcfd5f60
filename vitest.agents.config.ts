// `npm run test:agents`: the agent adapters against the real agent CLIs (installed by
// scripts/install-agent-clis.mjs) and a scripted mock model server on 127.0.0.1.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/temp-root.ts'],
    include: ['test/agents/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // A contract file per agent kind (test/agents/contract/), and the quirks: four at a time keep two
    // cores busy (the CLIs' starts are most of the CPU; six at a time took longer, opencode's rows
    // past their bounds).
    maxWorkers: 4,
    // The whole-run suite (whole-runs.test.ts) runs its kinds side by side, two at a time. `npm run
    // test:agents` runs it after the contract files, not beside them: each run starts up to three
    // CLIs, and opencode's start alone takes seconds of CPU, so beside them the contract files'
    // episodes ran past their deadline on a two-core machine. Beside it run the faults files
    // (contract/<kind>.faults.test.ts, all seven at once: their rows mostly wait on a CLI's
    // backoff): 319 s for both, where the faults files had added 124 s to the contract files' 221 s.
    maxConcurrency: 2,
  },
});
