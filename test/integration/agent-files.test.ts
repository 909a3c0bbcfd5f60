// What forkflush does with the folders an agent wrote: real files, names and depths in a temp folder.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  cleanAgentFolder,
  cleanedNote,
  emptyFolder,
  MAX_CONTEXT_BYTES,
  MAX_CONTEXT_FILE_BYTES,
  removeTree,
} from '../../src/io/agent-files.js';

let tmp = '';
beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'ff-agent-files-'));
});
afterEach(() => removeTree(tmp));

/** Makes a name of raw bytes in `dir` (a shell does what JavaScript's strings cannot). */
function byteName(dir: string, printfName: string, kind: 'file' | 'dir' = 'file'): void {
  execFileSync('sh', ['-c', `cd "$1" && ${kind === 'dir' ? 'mkdir' : 'touch'} "$(printf '${printfName}')"`, 'sh', dir]);
}

/** A chain of `depth` folders named d (as deep as the shell can go: past PATH_MAX), a file at the bottom. */
function deepTree(dir: string, depth: number): void {
  execFileSync('sh', [
    '-c',
    `cd "$1" && i=0; while [ $i -lt ${depth} ]; do mkdir d && cd d || break; i=$((i+1)); done; echo x > bottom.txt`,
    'sh',
    dir,
  ]);
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
    truncateSync(join(tmp, 'sparse'), MAX_CONTEXT_FILE_BYTES + 1);

    const cleaned = await cleanAgentFolder(tmp);
    expect(cleaned).toEqual({ links: 2, names: 2, deep: 1, big: 1, emptied: 0 });
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
    const cleaned = await cleanAgentFolder(tmp, MAX_CONTEXT_BYTES);
    expect(cleaned.emptied).toBe(1);
    expect(readdirSync(tmp)).toEqual([]);
    expect(cleanedNote(cleaned)).toBe(
      'removed from the folders the agent wrote: everything in a context whose files passed 1024 MB in all',
    );
    // Under the total, nothing goes.
    writeFileSync(join(tmp, 'a'), '');
    truncateSync(join(tmp, 'a'), 250 * 1024 * 1024);
    expect((await cleanAgentFolder(tmp, MAX_CONTEXT_BYTES)).emptied).toBe(0);
    expect(readdirSync(tmp)).toEqual(['a']);
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
