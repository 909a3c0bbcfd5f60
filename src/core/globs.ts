// Which repository paths a protected glob covers, as git's `:(glob)` pathspecs do: `*` and `?`
// stay within one path component, `**` spans components, `[...]` is a class; a pattern without
// wildcards names a path or everything under a folder. The app needs this where it has no git
// (it checks a result's tree through the API); test/unit/globs.test.ts holds it to git's answers.

const WILDCARD = /[*?[]/;

/**
 * A glob as git reads it: empty and `.` components dropped (`.` and `./` are the whole tree,
 * `./a//b/.` is `a/b`), but a last `.` after a wildcard stays, and matches nothing, as in git.
 */
export function normalGlob(glob: string): string {
  const parts = glob.split('/').filter((part) => part !== '');
  const last = parts.length - 1;
  const wild = parts.findIndex((part) => WILDCARD.test(part));
  return parts.filter((part, i) => part !== '.' || (i === last && wild !== -1 && wild < i)).join('/');
}

export function matchesGlob(path: string, glob: string): boolean {
  const pattern = normalGlob(glob);
  if (pattern === '') return true;
  if (!WILDCARD.test(pattern)) return path === pattern || path.startsWith(`${pattern}/`);
  return globRegExp(pattern).test(path);
}

export function matchesAny(path: string, globs: readonly string[]): boolean {
  return globs.some((g) => matchesGlob(path, g));
}

/**
 * Whether a folder may hold a path one of the globs matches: it lies on the way to a glob's literal
 * leading folders, or below them (a glob that starts with a wildcard: any folder may).
 */
export function mayHoldMatch(folder: string, globs: readonly string[]): boolean {
  return globs.some((glob) => {
    const parts = normalGlob(glob).split('/');
    const wild = parts.findIndex((p) => WILDCARD.test(p));
    const lead = (wild === -1 ? parts : parts.slice(0, wild)).join('/');
    return lead === '' || `${lead}/`.startsWith(`${folder}/`) || folder.startsWith(`${lead}/`);
  });
}

const cache = new Map<string, RegExp>();

function globRegExp(pattern: string): RegExp {
  const known = cache.get(pattern);
  if (known) return known;
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    const atStart = i === 0 || pattern[i - 1] === '/';
    if (c === '*' && pattern[i + 1] === '*' && atStart && (i + 2 === pattern.length || pattern[i + 2] === '/')) {
      // A whole component of `**`: any number of folders (at the end: anything below).
      if (i + 2 === pattern.length) re += '.*';
      else re += '(?:[^/]*/)*';
      i += 2;
    } else if (c === '*') {
      while (pattern[i + 1] === '*') i++;
      re += '[^/]*';
    } else if (c === '?') {
      re += '[^/]';
    } else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end === -1) {
        re += '\\[';
      } else {
        let body = pattern.slice(i + 1, end);
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        re += `[${body.replace(/\\/g, '\\\\')}]`;
        i = end;
      }
    } else {
      re += c.replace(/[.+^${}()|\\]/g, '\\$&');
    }
  }
  // `s`: `**` matches any character as git's does, a carriage return or a newline in a name too.
  const compiled = new RegExp(`^${re}$`, 's');
  cache.set(pattern, compiled);
  return compiled;
}

/**
 * Files that run without anyone asking once a result is merged or its branch is checked out: CI of
 * any forge, git hooks and their managers, what an editor or a shell runs on opening the folder,
 * submodules and git attributes. A result that changes one is said to the person who merges it.
 */
export const AUTOMATION = [
  ...['.github/workflows/**', '.github/actions/**', '.gitlab-ci.yml', '.gitea/workflows/**', '.forgejo/workflows/**'],
  ...['.circleci/**', '.travis.yml', 'azure-pipelines.yml', 'bitbucket-pipelines.yml', '.buildkite/**', 'Jenkinsfile'],
  ...['.drone.yml', '.woodpecker.yml', '.woodpecker/**'],
  // Hooks a hook manager installs from the tree, and the folders hooks are kept in by convention.
  ...[
    '.husky/**',
    '.githooks/**',
    '.pre-commit-config.yaml',
    ...['lefthook', '.lefthook', 'lefthook-local', '.lefthook-local'].flatMap((n) => [`${n}.yml`, `${n}.yaml`]),
  ],
  // What an editor or a shell runs on opening the folder (VS Code's settings name programs its
  // extensions run, and can let its agent run commands unasked).
  ...['.envrc', '.vscode/**', '.devcontainer/**', '.devcontainer.json'],
  // Coding agents' project settings: hooks and MCP servers that run when one starts in the folder.
  ...['.claude/**', '.mcp.json', '.gemini/**', '.cursor/**', '.qwen/**', '.codex/**', '.opencode/**'],
  ...['opencode.json', 'opencode.jsonc', '.aider.conf.yml'],
  // Package managers' settings that name programs they run (script-shell, yarnPath, pnpm's hooks).
  ...['.npmrc', '.yarnrc', '.yarnrc.yml', '.pnpmfile.cjs'],
  ...['.gitmodules', '**/.gitattributes'],
];

/** The paths of AUTOMATION a tree added, changed or removed against another (each a listing of its files). */
export function automationChanged(
  before: readonly { path: string; sha: string; mode: string }[],
  after: readonly { path: string; sha: string; mode: string }[],
): string[] {
  const was = new Map(before.map((f) => [f.path, `${f.mode} ${f.sha}`]));
  const now = new Map(after.map((f) => [f.path, `${f.mode} ${f.sha}`]));
  const paths = [...new Set([...was.keys(), ...now.keys()])].sort();
  return paths.filter((path) => was.get(path) !== now.get(path) && matchesAny(path, AUTOMATION));
}

/**
 * What a run on a forge protects besides grader.protected: the config file it started with, and
 * the workflows (a job's token may not push them, and CI is no part of an agent's task).
 */
export function forgeAlsoProtected(configPath: string): string[] {
  return [configPath, '.github/workflows/**'];
}

/**
 * The folders of a tree in which a file the tree does not have could match a protected glob: the
 * glob's folder where only its last part has wildcards (`checks/*.txt`: checks), or a literal path
 * the tree lacks (`tests/conftest.py`: tests); its literal folder and every folder of the tree
 * below it where a folder part has them (`checks/**` + `/*.txt`). Not the top folder (nor a glob
 * that starts with a wildcard), where graders write what they make. All of them: one left out
 * would be where a forgery goes (the tree's listing is bounded, so they are too).
 */
export function guardedFolders(files: readonly string[], globs: readonly string[]): string[] {
  const folders = new Set<string>();
  for (const f of files) for (let i = f.indexOf('/'); i > 0; i = f.indexOf('/', i + 1)) folders.add(f.slice(0, i));
  const present = new Set(files);
  const guarded = new Set<string>();
  for (const glob of globs) {
    const parts = normalGlob(glob).split('/');
    const wild = parts.findIndex((p) => /[*?[{]/.test(p));
    const last = parts.length - 1;
    // A literal path the tree has: a file pinned, or a folder read-only whole; nothing new in it.
    if (wild === -1 && (present.has(parts.join('/')) || folders.has(parts.join('/')))) continue;
    const folder = parts.slice(0, wild === -1 ? last : wild).join('/');
    if (folder === '') continue;
    if (wild !== -1 && (wild < last || parts[last]?.includes('**'))) {
      for (const d of folders) if (d === folder || d.startsWith(`${folder}/`)) guarded.add(d);
    } else if (folders.has(folder)) guarded.add(folder);
  }
  return [...guarded].sort();
}
