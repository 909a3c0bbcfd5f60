// The order the suite's files start in. On a fresh clone (CI) vitest has no timings yet and starts
// the largest files first, so a file that is short to read but mostly waits (a row that waits out a
// real 120 s timeout) started last and ran alone at the end, its wait the suite's tail. Such files
// start first, their waits beside the others' work; every other file keeps vitest's order. Files
// that keep the CPU busy are not listed: started together they slowed each other past their
// bounds (stop 41 tried the sixteen longest first, and the suite took twice as long).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Files whose time is mostly waiting on a real timeout. */
const WAITING_FILES = [
  'test/integration/action-overnight.test.ts',
  'test/integration/laptop-night.test.ts',
  'test/integration/laptop-night-2.test.ts',
];

// A file renamed or removed must leave the list too, or the list stops saying what waits.
for (const path of WAITING_FILES)
  if (!existsSync(join(import.meta.dirname, '..', path)))
    throw new Error(`test/waiting-first.ts: ${path} is not there`);

export class WaitingFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const waits = (f: TestSpecification) => WAITING_FILES.some((path) => f.moduleId.endsWith(`/${path}`));
    return (await super.sort(files)).sort((a, b) => Number(waits(b)) - Number(waits(a)));
  }
}
