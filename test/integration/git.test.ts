// forkflush's git door (io/git.ts) against real git in a temp folder.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Git } from '../../src/io/git.js';

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
