// forkflush's git door (io/git.ts) against real git in a temp folder.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GIT_TIMEOUT_MS } from '../../src/core/bounds.js';
import { Git, GitStalledError, GitStoppedError } from '../../src/io/git.js';

async function repo(): Promise<{ git: Git; dir: string; a: string; b: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'forkflush-git-'));
  const sh = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, encoding: 'utf8' }).trim();
  sh('init', '-q', '--initial-branch=main');
  sh('commit', '-q', '--allow-empty', '-m', 'a');
  const a = sh('rev-parse', 'HEAD');
  sh('commit', '-q', '--allow-empty', '-m', 'b');
  return { git: new Git(dir), dir, a, b: sh('rev-parse', 'HEAD') };
}

describe('casRef', () => {
  it('moves a ref that is where it was expected, and answers false for one that is elsewhere', async () => {
    const { git, a, b } = await repo();
    expect(await git.casRef('refs/heads/x', a, null, 'test')).toBe(true);
    expect(await git.casRef('refs/heads/x', b, a, 'test')).toBe(true);
    // A replay: the ref already moved on.
    expect(await git.casRef('refs/heads/x', b, a, 'test')).toBe(false);
    expect(await git.casRef('refs/heads/x', a, null, 'test')).toBe(false);
    expect(await git.revParse('refs/heads/x')).toBe(b);
  });

  it('throws when git fails with the ref where it was expected (a lock, a full disk): nobody moved it', async () => {
    const { git, dir, a, b } = await repo();
    await git.casRef('refs/heads/x', a, null, 'test');
    writeFileSync(join(dir, '.git', 'refs', 'heads', 'x.lock'), '');
    await expect(git.casRef('refs/heads/x', b, a, 'test')).rejects.toThrow(
      /update-ref .* refs\/heads\/x .* failed \(exit 128\)/,
    );
    expect(await git.revParse('refs/heads/x')).toBe(a);
  });
});

describe('bounds', () => {
  /** Live git processes working in `dir`. */
  const gitsIn = (dir: string) =>
    readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return readlinkSync(`/proc/${p}/cwd`) === dir && readFileSync(`/proc/${p}/cmdline`, 'utf8').startsWith('git');
        } catch {
          return false;
        }
      });

  it('a git blocked on a FIFO is stopped at its bound: the error says it stalled, on what, and no git is left', async () => {
    const { dir } = await repo();
    execFileSync('mkfifo', [join(dir, '.gitignore')]);
    const started = Date.now();
    const stalled = await new Git(dir, { timeoutMs: 400 }).exec(['add', '--all'], { check: false }).catch((e) => e);
    expect(stalled).toBeInstanceOf(GitStalledError);
    expect(stalled.message).toBe(
      'forkflush\'s git stalled: `git add --all` did not answer in 400 ms (it was waiting to open ".gitignore")',
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(gitsIn(dir)).toEqual([]);
  });

  it('a git stopped by the signal ends within seconds, as stopped, whatever its bound', async () => {
    const { dir } = await repo();
    execFileSync('mkfifo', [join(dir, '.gitignore')]);
    const stop = new AbortController();
    setTimeout(() => stop.abort('interrupted'), 300);
    const started = Date.now();
    const stopped = await new Git(dir, { signal: stop.signal }).exec(['status'], { check: false }).catch((e) => e);
    expect(stopped).toBeInstanceOf(GitStoppedError);
    expect(stopped.message).toMatch(/^git status failed \(exit null\): stopped \(interrupted\)/);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(gitsIn(dir)).toEqual([]);
  });

  it('every command is bounded by default, and `at` keeps the bound and the signal', () => {
    expect(GIT_TIMEOUT_MS).toBe(600_000);
    const stop = new AbortController();
    const git = new Git('/', { signal: stop.signal, timeoutMs: 5 });
    expect(git.at('/tmp').options).toEqual({ signal: stop.signal, timeoutMs: 5 });
  });
});
