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

/**
 * The dynamic loader's lists, split as ld.so splits them: an empty or relative entry is the
 * working directory again (`LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64` with it unset
 * starts with one), where an agent's `libselinux.so.1` would be loaded by forkflush's own find.
 * A bare library name in LD_PRELOAD is looked for in the loader's folders, so it stays.
 */
const LOADER_LISTS: Record<string, { split: RegExp; keep: (entry: string) => boolean }> = {
  LD_LIBRARY_PATH: { split: /[:;]/, keep: isAbsolute },
  LD_PRELOAD: { split: /[:\s]/, keep: (e) => isAbsolute(e) || !e.includes('/') },
  LD_AUDIT: { split: /:/, keep: (e) => isAbsolute(e) || !e.includes('/') },
  // glibc's: converters it loads, message catalogues it reads.
  GCONV_PATH: { split: /:/, keep: isAbsolute },
  NLSPATH: { split: /:/, keep: isAbsolute },
};

/** Variables that name one file or folder a program reads its config or code from: dropped when relative. */
const SINGLE_PATHS = [
  ...['HOME', 'XDG_CONFIG_HOME', 'GIT_CONFIG_GLOBAL', 'GIT_CONFIG_SYSTEM', 'GIT_EXEC_PATH', 'GIT_TEMPLATE_DIR'],
  ...['LOCPATH', 'BASH_ENV', 'ENV'],
];

/**
 * The environment every program forkflush starts gets: PATH's absolute folders only
 * (absolutePath), the loader's lists without an entry that names the working directory, and no
 * relative HOME or config path (git's global config would be a file of the workspace).
 */
export function withoutRelativePaths(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  let out = env;
  const set = (name: string, value: string | undefined) => {
    if (value === env[name]) return;
    if (out === env) out = { ...env };
    if (value === undefined) delete out[name];
    else out[name] = value;
  };
  if (env.PATH !== undefined) set('PATH', absolutePath(env.PATH));
  for (const name of SINGLE_PATHS) {
    const value = env[name];
    if (value !== undefined && !isAbsolute(value)) set(name, undefined);
  }
  for (const [name, list] of Object.entries(LOADER_LISTS)) {
    const value = env[name];
    if (value === undefined) continue;
    const kept = value.split(list.split).filter((e) => e !== '' && list.keep(e));
    set(name, kept.length === value.split(list.split).length ? value : kept.join(':') || undefined);
  }
  return out;
}
