// Finding a program the way a shell would, without running anything: for the pre-flight (is the
// agent's CLI installed?) and the Action (which CLI's --version to ask); and the PATH every
// program forkflush starts is looked up on.
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';

/** Whether the file is a regular file this process may execute. */
export async function isExecutable(file: string): Promise<boolean> {
  const s = await stat(file).catch(() => null);
  if (!s?.isFile()) return false;
  return access(file, constants.X_OK).then(
    () => true,
    () => false,
  );
}

/**
 * An absolute path as it is, or the first executable of that name in PATH's absolute folders; a
 * relative path (`./x`, `bin/x`) is never looked up (it would name a file of the workspace).
 */
export async function findExecutable(name: string, path: string): Promise<string | null> {
  if (isAbsolute(name)) return (await isExecutable(name)) ? name : null;
  if (name.includes('/') || name === '') return null;
  for (const dir of path.split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    const file = join(dir, name);
    if (await isExecutable(file)) return file;
  }
  return null;
}

/** What a PATH of no absolute folder becomes: the system's own (glibc's default). */
const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin';

/**
 * PATH's absolute folders only. An empty or relative entry (`bin`, `./node_modules/.bin`, a
 * leading `:`) names a folder of the working directory, which for forkflush's commands is a
 * workspace the agent wrote or the judge's checkout of it: a `bin/bwrap` or `bin/find` committed
 * there would run in place of forkflush's own, outside the sandbox, or in place of the grader's.
 */
export function absolutePath(path: string): string {
  const kept = path.split(delimiter).filter(isAbsolute);
  return kept.length > 0 ? kept.join(delimiter) : SYSTEM_PATH;
}

/** The environment with PATH's absolute folders only (absolutePath): what every program forkflush starts gets. */
export function withAbsolutePath(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (env.PATH === undefined) return env;
  const path = absolutePath(env.PATH);
  return path === env.PATH ? env : { ...env, PATH: path };
}
