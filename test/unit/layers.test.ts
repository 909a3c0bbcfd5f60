// The layers of docs/architecture.md, checked by reading every import in src/.
//
//   core    -> core, yaml, zod (no node built-ins: no I/O, no clock)
//   io      -> io, node built-ins, core/bounds.ts (the operational limits: constants, no imports)
//              and core/resources.ts (the shape of the machine's readings io takes)
//   agents  -> agents, io, node built-ins, core's types (`import type` only), core/text.ts (pure
//              text helpers: how a CLI's error line is found is the same for agents and graders)
//              and core/failure.ts (pure: what a provider's error text says, for every spec),
//              core/usage.ts (pure: what a session's usage is as budget spend, for every spec),
//              core/json.ts (pure: reading JSON of unknown shape) and core/bounds.ts (the operational limits)
//   worker  -> worker, core, io, agents, node built-ins
//   local   -> local, core, io, agents, worker, node built-ins (the local forge shell)
//   github  -> github, core, node built-ins, probot (the GitHub forge shell)
//   cli, app, action -> their own folder, any layer above, node built-ins, packages, the root package.json
//
// So no layer imports an entry (cli/, app/, action/), the two forge shells do not import each other,
// and an entry does not import another entry. `import type` counts like any other import (a type is
// still a dependency), except where a rule says "types only". `import { type X } from` is a value
// import: under verbatimModuleSyntax it still loads the module at run time.
//
// The rules follow the layer table there and issue 13 ("agents -> io and core types"). Imports are
// read with regular expressions over the source with its comments, strings and regexes masked; a
// cross-check against TypeScript's own import scanner makes sure the reader misses none.
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, posix, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

type Layer = 'core' | 'io' | 'agents' | 'worker' | 'local' | 'github' | 'cli' | 'app' | 'action';

interface Rule {
  /** Other layers this one may import (its own folder always). */
  layers: Layer[];
  /** Layers this one may import types from (`import type`), and nothing else. */
  typesFrom?: Layer[];
  /** npm packages it may import, or any. */
  packages: string[] | 'any';
  /** Node built-ins (`node:fs`, ...). */
  node: boolean;
  /** Files outside src/ it may import, relative to the repository root. */
  files?: string[];
  /** Single modules of other layers it may import values from (pure helpers). */
  modules?: string[];
}

const LAYERS: Layer[] = ['core', 'io', 'agents', 'worker', 'local', 'github'];
const ENTRY: Rule = { layers: LAYERS, packages: 'any', node: true, files: ['package.json'] };

const RULES: Record<Layer, Rule> = {
  core: { layers: [], packages: ['yaml', 'zod'], node: false },
  io: { layers: [], packages: [], node: true, modules: ['src/core/bounds.ts', 'src/core/resources.ts'] },
  agents: {
    layers: ['io'],
    typesFrom: ['core'],
    modules: ['src/core/text.ts', 'src/core/failure.ts', 'src/core/usage.ts', 'src/core/json.ts', 'src/core/bounds.ts'],
    packages: [],
    node: true,
  },
  worker: { layers: ['core', 'io', 'agents'], packages: [], node: true },
  local: { layers: ['core', 'io', 'agents', 'worker'], packages: [], node: true },
  github: { layers: ['core'], packages: ['probot'], node: true },
  cli: ENTRY,
  app: ENTRY,
  action: ENTRY,
};

/** "core may import only core, yaml, zod" */
function ruleText(layer: Layer, rule: Rule = RULES[layer]): string {
  const parts: string[] = [layer, ...rule.layers];
  if (rule.typesFrom) parts.push(...rule.typesFrom.map((l) => `types from ${l} (import type)`));
  if (rule.node) parts.push('node built-ins');
  if (rule.packages === 'any') parts.push('packages');
  else parts.push(...rule.packages);
  if (rule.files) parts.push(...rule.files);
  if (rule.modules) parts.push(...rule.modules);
  return `${layer} may import only ${parts.join(', ')}`;
}

// ---------------------------------------------------------------------------------------------
// Reading imports

/**
 * The source masked for matching, each character at its place: comments become spaces, and the
 * contents of strings, template literals (but not their `${...}` code) and regexes become `_`
 * (newlines kept). So an import keyword matches only in code; its specifier is read from the source.
 */
