// Protected globs mean what git's :(glob) pathspecs mean: each pattern is checked against what
// `git ls-files` itself selects in a real repository.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { guardedFolders, matchesGlob, mayHoldMatch } from '../../src/core/globs.js';

const FILES = [
  'grade.mjs',
  'a/grade.mjs',
  'tests/x',
  'tests/sub/y',
  'tests.md',
  'a/tests/z',
  'a/b/c/d.txt',
  '.github/autoresearch.yml',
  '.github/workflows/ci.yml',
  'data/[x].csv',
  'src/main.test.ts',
  'src/deep/more/util.test.ts',
];
const PATTERNS = [
  'tests',
  'tests/',
  'tests/*',
  'tests/**',
  '**/tests',
  '**/tests/**',
  'grade.mjs',
  '*.mjs',
  '**/*.mjs',
  'a/**/z',
  'a/**',
  'test?',
  't*s/x',
  '**',
  '.github/workflows/**',
  '.github/autoresearch.yml',
  'src/**/*.test.ts',
  '*/*.test.ts',
  'data/[[]x].csv',
  'tests/[a-x]',
  'tests/[!x]',
  'a/b',
  '.',
  './',
  './a/.',
  'a/./b',
  './tests//sub/',
  '*/.',
  '**/.',
  'tests/**/.',
  '**/./x',
  '*/./grade.mjs',
];

const dir = mkdtempSync(join(tmpdir(), 'forkflush-globs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
execFileSync('git', ['init', '-q', dir]);
for (const f of FILES) {
  mkdirSync(join(dir, dirname(f)), { recursive: true });
  writeFileSync(join(dir, f), f);
}
execFileSync('git', ['add', '-A'], { cwd: dir });

describe('protected globs', () => {
  it.each(PATTERNS)('%s selects what git selects', (pattern) => {
    const git = execFileSync('git', ['ls-files', '-z', '--', `:(glob)${pattern}`], { cwd: dir, encoding: 'utf8' })
      .split('\0')
      .filter(Boolean)
      .sort();
    expect(FILES.filter((f) => matchesGlob(f, pattern)).sort()).toEqual(git);
  });
});

describe('mayHoldMatch: the folders a walk of a large tree must list to find the protected files', () => {
  it("is the folders on the way to a glob's literal lead, and those below it", () => {
    const globs = ['grade.mjs', 'tests/unit/*.py', '.github/workflows/**'];
    const may = (folder: string) => mayHoldMatch(folder, globs);
    expect(['tests', 'tests/unit', 'tests/unit/deep', '.github', '.github/workflows/x'].filter(may)).toHaveLength(5);
    expect(['data', 'test', 'tests/e2e', 'grade', '.githubx', 'src/tests'].filter(may)).toEqual([]);
    // A glob that starts with a wildcard may match below any folder; a literal path names a folder too.
    expect(mayHoldMatch('vendor/x', ['**/*.py'])).toBe(true);
    expect(mayHoldMatch('vendor', ['*.py'])).toBe(true);
    expect(mayHoldMatch('checks/a', ['checks'])).toBe(true);
    // Every folder a walk skips holds no file the glob matches (checked against matchesGlob).
    const files = ['tests/unit/a.py', 'tests/e2e/b.py', '.github/workflows/ci.yml', 'data/grade.mjs', 'grade.mjs'];
    for (const f of files.filter((f) => globs.some((g) => matchesGlob(f, g))))
      for (let i = f.indexOf('/'); i > 0; i = f.indexOf('/', i + 1)) expect(may(f.slice(0, i)), f).toBe(true);
  });
});

describe('guardedFolders: where a file the tree lacks could be at a protected path', () => {
  const tree = ['grade.sh', 'checks/a.txt', 'checks/deep/b.txt', 'tests/test_a.py', 'src/x.ts', 'data/cases/1.txt'];
  it.each([
    // The glob's folder, when only its last part has wildcards.
    [['checks/*.txt'], ['checks']],
    // A literal path the tree has is pinned read-only itself; one it lacks guards its folder.
    [['tests/test_a.py'], []],
    [['tests/conftest.py'], ['tests']],
    // A literal folder the tree has is read-only whole: nothing above it is guarded for it.
    [['data/cases'], []],
    // A wildcard in a folder part: the literal folder and every folder below it.
    [['checks/**/*.txt'], ['checks', 'checks/deep']],
    [['data/**'], ['data', 'data/cases']],
    // Never the top folder, where graders write what they make, nor a folder the tree lacks.
    [['*.lock', 'grade.sh', '**/conftest.py', 'out/*.json'], []],
  ])('%j guards %j', (globs, folders) => {
    expect(guardedFolders(tree, globs)).toEqual(folders);
  });
});
