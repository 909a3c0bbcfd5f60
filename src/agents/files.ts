// What the specs read a CLI's output with (its JSON lines, its figures), and the copying of CLI
// logins into an episode's home. Reading the files themselves is io/agent-reads.ts.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** The JSON objects of JSONL text; lines that are not JSON objects are skipped. */
export function* jsonLines(text: string): Generator<Record<string, unknown>> {
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      const v: unknown = JSON.parse(t);
      if (isRecord(v)) yield v;
    } catch {
      // A torn or foreign line.
    }
  }
}

/** The last text `read` finds in the JSON lines of `text` that is not blank (a final message), or null. */
export function lastText(text: string, read: (e: Record<string, unknown>) => unknown): string | null {
  let out: string | null = null;
  for (const e of jsonLines(text)) {
    const v = read(e);
    if (typeof v === 'string' && v.trim() !== '') out = v;
  }
  return out;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A count as a CLI reports it: a finite non-negative number, else 0. */
export function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

/** A reported figure: a finite non-negative number, else null (absent or nonsense). */
export function figure(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;
}

/** A credential file a CLI's login left in the user's own home, and where the episode's CLI looks for it. */
export interface LoginFile {
  /** In the user's CLI home (outside every sandbox; forkflush reads it, the agent never sees it there). */
  from: string;
  /** Or its content, from a variable (a repository secret on a runner). */
  fromEnv?: string;
  /** In the episode's CLI home. */
  to: string;
}

/** A login file copied into an episode's CLI home. */
export interface InstalledLogin {
  to: string;
}

/**
 * Copies (never moves or links) a login's credential files into the episode's CLI home, mode 0600
 * (a variable with the content wins over the file): to be removed when the session ends, never to
 * travel on with the context.
 */
export async function installLogins(files: LoginFile[], env: NodeJS.ProcessEnv): Promise<InstalledLogin[]> {
  const installed: InstalledLogin[] = [];
  for (const f of files) {
    const fromEnv = f.fromEnv ? env[f.fromEnv]?.trim() : undefined;
    // The user's own file may be a symlink (a dotfiles manager's): it is outside every sandbox.
    const fromFile = fromEnv ? null : await readFile(f.from, 'utf8').catch(() => null);
    const text = fromEnv || fromFile;
    if (!text) continue;
    await mkdir(dirname(f.to), { recursive: true });
    await rm(f.to, { force: true });
    await writeFile(f.to, text, { mode: 0o600, flag: 'wx' });
    installed.push({ to: f.to });
  }
  return installed;
}

/** Removes the copied login files; nothing goes back to the user's (the agent could write them; README, "Keys and logins"). */
export async function removeLogins(installed: InstalledLogin[]): Promise<void> {
  for (const login of installed) await rm(login.to, { force: true });
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
