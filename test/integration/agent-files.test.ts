// What forkflush does with the folders an agent wrote: real files, names and depths in a temp folder.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CONTEXT_FILE_MAX_BYTES, CONTEXT_MAX_BYTES } from '../../src/core/bounds.js';
import {
  CONTEXT_LIMITS,
  cleanAgentFolder,
  cleanedNote,
  emptyFolder,
  removeTree,
  sweepTree,
} from '../../src/io/agent-files.js';
import { Git } from '../../src/io/git.js';

let tmp = '';
beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'ff-agent-files-'));
});
afterEach(() => removeTree(tmp));

/** Makes a name of raw bytes in `dir` (a shell does what JavaScript's strings cannot). */
function byteName(dir: string, printfName: string, kind: 'file' | 'dir' = 'file'): void {
  execFileSync('sh', ['-c', `cd "$1" && ${kind === 'dir' ? 'mkdir' : 'touch'} "$(printf '${printfName}')"`, 'sh', dir]);
}

/**
 * A chain of `depth` folders named d (past PATH_MAX), a file at the bottom: a few `mkdir -p` of
 * 500 levels each, then `cd -P` into them (a process per level took a minute on a busy machine).
 */
function deepTree(dir: string, depth: number): void {
  const steps: string[] = [];
  for (let left = depth; left > 0; left -= 500) {
    const chunk = 'd/'.repeat(Math.min(left, 500));
    steps.push(`mkdir -p ${chunk} && cd -P ${chunk}`);
  }
  execFileSync('sh', ['-c', `cd "$1" && ${steps.join(' && ')} && echo x > bottom.txt`, 'sh', dir]);
}

describe('cleanAgentFolder', () => {
  it('removes links, FIFOs, names that are not UTF-8, too-deep folders and huge files; keeps the rest', async () => {
    writeFileSync(join(tmp, 'kept.txt'), 'kept\n');
    mkdirSync(join(tmp, 'sub'));
    writeFileSync(join(tmp, 'sub', 'also.txt'), 'kept\n');
    writeFileSync(join(tmp, 'ünïcode ok.txt'), 'kept\n');
    symlinkSync('/etc/passwd', join(tmp, 'sub', 'link'));
    execFileSync('mkfifo', [join(tmp, 'fifo')]);
    byteName(tmp, 'bad\\377name');
    byteName(tmp, 'bad\\375dir', 'dir');
    deepTree(join(tmp, 'sub'), 1100);
    writeFileSync(join(tmp, 'sparse'), '');
    truncateSync(join(tmp, 'sparse'), CONTEXT_FILE_MAX_BYTES + 1);

    const cleaned = await cleanAgentFolder(tmp);
    expect(cleaned).toEqual({ links: 2, names: 2, deep: 1, big: 1, emptied: 0, crowded: 0, traps: 0, trapPaths: [] });
    expect(readdirSync(tmp).sort()).toEqual(['kept.txt', 'sub', 'ünïcode ok.txt']);
    expect(readdirSync(join(tmp, 'sub')).sort()).toEqual(['also.txt', 'd']);
    // What is left can be copied and removed like any folder.
    execFileSync('cp', ['-R', tmp, `${tmp}-copy`]);
    await removeTree(`${tmp}-copy`);
    expect(cleanedNote(cleaned)).toBe(
      'removed from the folders the agent wrote: 2 entries whose names are not UTF-8, 1 folders nested deeper than 2048 bytes of path, 1 files larger than 256 MB',
    );
  });

  it('empties a folder whose files pass the total it may hold, sparse ones by their apparent size', async () => {
    mkdirSync(join(tmp, 'sub'));
    for (let i = 0; i < 5; i++) {
      writeFileSync(join(tmp, 'sub', `part${i}`), '');
      truncateSync(join(tmp, 'sub', `part${i}`), 250 * 1024 * 1024);
    }
    writeFileSync(join(tmp, 'small.txt'), 'x');
    const cleaned = await cleanAgentFolder(tmp, CONTEXT_LIMITS);
    expect(cleaned.emptied).toBe(1);
    expect(readdirSync(tmp)).toEqual([]);
    expect(cleanedNote(cleaned)).toBe(
      'removed from the folders the agent wrote: everything in a context whose files passed 1024 MB in all',
    );
    // Under the total, nothing goes.
    writeFileSync(join(tmp, 'a'), '');
    truncateSync(join(tmp, 'a'), 250 * 1024 * 1024);
    expect((await cleanAgentFolder(tmp, CONTEXT_LIMITS)).emptied).toBe(0);
    expect(readdirSync(tmp)).toEqual(['a']);
  });

  it('empties a folder of more entries than it may hold, empty folders too, without walking them all', async () => {
    // 300,000 empty folders cost no bytes, and took two minutes and 1.2 GB of disk per copy (found by a review).
    for (let i = 0; i < 30; i++) mkdirSync(join(tmp, `d${i}`, 'e', 'f'), { recursive: true });
    writeFileSync(join(tmp, 'session.json'), '{}');
    const cleaned = await cleanAgentFolder(tmp, { bytes: CONTEXT_MAX_BYTES, entries: 50 });
    expect(cleaned).toMatchObject({ crowded: 1, emptied: 0 });
    expect(readdirSync(tmp)).toEqual([]);
    expect(cleanedNote(cleaned)).toBe(
      'removed from the folders the agent wrote: everything in a context of more than 100,000 files and folders',
    );
    // At the bound, nothing goes.
    for (let i = 0; i < 10; i++) mkdirSync(join(tmp, `d${i}`, 'e'), { recursive: true });
    expect((await cleanAgentFolder(tmp, { bytes: CONTEXT_MAX_BYTES, entries: 20 })).crowded).toBe(0);
    expect(readdirSync(tmp)).toHaveLength(10);
  });

  it('says nothing when there was nothing unusual', async () => {
    writeFileSync(join(tmp, 'a'), 'a');
    expect(cleanedNote(await cleanAgentFolder(tmp))).toBeNull();
  });
});

