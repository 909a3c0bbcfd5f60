// Agent contexts on a forge: sealed per run and episode, and unpacked only inside their folder.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  contextStore,
  decryptContext,
  encryptContext,
  packFolder,
  parseContextKey,
  unpackFolder,
} from '../../src/action/contexts.js';

describe('agent contexts', () => {
  it('round-trip through a sealed blob, for their own run and episode only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'forkflush-ctx-'));
    mkdirSync(join(dir, 'home', 'sessions'), { recursive: true });
    writeFileSync(join(dir, 'home', 'sessions', 'a.jsonl'), '{"turn":1}\n');
    writeFileSync(join(dir, 'session.json'), '{}');
    const key = randomBytes(32);
    const sealed = encryptContext(key, 'issue-7', 'r1.b0', await packFolder(dir));
    expect(sealed.toString('latin1')).not.toContain('turn');
    expect(decryptContext(key, 'issue-7', 'r2.b0', sealed)).toBeNull();
    expect(decryptContext(randomBytes(32), 'issue-7', 'r1.b0', sealed)).toBeNull();
    const out = mkdtempSync(join(tmpdir(), 'forkflush-ctx-'));
    await unpackFolder(decryptContext(key, 'issue-7', 'r1.b0', sealed) as Buffer, out);
    expect(readFileSync(join(out, 'home', 'sessions', 'a.jsonl'), 'utf8')).toBe('{"turn":1}\n');
  });

  it('refuse an archive path that leaves the folder', async () => {
    const name = Buffer.from('../escaped.txt');
    const head = Buffer.alloc(13);
    head.writeUInt32BE(name.length, 0);
    head.writeBigUInt64BE(1n, 5);
    const archive = Buffer.concat([head.subarray(0, 4), name, head.subarray(4), Buffer.from('x')]);
    const out = mkdtempSync(join(tmpdir(), 'forkflush-ctx-'));
    await expect(unpackFolder(archive, join(out, 'inner'))).rejects.toThrow(/outside its folder/);
    expect(existsSync(join(out, 'escaped.txt'))).toBe(false);
  });

  it('are kept encrypted with a key, as files in a private repository, else not at all', () => {
    const key = randomBytes(32);
    expect(contextStore(key, false)).toBe('encrypted');
    expect(contextStore(null, true)).toBe('plain');
    expect(contextStore(null, false)).toBe('none');
    expect(contextStore(null, null)).toBe('none');
  });

  it('take a key of 32 bytes in base64 or hex, and nothing else', () => {
    const key = randomBytes(32);
    expect(parseContextKey(key.toString('base64'))).toEqual(key);
    expect(parseContextKey(key.toString('hex'))).toEqual(key);
    expect(() => parseContextKey(randomBytes(16).toString('base64'))).toThrow(/32 random bytes/);
    expect(() => parseContextKey('correct horse battery staple')).toThrow(/openssl rand -base64 32/);
  });
});
