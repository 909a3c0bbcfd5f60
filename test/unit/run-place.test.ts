// The mount a path is on, read from /proc/self/mountinfo (proc(5)): the run's place is refused on a noexec one.
import { describe, expect, it } from 'vitest';
import { mountOf } from '../../src/local/run-place.js';

const MOUNTINFO = [
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  '30 22 0:26 / /home rw,nosuid,nodev,noexec,relatime shared:9 - ext4 /dev/sdb1 rw',
  '31 30 0:27 / /home/a\\040b rw,relatime shared:10 - tmpfs tmpfs rw',
  '32 22 0:28 / /homework rw,relatime shared:11 - tmpfs tmpfs rw',
].join('\n');

describe('mountOf', () => {
  it('finds the deepest mount holding the path, with its per-mount options', () => {
    expect(mountOf(MOUNTINFO, '/home/alice/task')).toEqual({
      point: '/home',
      options: ['rw', 'nosuid', 'nodev', 'noexec', 'relatime'],
    });
    expect(mountOf(MOUNTINFO, '/srv/task')?.point).toBe('/');
  });

  it('reads an escaped space in a mount point, and never takes a mount for a prefix of a name', () => {
    expect(mountOf(MOUNTINFO, '/home/a b/task')?.point).toBe('/home/a b');
    expect(mountOf(MOUNTINFO, '/homework/task')?.point).toBe('/homework');
  });

  it('is null without a mount table', () => {
    expect(mountOf('', '/x')).toBeNull();
  });
});
