// The agent's log where people look (issue 10), in the worker Action as the runner runs it. The
// Action is built from src/ here (test/integration/action.test.ts runs dist/index.js, which only
// changes when the bundle is made), then run against a bare repository on a file:// "server" with
// a command agent that prints a secret it was given, workflow commands and escape sequences.
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { basicCredentials } from '../../src/action/remote.js';
import { episodeBranch } from '../../src/core/names.js';
import { ActionRepo, buildActionFromSource, RUN, TOKEN } from './action-repo.js';

const API_KEY = 'sk-fake-0123456789abcdefghijklmnop';
const RUNTIME_TOKEN = 'runtime-token-value-5678';
let action = '';

beforeAll(async () => {
  action = await buildActionFromSource();
}, 60_000);

/** An agent that improves the value, then prints its key, workflow commands and colours. */
const LEAKY = [
  'node agent.mjs improve {calls}',
  'echo "my key is $FAKE_API_KEY"',
  'echo "::error::an annotation the agent wants"',
  'echo "::add-mask::score"',
  `printf 'colour \\033[31mred\\033[0m\\n' >&2`,
  'echo "warning: something on stderr" >&2',
].join('; ');

/** The test repository with agent.env listing the agent's key. */
class KeyRepo extends ActionRepo {
  override configText(): string {
    return super.configText().replace(/^agent:\n/m, 'agent:\n  env: [FAKE_API_KEY]\n');
  }
}

/** One job of the Action built from src/, with the agent's key and the runtime token in its environment. */
function runJob(repo: ActionRepo, episode: string) {
  return repo.runAction({
    episode,
    action,
    env: { ACTIONS_RUNTIME_TOKEN: RUNTIME_TOKEN, FAKE_API_KEY: API_KEY },
  });
}

/** The job log's lines between ::group:: and ::endgroup::, the group's title first. */
function group(stdout: string): string[] {
  const lines = stdout.split('\n');
  const start = lines.findIndex((l) => l.startsWith('::group::'));
  const end = lines.indexOf('::endgroup::', start);
  return start < 0 || end < 0 ? [] : lines.slice(start, end);
}

/** The log as the runner shows it: without its mask commands, which name the values to mask. */
function shown(stdout: string): string {
  return stdout
    .split('\n')
    .filter((l) => !l.startsWith('::add-mask::'))
    .join('\n');
}

