// What a config's shell command names in the repository (src/core/commands.ts), read from its
// words: the local pre-flight, init, the config and the app's start check all go by it.
import { describe, expect, it } from 'vitest';
import { fileItRuns, namedPaths } from '../../src/core/commands.js';

describe('fileItRuns', () => {
  it("names the script an interpreter runs, or the repository's own program", () => {
    expect(fileItRuns('node grade.mjs')).toBe('grade.mjs');
    expect(fileItRuns('python3 ./score.py --fast')).toBe('score.py');
    expect(fileItRuns('FAST=1 ./run.sh')).toBe('run.sh');
    expect(fileItRuns('bun run x.ts')).toBe('x.ts');
    expect(fileItRuns('deno run grade.ts; echo done')).toBe('grade.ts');
  });

  it('names none where the words do not say (a flag, a subcommand, the repository itself, a shell)', () => {
    // deno and bun take a subcommand first: `run` (not a file), `test` (no script).
    expect(fileItRuns('deno run --allow-read grade.ts')).toBeNull();
    expect(fileItRuns('bun test')).toBeNull();
    expect(fileItRuns('deno task grade')).toBeNull();
    expect(fileItRuns('node .')).toBeNull();
    expect(fileItRuns('python3 -m pkg')).toBeNull();
    expect(fileItRuns("sh -c 'make score'")).toBeNull();
    expect(fileItRuns('make score')).toBeNull();
    expect(fileItRuns('node /opt/grade.mjs')).toBeNull();
  });
});

describe('namedPaths', () => {
  it('lists the words that look like repository paths', () => {
    expect(namedPaths('python3 score.py --data data/cities.tsp -o /tmp/x $HOME/y')).toEqual([
      'score.py',
      'data/cities.tsp',
    ]);
  });
});
