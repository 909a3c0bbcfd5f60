// What a shell command in the config names in the repository, read from its words alone (no
// shell, no file system): the local pre-flight checks that those files are committed and exist,
// init proposes them as protected, and the config refuses a journal that is one of them.
// Paths here are POSIX, as in a shell command: absolute is a leading `/`.
const isAbsolute = (path: string) => path.startsWith('/');
const basename = (path: string) => path.slice(path.lastIndexOf('/') + 1);

/** Words of a shell command that look like paths in the repository (`node grade.mjs` names grade.mjs). */
export function namedPaths(command: string): string[] {
  return command
    .split(/[\s;&|()<>"'`]+/)
    .filter((w) => w && !w.startsWith('-') && !w.startsWith('$') && !w.includes('=') && !isAbsolute(w))
    .filter((w) => /[/.]/.test(w) && !/^\.\.?$/.test(w) && !w.startsWith('..') && !/^\d/.test(w))
    .map((w) => w.replace(/^\.\//, ''));
}

/** Interpreters whose first argument, when it is not a flag, is the script they run. */
const INTERPRETERS = new Set([
  'node',
  'python',
  'python3',
  'sh',
  'bash',
  'zsh',
  'ruby',
  'perl',
  'deno',
  'bun',
  'Rscript',
]);

/** The script a command hands its interpreter (`node grade.mjs`: grade.mjs; `sh -c '…'`: none), relative, or null. */
export function fileItRuns(command: string): string | null {
  const words = (command.split(/[;&|]/)[0] ?? '')
    .trim()
    .split(/\s+/)
    .filter((w) => !/^\w+=/.test(w));
  const [program, second, third] = words;
  // `./run.sh`: the program is the repository's file.
  if (program?.includes('/') && !isAbsolute(program) && !/^~|[$`'"(]/.test(program))
    return program.replace(/^\.\//, '');
  if (!program || !second || !INTERPRETERS.has(basename(program))) return null;
  // deno and bun name the script after a subcommand (`deno run x.ts`); any other one (`bun test`) runs none.
  const subcommand = SUBCOMMANDS.has(basename(program));
  const file = subcommand ? (second === 'run' ? third : undefined) : second;
  if (!file || /^[-~]|[$`'"(]/.test(file) || isAbsolute(file)) return null;
  const path = file.replace(/^\.\//, '');
  // `node .`: the repository itself.
  return path === '.' || path === '' ? null : path;
}

/** Interpreters whose first word is a subcommand: deno always, bun for a script it is told to run. */
const SUBCOMMANDS = new Set(['deno', 'bun']);
