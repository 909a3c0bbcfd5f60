// A new user's ordinary machine: a folder, a mount or an environment variable that is not the
// developer's. Each makes forkflush refuse at once, naming the place and the fix, or just work;
// never an exit 1 with a bare errno, nor every episode crashing, blamed on the agent, and exit 0.
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isolationFor } from '../../src/worker/boundary.js';
import { cli, cliWith, plainEnv, said } from './cli-io.js';
import { makeTaskRepo } from './task-repo.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
const SMALL = { budget: 'total: 12\n  unit: tokens\n  episode: 6', extra: 'strategy: single-run' };
const runsOf = (dir: string) => (existsSync(join(dir, '.forkflush')) ? readdirSync(join(dir, '.forkflush')) : []);

/** Runs `body` with process.env[name] set (the in-process CLI and os.tmpdir() read it), then restores it. */
async function withEnv<T>(name: string, value: string, body: () => Promise<T>): Promise<T> {
  const before = process.env[name];
  process.env[name] = value;
  try {
    return await body();
  } finally {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  }
}

/** A fresh mount point with `mount ARGS` on it, or null (loudly) where this test cannot mount. */
function mountAt(what: string, args: string[]): { dir: string; umount(): void } | null {
  const dir = mkdtempSync(join('/var/tmp', 'forkflush-mnt-'));
  try {
    execFileSync('mount', [...args, dir], { stdio: 'pipe' });
  } catch {
    rmSync(dir, { recursive: true, force: true });
    console.warn(`\n!!!!!!!! ${what} TEST SKIPPED: cannot mount here (not root?). !!!!!!!!\n`);
    return null;
  }
  return {
    dir,
    umount: () => {
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe("a new user's machine", async () => {
  const sandboxed = (await isolationFor('auto')).sandbox !== null;
  if (!sandboxed) console.warn('\n!!!!!!!! NEW-USER-MACHINE RUN TESTS SKIPPED: no sandbox here. !!!!!!!!\n');
  const maybe = sandboxed ? it : it.skip;

  // A task folder on a filesystem mounted noexec (a hardened /tmp or /home, a data disk, a USB
  // stick): the run folder is inside it, and so is each episode's box with the $FORKFLUSH_GRADE
  // helper. Every call of it failed with EACCES, so every episode "crashed" (quoted as
  // "agent exited with code 1: error: [Circular *1],"), blamed on the agent, charged estimates,
  // and the run finished with exit 0 having spent under a tenth of its budget; the dry run passed.
  maybe('a task folder on a noexec mount is refused naming the mount, or its episodes work', async () => {
    const mnt = mountAt('NOEXEC', ['-t', 'tmpfs', '-o', 'noexec,size=64m,mode=1777', 'tmpfs']);
    if (!mnt) return;
    try {
      const repo = await withEnv('TMPDIR', mnt.dir, async () => makeTaskRepo(SMALL));
      const dry = await cli('run', repo.dir, '--dry-run');
      const r = await cli('run', repo.dir);
      if (dry.code === 0 && r.code === 0) {
        // It works: no episode crashed, and the budget went to the agent.
        const s = JSON.parse((await cli('status', repo.dir, '--json')).out);
        const episodes = s.rounds.flatMap((x: { episodes: unknown[] }) => x.episodes) as { failure?: unknown }[];
        expect(episodes.filter((e) => e.failure)).toEqual([]);
        expect(s.budget.spent).toBeGreaterThan(6);
      } else {
        // Refused before any agent started, by the dry run too, naming the mount and a fix.
        for (const x of [dry, r]) {
          expect(x.code, x.err).toBe(2);
          expect(said(x.err).join('\n')).toMatch(/noexec/);
          expect(x.err).toContain(mnt.dir);
        }
        expect(repo.calls()).toEqual([]);
      }
    } finally {
      mnt.umount();
    }
  });

  // TMPDIR names a folder that is gone (a per-session tmp cleaned at reboot, a typo in a shell
  // profile): forkflush exited 1 with "failed: ENOENT: no such file or directory, mkdtemp
  // '/…/forkflush-dry-run-XXXXXX'", never saying TMPDIR.
  it('TMPDIR naming a missing folder is refused naming TMPDIR, or ignored', async () => {
    const repo = makeTaskRepo(SMALL);
    const gone = join(tmpdir(), `forkflush-gone-${process.pid}`, 'tmp');
    const dry = await withEnv('TMPDIR', gone, () =>
      cliWith(['run', repo.dir, '--dry-run'], { env: { ...plainEnv(), TMPDIR: gone } }),
    );
    if (dry.code !== 0) {
      expect(dry.code, dry.err).toBe(2);
      expect(said(dry.err).join('\n')).toContain(`TMPDIR (${gone})`);
      expect(dry.err).not.toMatch(/ENOENT|mkdtemp/);
    }
    expect(repo.calls()).toEqual([]);
  });

  // A checkout on a read-only mount (a container's `-v $PWD:/src:ro`, a read-only share):
  // forkflush exited 1 with "failed: EROFS: read-only file system, open '…/.git/info/exclude'".
  it('a task folder on a read-only mount is refused naming the folder and a fix', async () => {
    const repo = makeTaskRepo(SMALL);
    const mnt = mountAt('READ-ONLY', ['--bind', repo.dir]);
    if (!mnt) return;
    try {
      execFileSync('mount', ['-o', 'remount,bind,ro', mnt.dir], { stdio: 'pipe' });
      const dry = await cli('run', mnt.dir, '--dry-run');
      expect(dry.code, dry.err).toBe(2);
      const line = said(dry.err).join('\n');
      expect(line).toContain(mnt.dir);
      expect(line).toMatch(/read-only/);
      expect(line).not.toMatch(/EROFS|failed: /);
      expect(repo.calls()).toEqual([]);
    } finally {
      mnt.umount();
    }
  });

  // `~/` in agent.command (an agent script kept in the home folder, shown by sandbox.read, which
  // takes `~/`): the dry run said "~/agents/agent.mjs, the file `node ~/agents/agent.mjs …` runs,
  // does not exist in the repository: write it", which is false and sends the user the wrong way.
  // Inside the sandbox the shell's `~` is the episode's own home, so the honest refusal says that
  // and gives the absolute path (or forkflush expands it, as it does in sandbox.read).
  it('~/ in agent.command is not called a missing file of the repository', async () => {
    const home = mkdtempSync(join(tmpdir(), 'forkflush-home-'));
    mkdirSync(join(home, 'agents'));
    copyFileSync(join(FIXTURES, 'agent.mjs'), join(home, 'agents', 'agent.mjs'));
    const repo = makeTaskRepo({ ...SMALL, agentCommand: 'the-agent' });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    writeFileSync(
      config,
      readFileSync(config, 'utf8')
        .replace('command: the-agent', `command: node ~/agents/agent.mjs improve ${repo.callsLog}`)
        .replace('sandbox:\n  write:', 'sandbox:\n  read: ["~/agents"]\n  write:'),
    );
    repo.git('commit', '-qam', 'the agent, in the home folder');
    const dry = await withEnv('HOME', home, () =>
      cliWith(['run', repo.dir, '--dry-run'], { env: { ...plainEnv(), HOME: home } }),
    );
    expect(dry.err).not.toContain('does not exist in the repository');
    expect(dry.code, dry.err).toBe(2);
    expect(said(dry.err).join('\n')).toContain(
      `agent.command names ~/agents/agent.mjs, but each episode's ~ is a home folder of its own, not yours: name it by its absolute path, ${join(home, 'agents', 'agent.mjs')}`,
    );
    expect(repo.calls()).toEqual([]);
    expect(runsOf(repo.dir)).toEqual([]);
  });

  // Every Node project ignores node_modules, and a grader imports a dependency from it: no
  // checkout has it. The dry run passed ("the checks passed", with a note that the initial
  // workspace has no score), quoting the grader's error as "}" (the last line of Node's
  // report); the run then spent its opening round and stopped with exit 1, quoting "}" again.
  // The grader's real line (Cannot find package 'padder') and the cause (node_modules is ignored
  // by git, so no checkout has it; install it with setup.commands) should be said, before any agent.
  maybe(
    'a grader needing the ignored node_modules is caught before any agent, quoting the missing package',
    async () => {
      const repo = makeTaskRepo({
        ...SMALL,
        grader: 'node grade.mjs',
        files: {
          '.gitignore': 'node_modules/\n',
          'grade.mjs':
            'import p from "padder";\nimport { readFileSync } from "node:fs";\nconsole.log(p(readFileSync("value.txt", "utf8").trim()));\n',
        },
      });
      mkdirSync(join(repo.dir, 'node_modules', 'padder'), { recursive: true });
      writeFileSync(join(repo.dir, 'node_modules', 'padder', 'index.mjs'), 'export default (s) => String(s);\n');
      writeFileSync(
        join(repo.dir, 'node_modules', 'padder', 'package.json'),
        '{"name":"padder","type":"module","exports":"./index.mjs"}\n',
      );
      // It grades by hand in the user's folder.
      expect(execFileSync('node', ['grade.mjs'], { cwd: repo.dir, encoding: 'utf8' }).trim()).toBe('0');
      const dry = await cli('run', repo.dir, '--dry-run');
      const r = await cli('run', repo.dir);
      for (const x of [dry, r]) {
        expect(x.code, x.out + x.err).toBe(2);
        const text = x.out + x.err;
        expect(text).toContain("Cannot find package 'padder'");
        expect(text).not.toContain('exited with code 1: })');
        expect(text).toContain('node_modules');
        expect(text).toContain('setup');
      }
      expect(repo.calls()).toEqual([]);
    },
  );

  // A Python or Node tool in the repository's ignored virtualenv (.venv/bin on PATH, as
  // `source .venv/bin/activate` leaves it). forkflush refused the absolute path and advised
  // "name it relative to the repository (.venv/bin/mynode)"; with that, the dry run passed, and
  // the run stopped at its first episode (exit 127, "not found"): git ignores .venv, so no
  // checkout has it. The advice and the dry run should say so (commit it or make it in setup).
  maybe('an agent in the ignored .venv is refused by the dry run, naming it as ignored, not advised', async () => {
    const repo = makeTaskRepo({ ...SMALL, agentCommand: 'the-agent', files: { '.gitignore': '.venv/\n' } });
    mkdirSync(join(repo.dir, '.venv', 'bin'), { recursive: true });
    writeFileSync(join(repo.dir, '.venv', 'bin', 'mynode'), '#!/bin/sh\nexec node "$@"\n', { mode: 0o755 });
    const config = join(repo.dir, '.github', 'autoresearch.yml');
    const text = readFileSync(config, 'utf8');
    const env = { ...plainEnv(), PATH: `${join(repo.dir, '.venv', 'bin')}:${process.env.PATH}` };
    writeFileSync(config, text.replace('command: the-agent', `command: mynode agent.mjs improve ${repo.callsLog}`));
    repo.git('commit', '-qam', 'the agent, from the virtualenv on PATH');
    const onPath = await cliWith(['run', repo.dir, '--dry-run'], { env });
    expect(onPath.code).toBe(2);
    expect(onPath.err).not.toContain('name it relative to the repository (.venv/bin/mynode)');
    expect(said(onPath.err).join('\n')).toContain(
      "in the repository's .venv/bin/mynode, which git ignores, so no episode's checkout has it: commit it (git add -f), or make it in setup.commands",
    );
    writeFileSync(
      config,
      text.replace('command: the-agent', `command: .venv/bin/mynode agent.mjs improve ${repo.callsLog}`),
    );
    repo.git('commit', '-qam', 'the agent, by its path in the repository');
    const relative = await cliWith(['run', repo.dir, '--dry-run'], { env });
    expect(relative.code, relative.out).toBe(2);
    expect(said(relative.err).join('\n')).toMatch(/\.venv\/bin\/mynode.*ignored/);
    expect(repo.calls()).toEqual([]);
  });
});
