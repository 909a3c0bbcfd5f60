// Round 4: the kernel keyring. Keyrings belong to no namespace bubblewrap makes: a key that one
// sandbox adds for any user to read outlives it, and every later sandbox lists it in /proc/keys.
// A branch's agent planted its score there and its sibling's committed solver printed it in the
// sibling's judge: a score no clean checkout of the commit earns. Every sandbox's syscall filter
// now refuses the keyring's calls (io/seccomp.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  attackTemp,
  cleanRegrade,
  cleanupAttackTemps,
  currentCli,
  describeSandboxed,
  makeAttackRepo,
  runLocal,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
});

describeSandboxed('a branch that plants its score in the kernel keyring for its sibling', () => {
  it("is refused the key: each branch's judge scores its own commit", async () => {
    const name = unique('ffkey');
    const repo = makeAttackRepo({
      dir: attackTemp('keyring'),
      agent: `sh {fx}/round4-keyring.sh {logs} ${name}`,
      grader: 'sh grade.sh',
      files: { 'grade.sh': 'sh solve.sh\n', 'solve.sh': 'echo 1\n' },
      strategy: 'fork-and-flush',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'fork: {branches: 2, at: [], branch_budget: 0.5}',
    });
    const { state } = await runLocal(repo);
    const planted = readFileSync(join(repo.logs, 'keyring-planted'), 'utf8');
    const how = `${planted}\n${JSON.stringify(state.rounds, null, 1)}`;
    expect(planted, how).toMatch(/^refused: Operation not permitted/);
    const episodes = state.rounds[0]?.episodes ?? [];
    expect(
      episodes.map((e) => e.result?.score),
      how,
    ).toEqual([5, 5]);
    for (const e of episodes)
      expect(cleanRegrade(join(repo.dir, '.git'), e.result?.commit ?? '', 'sh grade.sh')).toBe(5);
    // Nothing of the attack is left in any keyring this process can see.
    expect(readFileSync('/proc/keys', 'utf8')).not.toContain(name);
  }, 120_000);
});
