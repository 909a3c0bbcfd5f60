// The order the suite's files start in. On a fresh clone (CI) vitest has no timings yet and starts
// the largest files first, so files that take minutes but are short to read (one row waiting out a
// real timeout, a whole map) started last and ran alone at the end. These start first; the rest
// keep vitest's order (its timings once it has them, else size).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Files that took over a minute and a half on a two-core machine (stop 41, in this order). */
const SLOW_FILES = [
  'test/integration/compare.test.ts',
  'test/integration/map.test.ts',
  'test/attacks/round2-resources.test.ts',
  'test/integration/run.test.ts',
  'test/integration/action-overnight.test.ts',
  'test/github/box.test.ts',
  'test/attacks/round3-neighbours.test.ts',
  'test/attacks/round3-egress.test.ts',
  'test/integration/episodes.test.ts',
  'test/integration/overnight-local.test.ts',
  'test/github/lifecycle.test.ts',
  'test/attacks/round3-stalls.test.ts',
  'test/integration/setup.test.ts',
  'test/integration/losers.test.ts',
  'test/attacks/round7.test.ts',
  'test/github/overnight.test.ts',
];

// A file renamed or removed must leave the list too, or the list stops saying what is slow.
for (const path of SLOW_FILES)
  if (!existsSync(join(import.meta.dirname, '..', path))) throw new Error(`test/slow-first.ts: ${path} is not there`);

export class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = SLOW_FILES.findIndex((path) => f.moduleId.endsWith(`/${path}`));
      return i < 0 ? SLOW_FILES.length : i;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}
