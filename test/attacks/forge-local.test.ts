// Hostile agents that try to forge their score in a local run. Each ends honestly when the
// recorded score is what a clean checkout of the result commit earns, the protected files in the
// commit are the base's, and nothing of forkflush's own git was changed.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { parseCommitMessage } from '../../src/core/journal.js';
import { episodeBranch } from '../../src/core/names.js';
import {
  type AttackRepo,
  cleanRegrade,
  cleanupAttackTemps,
  commitHolds,
  commitMessage,
  describeSandboxed,
  fingerprint,
  hasObject,
  makeAttackRepo,
  processesWith,
  runLocal,
  showFile,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);

const SOLVER_GRADER = {
  'grade.sh': '# The score: what the solver prints.\nif [ -f solve.sh ]; then sh solve.sh; else echo 0; fi\n',
};

/** The result's protected grader is the base's, and its parent is the base. */
function expectBaseGrader(repo: AttackRepo, commit: string) {
  const gitDir = join(repo.dir, '.git');
  expect(showFile(gitDir, commit, 'grade.sh')).toBe(readFileSync(join(repo.dir, 'grade.sh'), 'utf8'));
  expect(repo.git('rev-parse', `${commit}^`)).toBe(repo.git('rev-parse', 'main'));
}

describeSandboxed('forging a score through git (local run)', () => {
  it('an agent that marks the grader assume-unchanged and edits it gets no forged score', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/assume-unchanged.sh {logs}' });
    // The agent's own git is blind to the edit (the attack "worked" inside).
    const { result } = await runLocal(repo);
    expect(readFileSync(join(repo.logs, 'status.txt'), 'utf8')).not.toContain('grade.sh');
    expect(result.score).not.toBe(1_000_000);
    expect(result.protectedChanged).toEqual(['grade.sh']);
    expect(result.score).toBeNull();
    expectBaseGrader(repo, result.commit);
    expect(showFile(join(repo.dir, '.git'), result.commit, 'value.txt')).toBe('5\n');
  });

  it('an agent that edits the grader in place, same size, with its timestamps put back, is caught', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/racy-edit.sh' });
    const { result } = await runLocal(repo);
    expect(result.score).not.toBe(1_000_000);
    expect(result.protectedChanged).toEqual(['grade.sh']);
    expectBaseGrader(repo, result.commit);
  });

  it('an agent that plants a clean filter (.git/config, info/attributes, .gitattributes) gets the clean score', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/clean-filter.sh {logs} {repo}' });
    const gitDir = join(repo.dir, '.git');
    const before = {
      config: fingerprint(join(gitDir, 'config')),
      attributes: fingerprint(join(gitDir, 'info', 'attributes')),
      hook: fingerprint(join(gitDir, 'hooks', 'pre-commit')),
    };
    const { result } = await runLocal(repo);
    expect(result.score).toBe(2);
    expect(result.score).toBe(cleanRegrade(gitDir, result.commit, repo.grader));
    expect(showFile(gitDir, result.commit, 'value.txt')).toBe('2\n');
    // The main repository's git directory is as it was: the agent planted only in places that vanished.
    expect(fingerprint(join(gitDir, 'config'))).toBe(before.config);
    expect(readFileSync(join(gitDir, 'config'), 'utf8')).not.toContain('forge');
    expect(fingerprint(join(gitDir, 'info', 'attributes'))).toBe(before.attributes);
    expect(fingerprint(join(gitDir, 'hooks', 'pre-commit'))).toBe(before.hook);
    expect(existsSync(join(repo.logs, 'hooked'))).toBe(false);
    expectBaseGrader(repo, result.commit);
  });

  it('a setsid daemon that waits for the judge and swaps in a grader printing 100 has no effect and dies', async () => {
    const marker = unique('ff-daemon-swap');
    const repo = makeAttackRepo({
      agent: `sh {fx}/daemon-swap.sh {logs} ${marker} '{repo}/.forkflush/*/episodes/*/judge'`,
    });
    const { result } = await runLocal(repo);
    expect(result.score).toBe(3);
    expect(result.score).toBe(cleanRegrade(join(repo.dir, '.git'), result.commit, repo.grader));
    expect(result.protectedChanged).toEqual([]);
    expectBaseGrader(repo, result.commit);
    expect(processesWith(marker)).toEqual([]);
    // It was up while the agent ran; dead, not just quiet, after: its heartbeat stops.
    expect(existsSync(join(repo.logs, 'heartbeat'))).toBe(true);
    expect(existsSync(join(repo.logs, 'swaps'))).toBe(false);
    const beat = () => fingerprint(join(repo.logs, 'heartbeat'));
    const after = beat();
    await new Promise((r) => setTimeout(r, 600));
    expect(beat()).toBe(after);
  });

  it('a solver that reads helpers kept out of the commit (.gitignore, info/exclude, excludesFile) scores as a clean checkout', async () => {
    const repo = makeAttackRepo({ agent: 'sh {fx}/ignored-helper.sh', files: SOLVER_GRADER });
    const { result } = await runLocal(repo);
    const clean = cleanRegrade(join(repo.dir, '.git'), result.commit, repo.grader);
    expect(result.score).toBe(clean);
    // Only .gitignore is the repository's: the agent's own .git and home count for nothing.
    expect(showFile(join(repo.dir, '.git'), result.commit, 'helper-gitignore.txt')).toBeNull();
    expect(showFile(join(repo.dir, '.git'), result.commit, 'helper-info-exclude.txt')).toBe('501\n');
  });

  it("a solver that reads its helper from git's object store (a sibling's blob) scores as a clean checkout", async () => {
    const repo = makeAttackRepo({
      agent: 'sh {fx}/object-store-helper.sh',
      files: SOLVER_GRADER,
      strategy: 'best-of-n',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'fork:\n  branches: 2',
    });
    const { state, results } = await runLocal(repo, { concurrency: 1 });
    const second = state.rounds[0]?.episodes.find((e) => e.id === 'r0.b1')?.result;
    expect(results.map((r) => r.commit)).toHaveLength(2);
    if (!second) throw new Error('no result for r0.b1');
    const gitDir = join(repo.dir, '.git');
    // Its commit holds the helper nowhere.
    expect(commitHolds(gitDir, second.commit, 'helper payload')).toBe(false);
    expect(second.score).toBe(cleanRegrade(gitDir, second.commit, repo.grader));
  });

  it("fake trailers in the agent's own commits, a moved HEAD and kill -9 everywhere are not read back", async () => {
    const now = new Date('2026-11-30T10:00:00Z');
    const run = '20261130-100000';
    const repo = makeAttackRepo({ agent: `sh {fx}/fake-trailers.sh {logs} {repo} ${run}` });
    const { result, state } = await runLocal(repo, { now });
    expect(state.status).toBe('finished');
    const gitDir = join(repo.dir, '.git');
    const fake = readFileSync(join(repo.logs, 'fake-commit'), 'utf8').trim();
    expect(fake).toMatch(/^[0-9a-f]{40}$/);
    expect(result.commit).not.toBe(fake);
    expect(result.score).not.toBe(1e9);
    expect(result.score).toBe(7);
    expect(result.score).toBe(cleanRegrade(gitDir, result.commit, repo.grader));
    // The agent's commit never reached the repository; the branch holds forkflush's sealed commit.
    expect(hasObject(gitDir, fake)).toBe(false);
    const message = commitMessage(gitDir, result.commit);
    expect(message).toMatch(/^Forkflush-Seal: [0-9a-f]{64}$/m);
    expect(parseCommitMessage(message, result.commit)?.result.score).toBe(7);
    expect(message).not.toContain('1000000000');
    const branch = state.rounds[0]?.episodes[0];
    if (!branch) throw new Error('no episode');
    const ref = `refs/heads/${episodeBranch(run, branch.round, branch.branch)}`;
    const head = repo.git('for-each-ref', '--format=%(objectname)', ref);
    expect([result.commit, '']).toContain(head);
    expectBaseGrader(repo, result.commit);
  });
});
