// A round's view of the repository's objects (local/round-objects.ts), against real git.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dropRoundObjects, linkObjects, roundObjects } from '../../src/local/round-objects.js';

async function repo() {
  const dir = await mkdtemp(join(tmpdir(), 'forkflush-round-objects-'));
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, encoding: 'utf8' }).trim();
  git('init', '-q', '--initial-branch=main');
  writeFileSync(join(dir, 'a.txt'), 'a\n');
  git('add', '-A');
  git('commit', '-qm', 'base');
  const objects = join(dir, '.git', 'objects');
  /** Whether an object can be read through `store` alone. */
  const has = (store: string, id: string) =>
    spawnSync('git', ['cat-file', '-e', id], {
      cwd: dir,
      env: { ...process.env, GIT_OBJECT_DIRECTORY: store, GIT_ALTERNATE_OBJECT_DIRECTORIES: '' },
    }).status === 0;
  const blob = (text: string) =>
    execFileSync('git', ['hash-object', '-w', '--stdin'], { cwd: dir, input: text }).toString().trim();
  return { dir, git, objects, has, blob, base: git('rev-parse', 'HEAD'), root: join(dir, 'views') };
}

describe('roundObjects', () => {
  it('links the objects as they are when first asked; what is written later is not in it, asked again or not', async () => {
    const r = await repo();
    const view = await roundObjects(r.root, 3, linkObjects(r.objects));
    if (!('dir' in view)) throw new Error(view.note);
    expect(view.dir).toBe(join(r.root, 'round-3'));
    expect(r.has(view.dir, r.base)).toBe(true);
    const later = r.blob('a sibling wrote this\n');
    expect(r.has(r.objects, later)).toBe(true);
    expect(r.has(view.dir, later)).toBe(false);
    expect(await roundObjects(r.root, 3, linkObjects(r.objects))).toEqual(view);
    expect(r.has(view.dir, later)).toBe(false);
    await dropRoundObjects(r.root, 3);
    expect(existsSync(view.dir)).toBe(false);
  });

  it('leaves nothing half-made when its filling fails, and says why', async () => {
    const r = await repo();
    const view = await roundObjects(r.root, 0, async (dir) => {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'half'), '');
      throw new Error('pack-objects died\nmore');
    });
    expect(view).toEqual({
      note: expect.stringContaining('could not be linked into the run folder (pack-objects died)'),
    });
    expect(existsSync(join(r.root, 'round-0'))).toBe(false);
    expect(existsSync(join(r.root, 'round-0.partial'))).toBe(false);
  });

  it("names a clone's alternates by their absolute paths (a relative one is relative to the objects folder)", async () => {
    const r = await repo();
    const other = join(r.dir, 'elsewhere', 'objects');
    mkdirSync(other, { recursive: true });
    writeFileSync(join(r.objects, 'info', 'alternates'), '# a comment\n../elsewhere/objects\n');
    const view = await roundObjects(r.root, 0, linkObjects(r.objects));
    if (!('dir' in view)) throw new Error(view.note);
    expect(readFileSync(join(view.dir, 'info', 'alternates'), 'utf8')).toBe(
      join(r.dir, '.git', 'elsewhere', 'objects'),
    );
  });

  it('says so, and leaves nothing half-made, when the view cannot be made', async () => {
    const r = await repo();
    writeFileSync(r.root, 'a file where the views folder would be\n');
    const view = await roundObjects(r.root, 0, linkObjects(r.objects));
    expect(view).toEqual({
      note: expect.stringMatching(
        /could not be linked into the run folder \(ENOTDIR\): this episode could read its siblings' work/,
      ),
    });
  });
});
