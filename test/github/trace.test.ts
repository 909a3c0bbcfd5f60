// The trace docs/architecture.md tells a newcomer (a worker's event to the lineage moved): at most
// five files, one step each, and every file and function it names is there. Renaming one without
// the story fails here.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const HEADING = '### The trace: from a worker';

/** The numbered steps of the trace: each starts with `src/<file>`; the names in backquotes are its functions. */
function traceSteps(doc: string): { file: string; names: string[] }[] {
  const start = doc.indexOf(HEADING);
  if (start < 0) return [];
  const rest = doc.slice(start + HEADING.length);
  const end = rest.search(/\n#{2,3} /);
  const section = end < 0 ? rest : rest.slice(0, end);
  // Each step: a numbered item, its lines up to the next item or a blank line.
  const steps = [...section.matchAll(/^\d+\. (`src\/[\s\S]*?)(?=\n\d+\. |\n\n|(?![\s\S]))/gm)].map((m) => m[1] ?? '');
  return steps.map((item) => {
    const [file = '', ...names] = [...item.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
    return { file, names: names.filter((n) => /^[A-Za-z]\w*$/.test(n)) };
  });
}

/** What the trace names that the code lacks: a file, or a function of a file. */
function missing(steps: { file: string; names: string[] }[]): string[] {
  const out: string[] = [];
  for (const step of steps) {
    const path = join(ROOT, step.file);
    if (!existsSync(path)) {
      out.push(`${step.file} does not exist`);
      continue;
    }
    const text = readFileSync(path, 'utf8');
    for (const name of step.names) {
      const defined = new RegExp(`(function|const|class)\\s+${name}\\b|^\\s+(async\\s+)?${name}\\(`, 'm');
      if (!defined.test(text)) out.push(`${step.file} defines no ${name}`);
    }
  }
  return out;
}

describe("the architecture's trace", () => {
  const doc = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
  const steps = traceSteps(doc);

  it('has one to five steps, each in a file of its own', () => {
    expect(steps.length).toBeGreaterThanOrEqual(1);
    expect(steps.length).toBeLessThanOrEqual(5);
    expect(new Set(steps.map((s) => s.file)).size).toBe(steps.length);
  });

  it('starts where the worker events arrive and ends where the lineage is fast-forwarded', () => {
    expect(steps[0]?.names).toContain('onRunCompleted');
    expect(steps.at(-1)?.names).toContain('settleRound');
  });

  it('names files that exist, and functions each of them defines', () => {
    expect(missing(steps)).toEqual([]);
  });

  it('tells a renamed file or function', () => {
    const renamed = doc
      .replace('`src/github/sync.ts`', '`src/github/run-sync.ts`')
      .replace('`notTheRoundsRunProblem`', '`notTheRoundsRun`')
      .replace('`settleRound`', '`settle`');
    expect(missing(traceSteps(renamed))).toEqual([
      'src/app/worker-events.ts defines no notTheRoundsRun',
      'src/github/run-sync.ts does not exist',
      'src/github/work.ts defines no settle',
    ]);
  });
});
