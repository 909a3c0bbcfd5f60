// A CLI's login in an episode: its credential files copied from the user's home (or a secret) into
// the episode's CLI home for the run only, and whether a login is there at all.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** A credential file a CLI's login left in the user's own home, and where the episode's CLI looks for it. */
export interface LoginFile {
  /** In the user's CLI home (outside every sandbox; forkflush reads it, the agent never sees it there). */
  from: string;
  /** Or its content, from a variable (a repository secret on a runner). */
  fromEnv?: string;
  /** In the episode's CLI home. */
  to: string;
}

/**
 * Copies (never moves or links) a login's credential files into the episode's CLI home, mode 0600
 * (a variable with the content wins over the file): to be removed when the session ends, never to
 * travel on with the context. Returns the paths written.
 */
export async function installLogins(files: LoginFile[], env: NodeJS.ProcessEnv): Promise<string[]> {
  const installed: string[] = [];
  for (const f of files) {
    const fromEnv = f.fromEnv ? env[f.fromEnv]?.trim() : undefined;
    // The user's own file may be a symlink (a dotfiles manager's): it is outside every sandbox.
    const fromFile = fromEnv ? null : await readFile(f.from, 'utf8').catch(() => null);
    const text = fromEnv || fromFile;
    if (!text) continue;
    await mkdir(dirname(f.to), { recursive: true });
    await rm(f.to, { force: true });
    await writeFile(f.to, text, { mode: 0o600, flag: 'wx' });
    installed.push(f.to);
  }
  return installed;
}

/** Removes the copied login files; nothing goes back to the user's (the agent could write them; README, "Keys and logins"). */
export async function removeLogins(installed: string[]): Promise<void> {
  for (const path of installed) await rm(path, { force: true });
}

/** Whether a login's credential file is there, or its content is in its variable. */
export function hasLogin(files: LoginFile[], env: NodeJS.ProcessEnv): boolean {
  return files.some((f) => (f.fromEnv && env[f.fromEnv]?.trim()) || existsSync(f.from));
}

/** Whether any of these variables is set (`NAME=value`: to that value). */
export function anySet(names: readonly string[], env: NodeJS.ProcessEnv): boolean {
  return names.some((n) => {
    const [name, value] = n.split('=') as [string, string | undefined];
    return value === undefined ? Boolean(env[name]) : env[name] === value;
  });
}
