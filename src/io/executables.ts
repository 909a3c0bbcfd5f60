// Finding a program the way a shell would, without running anything: for the pre-flight (is the
// agent's CLI installed?) and the Action (which CLI's --version to ask).
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