describe('removeTree and emptyFolder', () => {
  it('remove trees deeper than PATH_MAX and names of any bytes', async () => {
    const dir = join(tmp, 'work');
    mkdirSync(dir);
    deepTree(dir, 2200);
    // Past PATH_MAX: no single path names the bottom file.
    expect(execFileSync('find', [dir, '-name', 'bottom.txt'], { encoding: 'utf8' }).trim().length).toBeGreaterThan(
      4096,
    );
    byteName(dir, 'x\\377y');
    writeFileSync(join(dir, 'plain'), 'p');
    await emptyFolder(dir);
    expect(readdirSync(dir)).toEqual([]);
    deepTree(dir, 2200);
    await removeTree(dir);
    expect(existsSync(dir)).toBe(false);
    await removeTree(join(tmp, 'never-there'));
  });
});

describe('sweepTree', () => {
  /** Runs a shell script in `dir`. */
  const sh = (dir: string, script: string) => execFileSync('sh', ['-c', script], { cwd: dir, stdio: 'pipe' });

  it('removes what would stall git or lead it out of the tree, at any depth and of any name; keeps the rest', async () => {
    const outside = join(tmp, 'outside');
    const dir = join(tmp, 'tree');
    mkdirSync(outside);
    mkdirSync(dir);
    sh(outside, 'mkfifo fifo && mkdir -p g/objects g/refs && mkfifo g/HEAD');
    sh(
      dir,
      [
        // Special files, where git opens files by name and elsewhere.
        'mkfifo .gitignore && mkdir -p a/b && mkfifo a/b/.gitattributes && mkfifo "$(printf \'pipe\\377\')"',
        `node -e "require('net').createServer().listen('sock', () => process.exit(0))"`,
        'mkdir -p n1/.git/objects n1/.git/refs && mkfifo n1/.git/HEAD',
        // Links at git's names, a .git that is a link or a file, and links or a commondir in a .git.
        'ln -s /dev/zero a/.gitignore && ln -s ../outside/fifo .gitmodules',
        `mkdir n2 && echo "gitdir: ${outside}/g" > n2/.git && mkdir n3 && ln -s ${outside}/g n3/.git`,
        `mkdir -p n4/.git/refs/heads && echo 'ref: refs/heads/main' > n4/.git/HEAD && ln -s ${outside}/fifo n4/.git/refs/heads/main`,
        `mkdir -p n5/.git/objects n5/.git/refs && echo 'ref: refs/heads/main' > n5/.git/HEAD && echo ${outside}/g > n5/.git/commondir`,
        // Kept: files, links that git records as text (in the tree, absolute, leaving it), the files of a
        // real nested repository (its .git goes: git would record the folder as a link to its commit).
        'echo kept > kept.txt && mkdir docs && ln -s ../kept.txt docs/link && ln -s /usr/share abs && ln -s ../../.. up',
        'git init -q vendor && echo v > vendor/v.txt && echo ignored > a/.gitignore-not',
      ].join(' && '),
    );
    // A FIFO past PATH_MAX: no single path names it.
    const chunk = 'd/'.repeat(700);
    sh(
      dir,
      `mkdir deep && cd deep && for i in 1 2 3; do mkdir -p ${chunk} && cd -P ${chunk} || exit 1; done; mkfifo bottom-pipe`,
    );

    const { cleaned, paths } = await sweepTree(dir);
    const deepPipe = `deep/${'d/'.repeat(2100)}bottom-pipe`;
    expect(paths.map((p) => (p === deepPipe ? 'the deep one' : p)).sort()).toEqual(
      [
        'the deep one',
        '.gitignore',
        '.gitmodules',
        'a/.gitignore',
        'a/b/.gitattributes',
        'n1/.git/HEAD',
        'n2/.git',
        'n3/.git',
        'n4/.git/refs/heads/main',
        'n5/.git/commondir',
        'pipe\ufffd',
        'sock',
        // The .git folders of nested repositories, once their traps are gone.
        'n1/.git',
        'n4/.git',
        'n5/.git',
        'vendor/.git',
      ].sort(),
    );
    expect(cleaned).toMatchObject({ traps: 16, links: 0 });
    expect(cleaned.trapPaths).toHaveLength(3);
    expect(cleanedNote(cleaned)).toMatch(
      /^removed from the folders the agent wrote: 16 special files or git redirects that could stall forkflush's git \(".*", ".*", ".*", \.\.\.\)$/,
    );
    expect(readdirSync(dir).sort()).toEqual([
      'a',
      'abs',
      'deep',
      'docs',
      'kept.txt',
      'n1',
      'n2',
      'n3',
      'n4',
      'n5',
      'up',
      'vendor',
    ]);
    expect(readdirSync(join(dir, 'vendor'))).toEqual(['v.txt']);
    // What is left, git reads without waiting on anything (but past PATH_MAX, which it cannot name).
    await removeTree(join(dir, 'deep'));
    const git = new Git(dir, { timeoutMs: 10_000 });
    await git.exec(['init', '-q']);
    const status = (await git.out(['status', '--porcelain', '--untracked-files=all'])).split('\n');
    expect(status).toEqual(
      expect.arrayContaining(['?? abs', '?? docs/link', '?? up', '?? kept.txt', '?? vendor/v.txt']),
    );
  });

  it('sweeps folders the agent locked against itself, and says nothing when there was nothing', async () => {
    sh(tmp, 'mkdir -p locked/in && mkfifo locked/in/.gitignore && echo x > locked/in/x && chmod 0 locked/in locked');
    const { paths } = await sweepTree(tmp);
    expect(paths).toEqual(['locked/in/.gitignore']);
    expect(readdirSync(join(tmp, 'locked', 'in'))).toEqual(['x']);
    expect(cleanedNote((await sweepTree(tmp)).cleaned)).toBeNull();
  });
});