describe("the worker Action shows the agent's log", () => {
  it('in a collapsed group, with the secret masked and every workflow command of the agent stopped', () => {
    const repo = new KeyRepo(LEAKY);
    repo.publish(repo.openingState());

    const job = runJob(repo, 'r0.b1');

    expect(job.exitCode, job.stdout).toBe(0);
    const lines = group(job.stdout);
    expect(lines[0]).toMatch(
      /^::group::forkflush r0\.b1: the agent's transcript \(command, \d+ lines; full log in .*agent\.log\)$/,
    );
    const stop = /^::stop-commands::([0-9a-f]{32})$/.exec(lines[1] ?? '')?.[1];
    expect(stop).toBeDefined();
    expect(lines.at(-1)).toBe(`::${stop}::`);
    const body = lines.slice(2, -1);
    expect(body.every((l) => l.startsWith('> '))).toBe(true);
    expect(body).toContain('> output: my key is ***');
    expect(body).toContain('> output: ::error::an annotation the agent wants');
    expect(body).toContain('> output: colour red');
    expect(body).toContain('> output: warning: something on stderr');
    // The runner masks the key in the job log too, and nothing else shows it or the tokens.
    expect(job.stdout).toContain(`::add-mask::${API_KEY}`);
    for (const secret of [API_KEY, TOKEN, basicCredentials(TOKEN), RUNTIME_TOKEN])
      expect(shown(job.stdout)).not.toContain(secret);
    // No annotation of the agent's reached the runner as a command: only the prefixed line.
    expect(job.stdout.split('\n').filter((l) => l.startsWith('::error::'))).toEqual([]);
  });

  it('in the log-file output: the full log, redacted, beside the grader log and the transcript', () => {
    const repo = new KeyRepo(LEAKY);
    repo.publish(repo.openingState());

    const job = runJob(repo, 'r0.b1');

    expect(job.exitCode, job.stdout).toBe(0);
    const file = job.outputs['log-file'] ?? '';
    expect(file).toBe(join(job.temp, 'forkflush-logs', `${RUN}-r0.b1`, 'agent.log'));
    const log = readFileSync(file, 'utf8');
    expect(log).toContain('my key is ***');
    expect(log).toContain('::error::an annotation the agent wants');
    expect(log).not.toContain(API_KEY);
    expect(readFileSync(join(file, '..', 'grader.log'), 'utf8')).toContain('sh grade.sh');
    expect(readFileSync(join(file, '..', 'transcript.txt'), 'utf8')).toContain('output: my key is ***');
    // The raw log stays in forkflush's private folder.
    expect(readFileSync(join(job.temp, 'forkflush', 'episode', 'agent.log'), 'utf8')).toContain(API_KEY);
    expect(job.outputs).toMatchObject({ tokens: '', cost: '', 'agent-version': '', exit: 'finished' });
  });

  it('without an artifact service, a warning that says where the log is; the episode stands', () => {
    const repo = new KeyRepo(LEAKY);
    repo.publish(repo.openingState());

    const job = runJob(repo, 'r0.b1');

    expect(job.exitCode, job.stdout).toBe(0);
    expect(job.stdout).toMatch(
      /::warning::the agent's log was not uploaded as an artifact: ACTIONS_RESULTS_URL is not set .*It is on the runner, redacted, in .*agent\.log/,
    );
    expect(job.outputs.commit).toBe(repo.ref(`refs/heads/${episodeBranch(RUN, 0, 1)}`));
  });

  it('in the job summary: the row, the agent, the log, the changes and the journal’s new entries', () => {
    const repo = new KeyRepo(LEAKY);
    repo.publish(repo.openingState());

    const job = runJob(repo, 'r0.b1');

    expect(job.exitCode, job.stdout).toBe(0);
    const s = job.summary;
    expect(s).toContain('### forkflush issue-42: episode r0.b1');
    expect(s).toContain(
      `| r0.b1 (round 0, branch 1) | opening | fresh context | ${job.outputs.score} | 5.4 of 6 tokens | finished |`,
    );
    expect(s).toContain('| tokens | not reported by the agent |');
    expect(s).toContain('| agent | command |');
    expect(s).toMatch(
      /\| log \| transcript in the job log \(\d+ lines, in a collapsed group\); no artifact \(`ACTIONS_RESULTS_URL is not set/,
    );
    expect(s).toMatch(
      /\*\*Changes\*\*\n\n```text\n NOTES\.md +\| 2 \+\+\n value\.txt +\| 2 \+-\n 2 files changed, 3 insertions\(\+\), 1 deletion\(-\)\n```/,
    );
    expect(s).toContain(
      `**The journal’s new entries**\n\n\`\`\`text\n- r0.b1: tried +1, score ${job.outputs.score}\n- forkflush r0.b1 (opening, fresh context): score ${job.outputs.score}`,
    );
    expect(s).not.toContain(API_KEY);
  });

  it('after a failure once the agent ran: the transcript and the log file, then the error', () => {
    const repo = new KeyRepo(LEAKY);
    repo.publish(repo.openingState());
    // The server refuses every push: the episode ran, its result cannot land.
    const hook = join(repo.remote, 'hooks', 'pre-receive');
    writeFileSync(hook, '#!/bin/sh\necho "pushes are closed" >&2\nexit 1\n');
    chmodSync(hook, 0o755);

    const job = runJob(repo, 'r0.b1');

    expect(job.exitCode).toBe(1);
    expect(group(job.stdout)).toContain('> output: my key is ***');
    expect(job.stdout).toMatch(/::error::forkflush issue-42 r0\.b1: the push was refused/);
    expect(existsSync(job.outputs['log-file'] ?? '')).toBe(true);
  });

  it('says so when the job ran no agent (the result was already on the branch)', () => {
    const repo = new KeyRepo(LEAKY);
    repo.publish(repo.openingState());
    expect(runJob(repo, 'r0.b0').exitCode).toBe(0);

    const again = runJob(repo, 'r0.b0');

    expect(again.exitCode, again.stdout).toBe(0);
    expect(group(again.stdout)).toEqual([]);
    expect(again.stdout).toContain('forkflush r0.b0: no agent ran in this job, so there is no agent log');
    expect(again.outputs).toMatchObject({ 'log-file': '', 'agent-version': '' });
  });
});
