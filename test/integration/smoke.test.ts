// `forkflush run --smoke` (issue 20): the task's agent started once, in the sandbox as an episode
// starts it, on a tiny prompt; its answer printed, or its own error with a non-zero exit; no run
// state written.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SMOKE_PROMPT } from '../../src/cli/smoke.js';
import { cli } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

const REFUSED = 'Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}';

function repoWith(script: string) {
  const repo = makeTaskRepo({ agentCommand: 'sh smoke-agent.sh', files: { 'smoke-agent.sh': script } });
  return repo;
}

describe('forkflush run --smoke', () => {
  it("prints the agent's answer to the smoke prompt, read from the committed tree, and writes no run", async () => {
    // It answers with what it was asked and what it sees; a file it was told not to change, unchanged.
    const repo = repoWith(
      'read -r prompt; printf "ready: %s | %s | step=[%s]\\n" "$(cat TASK.md)" "$prompt" "$FORKFLUSH_MAP_STEP"\n',
    );
    writeFileSync(join(repo.dir, 'TASK.md'), 'uncommitted text\n');
    const r = await cli('run', repo.dir, '--smoke');
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('forkflush smoke: starting the command agent once');
    expect(r.out).toContain('forkflush smoke: the agent answered');
    expect(r.out).toContain(`ready: Make the number in value.txt as large as you can. | ${SMOKE_PROMPT} | step=[]`);
    expect(existsSync(join(repo.dir, '.forkflush'))).toBe(false);
  });

  it('starts where an episode would: a task folder inside a repository is its own copy, and the agent may write it', async () => {
    // The bundled example's shape: the task in a folder of a larger repository, an agent that edits files.
    const outer = makeTaskRepo({ git: false });
    const task = join(outer.dir, 'tasks', 'one');
    mkdirSync(task, { recursive: true });
    const inner = repoWith('echo 9 > value.txt && printf "wrote %s\\n" "$(cat value.txt)"\n');
    cpSync(inner.dir, task, { recursive: true, filter: (f) => !/\/\.git(\/|$)/.test(f) });
    execFileSync('git', ['init', '-q', outer.dir]);
    execFileSync('git', ['-C', outer.dir, 'add', '-A']);
    execFileSync('git', ['-C', outer.dir, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'tasks']);
    const r = await cli('run', task, '--smoke');
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('wrote 9');
    expect(readFileSync(join(task, 'value.txt'), 'utf8')).toBe('0');
  });

  it("exits non-zero with the agent's own error when it fails", async () => {
    const repo = repoWith(`echo '${REFUSED}' >&2\nexit 1\n`);
    const r = await cli('run', repo.dir, '--smoke');
    expect(r.code).toBe(1);
    expect(r.err).toContain('forkflush smoke: the agent exited with code 1');
    expect(r.err).toContain('invalid x-api-key');
    expect(r.err).toMatch(/its log: \S+smoke\.log/);
    expect(existsSync(join(repo.dir, '.forkflush'))).toBe(false);
  });

  it("says which limit stopped an agent that never answered: the smoke test's time", async () => {
    const r = await cli('run', repoWith('sleep 300\n').dir, '--smoke');
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      "forkflush smoke: the agent ran past the smoke test's time (agent.timeout, at most 180 s) and was stopped",
    );
    expect(r.err).toContain('its log says where it waited');
  });
});
