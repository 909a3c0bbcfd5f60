// How forkflush tells a full disk from the words of what failed (worker/episode-errors.ts): the
// system's and git's own, which do not always say why.
import { describe, expect, it } from 'vitest';
import { diskFullLine } from '../../src/worker/episode-errors.js';

describe('diskFullLine', () => {
  it.each([
    ['ENOSPC: no space left on device, write'],
    ["error: unable to write file 'judge.mjs'"],
    ["fatal: couldn't write '/repo/.git/refs/heads/x.lock'"],
    ["fatal: sha1 file '/repo/.git/index.lock' write error. Out of diskspace"],
    ['write /x: disk quota exceeded'],
  ])('finds %j', (line) => {
    expect(diskFullLine(`git checkout failed (exit 128):\n${line}\nmore`)).toBe(line);
  });

  it('finds nothing in other failures', () => {
    expect(diskFullLine('fatal: not a git repository\nPermission denied')).toBeNull();
  });
});