function maskSource(source: string): string {
  let out = '';
  let i = 0;
  // Open `${` of template literals ('tpl') and plain braces inside them ('brace').
  const stack: ('tpl' | 'brace')[] = [];
  const blank = (text: string) => text.replace(/[^\n]/g, ' ');
  const fill = (text: string) => text.replace(/[^\n]/g, '_');
  const regexMayStart = () => {
    const before = out.trimEnd();
    if (before === '') return true;
    if (/(?:^|[^\w$])(?:return|typeof|case|do|else|in|of|void|yield|await|throw|new|delete)$/.test(before)) return true;
    return /[(,=:[!&|?{};+\-*%<>~^]$/.test(before);
  };
  const readQuoted = (quote: string) => {
    let j = i + 1;
    while (j < source.length && source[j] !== quote && source[j] !== '\n') j += source[j] === '\\' ? 2 : 1;
    out += quote + fill(source.slice(i + 1, j)) + source.slice(j, j + 1);
    i = j + 1;
  };
  // From just after a '`' or a template's closing '}', to its end or its next '${'.
  const readTemplate = () => {
    let j = i;
    while (j < source.length) {
      if (source[j] === '\\') j += 2;
      else if (source[j] === '`') {
        out += `${fill(source.slice(i, j))}\``;
        i = j + 1;
        return;
      } else if (source[j] === '$' && source[j + 1] === '{') {
        out += `${fill(source.slice(i, j))}\${`;
        i = j + 2;
        stack.push('tpl');
        return;
      } else j++;
    }
    out += fill(source.slice(i));
    i = source.length;
  };
  while (i < source.length) {
    const c = source[i];
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      const end = source.indexOf('\n', i);
      const stop = end < 0 ? source.length : end;
      out += blank(source.slice(i, stop));
      i = stop;
    } else if (c === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end < 0 ? source.length : end + 2;
      out += blank(source.slice(i, stop));
      i = stop;
    } else if (c === "'" || c === '"') {
      readQuoted(c);
    } else if (c === '`') {
      out += c;
      i++;
      readTemplate();
    } else if (c === '/' && regexMayStart()) {
      let j = i + 1;
      let inClass = false;
      while (j < source.length && source[j] !== '\n') {
        if (source[j] === '\\') j++;
        else if (source[j] === '[') inClass = true;
        else if (source[j] === ']') inClass = false;
        else if (source[j] === '/' && !inClass) break;
        j++;
      }
      out += `/${fill(source.slice(i + 1, j))}${source.slice(j, j + 1)}`;
      i = j + 1;
    } else if (c === '{' && stack.length > 0) {
      stack.push('brace');
      out += c;
      i++;
    } else if (c === '}' && stack.length > 0) {
      out += c;
      i++;
      if (stack.pop() === 'tpl') readTemplate();
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

interface Import {
  specifier: string;
  /** `import type ...` / `export type ... from`: erased at run time. */
  typeOnly: boolean;
  line: number;
}

const NAME = String.raw`[\w$]+`;
// What may stand between `import`/`export` (and an optional `type`) and `from`.
const CLAUSE = String.raw`(?:${NAME}\s*,?\s*)?(?:\{[^{}]*\}|\*(?:\s+as\s+${NAME})?)?`;
const PATTERNS: { re: RegExp; typeGroup?: number; specGroup: number }[] = [
  // import x from '...'; import { a, b } from '...'; import type { T } from '...';
  // import * as x from '...'; export { a } from '...'; export * from '...'; export type { T } from '...'
  {
    re: new RegExp(String.raw`(?<![\w$.])(?:import|export)\s+(type\s+)?${CLAUSE}\s*from\s*(['"])([^'"\n]+)\2`, 'dg'),
    typeGroup: 1,
    specGroup: 3,
  },
  // import '...'; (for its side effects)
  { re: /(?<![\w$.])import\s*(['"])([^'"\n]+)\1/dg, specGroup: 2 },
  // import('...'), in code or in a type (`typeof import('...')`)
  { re: /(?<![\w$.])import\s*\(\s*(['"`])([^'"`\n]+)\1\s*[,)]/dg, specGroup: 2 },
  // require('...'), import x = require('...')
  { re: /(?<![\w$.])require\s*\(\s*(['"`])([^'"`\n]+)\1\s*\)/dg, specGroup: 2 },
];

function readImports(source: string): Import[] {
  const code = maskSource(source);
  const found: (Import & { at: number })[] = [];
  for (const { re, typeGroup, specGroup } of PATTERNS) {
    for (const m of code.matchAll(re)) {
      const [from, to] = m.indices?.[specGroup] ?? [0, 0];
      found.push({
        specifier: source.slice(from, to),
        typeOnly: typeGroup !== undefined && m[typeGroup] !== undefined,
        line: code.slice(0, m.index).split('\n').length,
        at: m.index,
      });
    }
  }
  return found.sort((a, b) => a.at - b.at).map(({ at: _at, ...i }) => i);
}

// ---------------------------------------------------------------------------------------------
// Resolving and checking

type Target =
  | { kind: 'layer'; layer: string; path: string }
  | { kind: 'node'; name: string }
  | { kind: 'package'; name: string }
  | { kind: 'file'; path: string };

const BUILTINS = new Set(builtinModules);

/** What `specifier`, imported by `file` (a path such as src/core/x.ts), refers to. */
function resolveImport(file: string, specifier: string): Target {
  if (specifier.startsWith('.') || specifier.startsWith('/')) {
    const path = specifier.startsWith('/') ? specifier : posix.normalize(posix.join(posix.dirname(file), specifier));
    const parts = path.split('/');
    if (parts[0] === 'src' && parts.length >= 3) return { kind: 'layer', layer: parts[1] as string, path };
    return { kind: 'file', path };
  }
  if (specifier.startsWith('node:')) return { kind: 'node', name: specifier.slice('node:'.length) };
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
  if (BUILTINS.has(specifier) || BUILTINS.has(name)) return { kind: 'node', name: specifier };
  return { kind: 'package', name };
}

function layerOf(file: string): Layer | undefined {
  const parts = file.split('/');
  if (parts[0] !== 'src' || parts.length < 3) return undefined;
  const layer = parts[1] as string;
  return Object.hasOwn(RULES, layer) ? (layer as Layer) : undefined;
}

function allowed(layer: Layer, imp: Import, target: Target, rule: Rule): boolean {
  switch (target.kind) {
    case 'layer':
      if (target.layer === layer || (rule.layers as string[]).includes(target.layer)) return true;
      if ((rule.modules ?? []).includes(target.path.replace(/\.js$/, '.ts'))) return true;
      return imp.typeOnly && (rule.typesFrom ?? []).includes(target.layer as Layer);
    case 'node':
      return rule.node;
    case 'package':
      return rule.packages === 'any' || rule.packages.includes(target.name);
    case 'file':
      return (rule.files ?? []).includes(target.path);
  }
}

interface SourceFile {
  path: string;
  source: string;
}

interface Violation {
  file: string;
  specifier: string;
  line: number;
  message: string;
}

/** Every import in `files` that breaks its layer's rule; a file in no known layer is one too. */
function checkLayers(files: SourceFile[], rules: Record<Layer, Rule> = RULES): Violation[] {
  const out: Violation[] = [];
  for (const { path, source } of files) {
    const layer = layerOf(path);
    if (!layer) {
      const known = Object.keys(rules).join(', ');
      out.push({
        file: path,
        specifier: '',
        line: 0,
        message: `${path} is in no layer: every file under src/ belongs to a layer folder (${known}); add a rule for a new one`,
      });
      continue;
    }
    for (const imp of readImports(source)) {
      const target = resolveImport(path, imp.specifier);
      if (allowed(layer, imp, target, rules[layer])) continue;
      const what = imp.typeOnly ? 'imports type from' : 'imports';
      out.push({
        file: path,
        specifier: imp.specifier,
        line: imp.line,
        message: `${path}:${imp.line} ${what} ${imp.specifier}: ${ruleText(layer, rules[layer])}`,
      });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Cycles: a module that imports itself back through others, `import type` included (a cycle of
// types still ties the files together: neither can be read, moved or tested without the other).

/** The modules of src/ that `path` imports (types included), as paths from the repository root. */
function importedModules(path: string, source: string, known: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const imp of readImports(source)) {
    const target = resolveImport(path, imp.specifier);
    if (target.kind !== 'layer') continue;
    const file = target.path.replace(/\.js$/, '.ts');
    if (known.has(file)) out.push(file);
  }
  return out;
}

/** Every import cycle among `files`: each a strongly connected group of two or more modules, sorted. */
function importCycles(files: SourceFile[]): string[][] {
  const known = new Set(files.map((f) => f.path));
  const edges = new Map(files.map((f) => [f.path, importedModules(f.path, f.source, known)]));
  // Tarjan's algorithm: one walk, each module's lowest reachable index on the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v) as number);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string | undefined;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1 || (edges.get(v) ?? []).includes(v)) cycles.push(group.sort());
  };
  for (const f of files) if (!index.has(f.path)) visit(f.path);
  return cycles;
}

// ---------------------------------------------------------------------------------------------
// Known violations in today's tree. Each is a bug to fix, not a rule: fix the import, then remove
// its entry (an entry that no longer matches a violation fails the test, so the list only shrinks).

interface Allowed {
  file: string;
  specifier: string;
  why: string;
}

/** Imports that break a rule and are known (none: add one only with the reason it must stay). */
const KNOWN_VIOLATIONS: Allowed[] = [];

const matches = (v: Violation, a: Allowed) => v.file === a.file && v.specifier === a.specifier;
/** The violations no allowlist entry covers. */
const unlisted = (found: Violation[], allow: Allowed[]) => found.filter((v) => !allow.some((a) => matches(v, a)));
/** The allowlist entries that cover no violation any more. */
const stale = (found: Violation[], allow: Allowed[]) => allow.filter((a) => !found.some((v) => matches(v, a)));

// ---------------------------------------------------------------------------------------------

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every .ts file under src/, as a path from the repository root (src/core/x.ts). */
function srcFiles(): SourceFile[] {
  return readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => posix.join('src', f.split(sep).join('/')))
    .sort()
    .map((path) => ({ path, source: readFileSync(join(ROOT, path), 'utf8') }));
}

describe('layers: the imports in src/', () => {
  const files = srcFiles();

  it('finds the source files', () => {
    expect(files.length).toBeGreaterThan(20);
    for (const layer of LAYERS)
      expect(
        files.some((f) => layerOf(f.path) === layer),
        layer,
      ).toBe(true);
  });

  it('break no layer rule (but for the known violations listed above)', () => {
    const found = unlisted(checkLayers(files), KNOWN_VIOLATIONS);
    expect(found.map((v) => v.message).join('\n')).toBe('');
  });

  it('still have every known violation listed (remove an entry once it is fixed)', () => {
    const gone = stale(checkLayers(files), KNOWN_VIOLATIONS);
    expect(gone.map((a) => `${a.file} no longer imports ${a.specifier}: remove it from KNOWN_VIOLATIONS`)).toEqual([]);
  });

  it('form no cycle, not even of types', () => {
    expect(importCycles(files).map((c) => c.join(' -> '))).toEqual([]);
  });

  it('leave core/bounds.ts, which io and agents read, importing nothing', () => {
    const bounds = files.find((f) => f.path === 'src/core/bounds.ts');
    expect(bounds && readImports(bounds.source)).toEqual([]);
  });

  it('are all seen by the regex reader (the same specifiers as TypeScript finds)', () => {
    for (const { path, source } of files) {
      const ours = [...new Set(readImports(source).map((i) => i.specifier))].sort();
      const theirs = [...new Set(ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName))].sort();
      expect(ours, path).toEqual(theirs);
    }
  });
});

// The checker itself, on made-up files: it must report what breaks a rule, and only that.
describe('layers: the checker', () => {
  const report = (path: string, source: string) => checkLayers([{ path, source }]).map((v) => v.message);

  it('reports a core file that imports io, naming the file, the import and the rule', () => {
    expect(report('src/core/x.ts', "import { Git } from '../io/git.js';\n")).toEqual([
      'src/core/x.ts:1 imports ../io/git.js: core may import only core, yaml, zod',
    ]);
  });

  it('lets core import itself, yaml and zod, and nothing else, types included', () => {
    expect(
      report(
        'src/core/x.ts',
        "import { parse } from 'yaml';\nimport { z } from 'zod';\nimport type { A } from './a.js';\nimport { b } from './sub/../b.js';\n",
      ),
    ).toEqual([]);
    expect(report('src/core/x.ts', "import { readFileSync } from 'node:fs';")).toEqual([
      'src/core/x.ts:1 imports node:fs: core may import only core, yaml, zod',
    ]);
    expect(report('src/core/x.ts', "import { createHash } from 'crypto';")).toHaveLength(1);
    expect(report('src/core/x.ts', "import type { Probot } from 'probot';")).toEqual([
      'src/core/x.ts:1 imports type from probot: core may import only core, yaml, zod',
    ]);
    expect(report('src/core/x.ts', "import type { Agent } from '../agents/agent.js';")).toHaveLength(1);
  });

  it('sees every form of import: multi-line, export-from, side effects, dynamic, type positions, require', () => {
    const source = [
      'import {',
      '  a,',
      '  type B,',
      "} from '../io/a.js';",
      "export * from '../io/b.js';",
      "export { c } from '../io/c.js';",
      "export type { D } from '../io/d.js';",
      "import '../io/e.js';",
      "const f = await import('../io/f.js');",
      "type G = typeof import('../io/g.js');",
      "import h = require('../io/h.js');",
      "import i, * as j from '../io/i.js';",
    ].join('\n');
    expect(readImports(source).map((i) => [i.specifier, i.typeOnly, i.line])).toEqual([
      ['../io/a.js', false, 1],
      ['../io/b.js', false, 5],
      ['../io/c.js', false, 6],
      ['../io/d.js', true, 7],
      ['../io/e.js', false, 8],
      ['../io/f.js', false, 9],
      ['../io/g.js', false, 10],
      ['../io/h.js', false, 11],
      ['../io/i.js', false, 12],
    ]);
    expect(report('src/core/x.ts', source)).toHaveLength(9);
  });

  it('ignores imports in comments, strings, templates and regexes', () => {
    const source = [
      "// import { x } from '../io/a.js';",
      "/* import('../io/b.js') */",
      '/**',
      " * import { y } from '../io/c.js';",
      ' */',
      'const s = "import z from \'../io/d.js\'";',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a template literal
      "const t = `${s} import('../io/e.js') ${`/* ${s} */`}`;",
      "const r = /import\\('[^']*'\\)/; const glob = 'src/**/*.ts';",
      "import { ok } from './ok.js'; // import '../io/f.js'",
    ].join('\n');
    expect(readImports(source).map((i) => i.specifier)).toEqual(['./ok.js']);
    expect(report('src/core/x.ts', source)).toEqual([]);
  });

  it('lets io import node and itself only, so io importing core is reported', () => {
    expect(report('src/io/x.ts', "import { spawn } from 'node:child_process';\nimport './y.js';")).toEqual([]);
    expect(report('src/io/x.ts', "import type { Config } from '../core/config.js';")).toEqual([
      'src/io/x.ts:1 imports type from ../core/config.js: io may import only io, node built-ins, src/core/bounds.ts, src/core/resources.ts',
    ]);
  });

  it('lets agents take types, and only types, from core', () => {
    expect(report('src/agents/x.ts', "import type { Config } from '../core/config.js';")).toEqual([]);
    expect(report('src/agents/x.ts', "import { type Config } from '../core/config.js';")).toEqual([
      'src/agents/x.ts:1 imports ../core/config.js: agents may import only agents, io, types from core (import type), node built-ins, src/core/text.ts, src/core/failure.ts, src/core/usage.ts, src/core/json.ts, src/core/bounds.ts',
    ]);
    // The modules of core agents may take values from: pure text helpers and failure recognition.
    expect(report('src/agents/x.ts', "import { failureLine } from '../core/text.js';")).toEqual([]);
    expect(report('src/agents/x.ts', "import { recognizeFailure } from '../core/failure.js';")).toEqual([]);
    expect(report('src/agents/x.ts', "import { Git } from '../io/git.js';")).toEqual([]);
    expect(report('src/agents/x.ts', "import type { X } from '../worker/episode.js';")).toHaveLength(1);
    expect(report('src/agents/x.ts', "import type { X } from '../github/forge.js';")).toHaveLength(1);
  });

  it('keeps worker off the shells and every layer off the entries', () => {
    expect(report('src/worker/x.ts', "import { a } from '../agents/a.js';\nimport { c } from '../core/c.js';")).toEqual(
      [],
    );
    expect(report('src/worker/x.ts', "import { f } from '../local/forge.js';")).toHaveLength(1);
    for (const layer of ['core', 'io', 'agents', 'worker', 'local', 'github'])
      for (const entry of ['cli/args.js', 'app/app.js', 'action/main.js'])
        expect(report(`src/${layer}/x.ts`, `import type { X } from '../${entry}';`), `${layer} -> ${entry}`).toEqual([
          `src/${layer}/x.ts:1 imports type from ../${entry}: ${ruleText(layer as Layer)}`,
        ]);
  });

  it('keeps the two forge shells apart, and github to core and probot', () => {
    expect(report('src/local/x.ts', "import { sync } from '../github/sync.js';")).toHaveLength(1);
    expect(report('src/github/x.ts', "import { s } from '../local/store.js';")).toHaveLength(1);
    expect(report('src/github/x.ts', "import { Git } from '../io/git.js';")).toHaveLength(1);
    expect(report('src/github/x.ts', "import type { Probot } from 'probot';\nimport '../core/a.js';")).toEqual([]);
    expect(report('src/local/x.ts', "import { parse } from 'yaml';")).toHaveLength(1);
  });

  it('lets an entry use every layer and package, but not another entry', () => {
    expect(
      report(
        'src/cli/x.ts',
        "import { a } from '../local/a.js';\nimport pkg from '../../package.json' with { type: 'json' };\nimport * as core from '@actions/core';",
      ),
    ).toEqual([]);
    expect(report('src/app/x.ts', "import { main } from '../cli/main.js';")).toEqual([
      'src/app/x.ts:1 imports ../cli/main.js: app may import only app, core, io, agents, worker, local, github, node built-ins, packages, package.json',
    ]);
    expect(report('src/cli/x.ts', "import { x } from '../../test/unit/helpers.js';")).toHaveLength(1);
  });

  it('finds an import cycle, of types too, and only cycles', () => {
    const a = { path: 'src/core/a.ts', source: "import type { B } from './b.js';" };
    const b = { path: 'src/core/b.ts', source: "import { c } from './sub/c.js';" };
    const c = { path: 'src/core/sub/c.ts', source: "import type { A } from '../a.js';\nimport 'yaml';" };
    const d = { path: 'src/core/d.ts', source: "import { a } from './a.js';" };
    expect(importCycles([a, b, c, d])).toEqual([['src/core/a.ts', 'src/core/b.ts', 'src/core/sub/c.ts']]);
    expect(importCycles([a, b, { ...c, source: "import 'yaml';" }, d])).toEqual([]);
    expect(importCycles([{ path: 'src/io/x.ts', source: "import './x.js';" }])).toEqual([['src/io/x.ts']]);
  });

  it('reports a file outside every layer folder', () => {
    expect(report('src/util.ts', '')).toEqual([expect.stringMatching(/^src\/util\.ts is in no layer/)]);
    expect(report('src/shared/x.ts', '')).toHaveLength(1);
  });

  it('matches the allowlist by file and import, so other violations in a listed file still fail', () => {
    const allow = [{ file: 'src/agents/x.ts', specifier: '../core/plan.js', why: 'a test' }];
    const found = checkLayers([
      { path: 'src/agents/x.ts', source: "import { plan } from '../core/plan.js';\nimport '../core/y.js';" },
    ]);
    expect(found.map((v) => v.specifier)).toEqual(['../core/plan.js', '../core/y.js']);
    expect(unlisted(found, allow).map((v) => v.specifier)).toEqual(['../core/y.js']);
    expect(stale(found, allow)).toEqual([]);
    expect(stale([], allow)).toEqual(allow);
  });
});
