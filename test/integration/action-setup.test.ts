// The worker Action with setup: and an agent CLI to install, built from src/ into a temp folder
// (so it tests this source, whatever dist/ holds) and run as one job, like action.test.ts. npm is
// a FAKE first on PATH (test/integration/agent-install.test.ts says what it imitates): the real
// registry install of an agent CLI takes minutes.
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseCommitMessage } from '../../src/core/journal.js';
import { episodeBranch } from '../../src/core/names.js';
import { ActionRepo, buildActionFromSource, RUN } from './action-repo.js';

let action = '';

beforeAll(async () => {
  action = await buildActionFromSource();
}, 60_000);

/** Runs the built Action as one job, with `bin` first on the runner's PATH. */
function runJob(repo: ActionRepo, episode: string, bin: string) {
  return repo.runAction({ episode, action, pathFirst: bin });
}

/** A fake npm that fails as the registry does for a package it cannot serve; and records its call. */
function failingNpm(): { bin: string; calls: string } {
  const bin = mkdtempSync(join(tmpdir(), 'forkflush-fake-npm-'));
  const calls = join(bin, 'calls.txt');
  writeFileSync(
    join(bin, 'npm'),
    `#!/bin/sh\necho "$@" >> ${calls}\necho "npm error code ETIMEDOUT" >&2\necho "npm error network request to https://registry.npmjs.org failed" >&2\nexit 1\n`,
  );
  chmodSync(join(bin, 'npm'), 0o755);
  return { bin, calls };
}

describe('the worker Action, setup and the agent CLI', () => {
  it("a CLI that cannot be installed is the episode's setup result, pushed like any other: nothing spent, no agent", () => {
    const repo = new ActionRepo();
    // The config names claude-code: the Action installs it (here: fails to).
    const state = repo.openingState();
    state.config = { ...state.config, agent: { ...state.config.agent, kind: 'claude-code', command: undefined } };
    repo.publish(state);
    const npm = failingNpm();
    const job = runJob(repo, 'r0.b0', npm.bin);
    expect(job.exitCode, job.stdout).toBe(0);
    expect(readFileSync(npm.calls, 'utf8')).toMatch(
      /^install --global --prefix \S+\/tool-cache\/forkflush-agents\/anthropic-ai\+claude-code@2\.1\.332 --no-audit --no-fund --no-update-notifier @anthropic-ai\/claude-code@2\.1\.332\n$/,
    );
    expect(job.stdout).toContain("agent CLI: the agent's CLI @anthropic-ai/claude-code@2.1.332 could not be installed");
    expect(job.outputs.exit).toBe('setup');
    const head = repo.ref(`refs/heads/${episodeBranch(RUN, 0, 0)}`) ?? '';
    expect(repo.git(['rev-parse', `${head}^`])).toBe(repo.base);
    expect(parseCommitMessage(repo.message(head), head)?.result).toMatchObject({
      exit: 'setup',
      score: null,
      spent: 0,
      reason:
        "the agent's CLI @anthropic-ai/claude-code@2.1.332 could not be installed: npm exited with code 1: npm error network request to https://registry.npmjs.org failed",
    });
    expect(repo.calls()).toEqual([]);
  });

  it('runs setup in the job before the agent and in the judge checkout; what it made is not pushed', () => {
    const repo = new ActionRepo();
    const state = repo.openingState();
    // setup makes deps/lib.txt, which the grader needs (in the job's workspace and the judge's checkout).
    state.config = {
      ...state.config,
      setup: {
        ...state.config.setup,
        commands: ['mkdir -p deps && echo made > deps/lib.txt', 'test -f deps/lib.txt'],
      },
      grader: { ...state.config.grader, command: 'cat deps/lib.txt >/dev/null && sh grade.sh' },
    };
    repo.publish(state);
    const job = runJob(repo, 'r0.b1', failingNpm().bin);
    expect(job.exitCode, job.stdout).toBe(0);
    expect(job.stdout).toContain('setup: ran in the workspace');
    // Nothing to install for a command agent.
    expect(job.stdout).not.toContain('agent CLI:');
    const head = repo.ref(`refs/heads/${episodeBranch(RUN, 0, 1)}`) ?? '';
    const result = parseCommitMessage(repo.message(head), head)?.result;
    expect(result).toMatchObject({ exit: 'finished' });
    expect(result?.score).toBe(Number(repo.show(head, 'value.txt')));
    expect(repo.git(['ls-tree', '-r', '--name-only', head])).not.toContain('deps/');
  });

  it('a setup that fails shows its log in the job (a collapsed group) and keeps it, redacted, for the artifact', () => {
    const repo = new ActionRepo();
    const state = repo.openingState();
    state.config = {
      ...state.config,
      setup: {
        ...state.config.setup,
        commands: ['echo "resolving deps"', 'echo "::error::no such package" >&2; exit 3'],
      },
    };
    repo.publish(state);
    const job = runJob(repo, 'r0.b0', failingNpm().bin);
    expect(job.exitCode, job.stdout).toBe(0);
    expect(job.outputs.exit).toBe('setup');
    const lines = job.stdout.split('\n');
    const start = lines.findIndex((l) =>
      l.startsWith("::group::forkflush r0.b0: setup's log (no agent ran; full log in "),
    );
    expect(start, job.stdout).toBeGreaterThan(-1);
    const group = lines.slice(start, lines.indexOf('::endgroup::', start));
    expect(group).toContain('> resolving deps');
    // What setup printed is quoted, never a workflow command of its own.
    expect(group).toContain('> ::error::no such package');
    expect(group.filter((l) => l.startsWith('::error::'))).toEqual([]);
    const copy = join(job.temp, 'forkflush-logs', `${RUN}-r0.b0`, 'setup.log');
    expect(readFileSync(copy, 'utf8')).toContain('no such package');
    expect(job.stdout).toContain("setup's log was not uploaded as an artifact: ACTIONS_RESULTS_URL is not set");
    expect(job.stdout).toContain(`It is on the runner, redacted, in ${copy}`);
  });
});

describe('the worker Action and an agent that fails', () => {
  it("fails the job (red) on a refused key, its result pushed with the agent's error for the app to stop the run", () => {
    const repo = new ActionRepo(
      `sh -c 'echo "Error: 401 {\\"error\\":{\\"type\\":\\"authentication_error\\",\\"message\\":\\"invalid x-api-key\\"}}" >&2; exit 1'`,
    );
    repo.publish(repo.openingState());
    const job = repo.runAction({ episode: 'r0.b0', action });
    expect(job.exitCode, job.stdout).not.toBe(0);
    expect(job.stdout).toMatch(
      /::error::forkflush issue-42 r0\.b0: the agent failed: its key or login was refused \(Error: 401 .*invalid x-api-key.*\): check the key or login the agent uses/,
    );
    const head = repo.ref(`refs/heads/${episodeBranch(RUN, 0, 0)}`) ?? '';
    expect(repo.git(['rev-parse', `${head}^`])).toBe(repo.base);
    expect(parseCommitMessage(repo.message(head), head)?.result).toMatchObject({
      exit: 'crash',
      spent: 0,
      spentBasis: 'none',
      unchanged: true,
      failure: { kind: 'auth', quote: expect.stringContaining('invalid x-api-key') },
    });
  });
});
