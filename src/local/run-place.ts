// Whether this machine can hold a run where the task is, said before anything is written: the run
// folder goes in the task's folder, and each episode's $FORKFLUSH_GRADE helper is a program in
// it; the dry run and the pre-flight work in the temp folder. A read-only checkout, a folder on a
// noexec mount (a hardened /home, a data disk) or a TMPDIR that is gone used to fail with a bare
// errno, or worse, crash every episode and blame the agent (test/integration/new-user-machines).
import { constants } from 'node:fs';
import { access, readFile, realpath, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isInside } from '../io/sandbox.js';

/** Each reason the run folder cannot be made under `taskDir`, or the temp folder used, with its fix. */
export async function runPlaceProblems(taskDir: string): Promise<string[]> {
  const problems: string[] = [];
  const temp = tmpdir();
  // os.tmpdir() reads TMPDIR from this process's environment.
  const named = process.env.TMPDIR ? `TMPDIR (${temp})` : `the temp folder ${temp}`;
  const tempDir = await stat(temp).catch(() => null);
  if (!tempDir?.isDirectory()) problems.push(`${named} is not a folder: create it, or set TMPDIR to one`);
  else if (!(await writable(temp))) problems.push(`${named} is not writable: set TMPDIR to a folder you can write`);
  const dir = await realpath(taskDir);
  if (!(await writable(dir)))
    problems.push(
      `${dir} is not writable (a read-only mount or checkout): forkflush keeps each run in its .forkflush folder; ` +
        'run it on a writable copy of the repository',
    );
  const mount = mountOf(await readFile('/proc/self/mountinfo', 'utf8').catch(() => ''), dir);
  if (mount?.options.includes('noexec'))
    problems.push(
      `${dir} is on ${mount.point}, mounted noexec: each episode's $FORKFLUSH_GRADE is a program in the run folder there, ` +
        'and could not run; run forkflush on a copy of the repository on a filesystem that runs programs',
    );
  return problems;
}

const writable = (path: string) =>
  access(path, constants.W_OK).then(
    () => true,
    () => false,
  );

/** The mount `path` is on, by /proc/self/mountinfo (`proc(5)`): its mount point and per-mount options. */
export function mountOf(mountinfo: string, path: string): { point: string; options: string[] } | null {
  let found: { point: string; options: string[] } | null = null;
  for (const line of mountinfo.split('\n')) {
    const fields = line.split(' ');
    const point = fields[4]?.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
    if (!point || !isInside(path, point)) continue;
    // The last mount of a point is the one seen there; a deeper point holds the path more closely.
    if (!found || point.length >= found.point.length) found = { point, options: (fields[5] ?? '').split(',') };
  }
  return found;
}
