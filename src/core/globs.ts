// Which repository paths a protected glob covers, as git's `:(glob)` pathspecs do: `*` and `?`
// stay within one path component, `**` spans components, `[...]` is a class; a pattern without
// wildcards names a path or everything under a folder. The app needs this where it has no git
// (it checks a result's tree through the API); test/unit/globs.test.ts holds it to git's answers.

const WILDCARD = /[*?[]/;

export function matchesGlob(path: string, glob: string): boolean {
  const pattern = glob.replace(/^\.\//, '').replace(/\/+$/, '');
  if (!WILDCARD.test(pattern)) return path === pattern || path.startsWith(`${pattern}/`);
  return globRegExp(pattern).test(path);
}

export function matchesAny(path: string, globs: readonly string[]): boolean {
  return globs.some((g) => matchesGlob(path, g));
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
  const compiled = new RegExp(`^${re}$`);
  cache.set(pattern, compiled);
  return compiled;
}

/**
 * What a run on a forge protects besides grader.protected: the config file it started with, and
 * the workflows (a job's token may not push them, and CI is no part of an agent's task).
 */
export function forgeAlsoProtected(configPath: string): string[] {
  return [configPath, '.github/workflows/**'];
}
