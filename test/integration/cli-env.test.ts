// The environment a run reads is the one the CLI was given (its Io), not this process's: the
// agent's, setup's and grader's allowlists are taken from it in the preflight, the initial grading
// and every episode alike (compare hands each of its runs its own).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliWith, plainEnv } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

describe('the environment of a run', () => {
  it("is the CLI's: the agent and the grader see the variables it was given, listed in their env", async () => {
    const t = makeTaskRepo({
      agentCommand: `sh -c 'echo "$FF_TEST_VALUE" > value.txt'\n  env: [FF_TEST_VALUE]`,
      grader: `sh -c 'echo $(( $(cat value.txt) + FF_TEST_BONUS ))'\n  env: [FF_TEST_BONUS]`,
      budget: 'total: 6\n  unit: tokens\n  episode: 6',
      extra: 'strategy: single-run',
    });
    expect(process.env.FF_TEST_VALUE ?? process.env.FF_TEST_BONUS).toBeUndefined();
    const r = await cliWith(['run', t.dir], { env: { ...plainEnv(), FF_TEST_VALUE: '9', FF_TEST_BONUS: '5' } });
    expect(r.code, r.err).toBe(0);
    const state = JSON.parse(readFileSync(join(t.dir, '.forkflush', '20261130-100000', 'state.json'), 'utf8'));
    // The initial workspace: 0 + 5; the agent's: 9 + 5.
    expect(state.base.score).toBe(5);
    expect(state.best.score).toBe(14);
  }, 120_000);
});
