// Review of the latest local changes (showsPrivate, the sandbox's hidden places): rows that fail on
// the code as it is. Each row's comment says what happens now and what should.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { runProcess } from '../../src/io/process.js';
import { probeSandbox } from '../../src/io/sandbox.js';
import { agentConfinement } from '../../src/worker/boundary.js';
import { cli } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

const small = { budget: 'total: 12\n  unit: tokens\n  episode: 6' };

describe("sandbox.read and sandbox.write never show forkflush's own places", () => {
  it("a run in a git worktree: sandbox.read naming the repository's git folder (the main checkout's .git) is refused", async () => {
    // In a worktree, <worktree>/.git is a file and the git folder every worktree shares is the main
    // checkout's .git (the forge hides it: it is in EpisodePlaces.private as commonDir). showsPrivate
    // refuses `<repo>/.git` but knows only [repo, runs folder], so `sandbox.read: [<main>/.git]`
    // passes --dry-run (exit 0). In the episode that read bind and the hidden commonDir are one path,
    // the bind comes last and wins: the agent reads the repository's whole .git (its config with any
    // token in a remote's URL, every branch of the run); with sandbox.write, writes its hooks.
    const repo = makeTaskRepo({ ...small, extra: 'strategy: single-run' });
    const wt = join(mkdtempSync(join(tmpdir(), 'forkflush-worktree-')), 'wt');
    repo.git('worktree', 'add', '-q', '-b', 'work', wt);
    const file = join(wt, '.github', 'autoresearch.yml');
    const shared = JSON.stringify(join(repo.dir, '.git'));
    writeFileSync(file, readFileSync(file, 'utf8').replace('  write: [', `  read: [${shared}]\n  write: [`));
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qam', 'read the data'], { cwd: wt });
    const r = await cli('run', wt, '--dry-run');
    expect(r.code, r.out + r.err).toBe(2);
    expect(r.err).toMatch(/sandbox\.read: .*\.git/);
    expect(repo.calls()).toEqual([]);
  });

  it('a sandbox.read path an earlier episode made a symlink to the runs folder (through sandbox.write) does not show the seal key', async () => {
    // sandbox.write: [SHARED], sandbox.read: [SHARED/ds], ds not made yet (the pre-flight only notes
    // it). Episode 1's agent makes SHARED/ds a symlink to the runs folder, whose path it knows (its
    // workspace is inside it). The pre-flight checked sandbox.read once, before the run; each later
    // episode's confinement binds realpath(SHARED/ds), the runs folder itself, read-only at the path
    // it hides, after hiding it: equal paths, the bind wins, and the next agent reads seal.key.
    // A read or shared bind that is (or holds) a private place should be dropped (or stop the run)
    // when the confinement is made, not only checked at the pre-flight.
    const probe = await probeSandbox();
    if (!('sandbox' in probe)) throw new Error('no sandbox');
    const outer = mkdtempSync('/var/tmp/forkflush-swap-');
    const repo = join(outer, 'repo');
    const runs = join(repo, '.forkflush');
    const run = join(runs, 'r1');
    const shared = join(outer, 'shared');
    for (const d of ['ws', 'context', 'box/tmp'].map((p) => join(run, p))) mkdirSync(d, { recursive: true });
    mkdirSync(shared);
    writeFileSync(join(run, 'seal.key'), 'SECRET\n');
    // As an ordinary user's run: the agent runs as that user, and reads what the user reads.
    for (const d of [
      outer,
      repo,
      runs,
      run,
      join(run, 'ws'),
      join(run, 'context'),
      join(run, 'box'),
      join(run, 'box/tmp'),
    ])
      chmodSync(d, 0o755);
    chmodSync(join(run, 'box/tmp'), 0o777);
    chmodSync(join(run, 'ws'), 0o777);
    chmodSync(shared, 0o777);
    const config = parseConfig(
      `grader:\n  command: sh grade.sh\nagent:\n  command: sh agent.sh\nbudget:\n  total: 10\n  unit: tokens\nsandbox:\n  read: [${JSON.stringify(join(shared, 'ds'))}]\n  write: [${JSON.stringify(shared)}]\n`,
      '.github/autoresearch.yml',
    );
    const places = {
      workspace: join(run, 'ws'),
      context: join(run, 'context'),
      box: join(run, 'box'),
      objects: [],
      private: [repo, runs],
    };
    const episode = async (script: string) => {
      const account = probe.sandbox.account();
      try {
        return await runProcess('sh', ['-c', script], {
          cwd: places.workspace,
          confine: {
            sandbox: probe.sandbox,
            confinement: { ...agentConfinement(places, config, process.env), account },
          },
        });
      } finally {
        account.release();
      }
    };
    try {
      // Episode 1: the hostile agent, through the shared folder.
      const first = await episode(`ln -s ${runs} ${join(shared, 'ds')} && cat ${run}/seal.key`);
      expect(first.stdout, first.stderr).not.toContain('SECRET');
      // Episode 2: any agent of the run.
      const second = await episode(`cat ${run}/seal.key; ls ${runs}`);
      expect(second.stdout, second.stderr).not.toContain('SECRET');
    } finally {
      rmSync(outer, { recursive: true, force: true });
    }
  });
});
