// The order a compare's runs start in, each when the episodes it may run at once fit in the free
// slots (local/compare.ts runs them).
import type { CompareManifest } from '../core/compare/plan.js';

export /**
 * The scheduler: in plan order, each run when its slots are free. A run may pass one that waits
 * for more slots only within the same seed, so the runs still finish about seed by seed. The first
 * error a run throws stops the others (halt) and is returned.
 */
async function scheduleRuns(
  m: CompareManifest,
  pending: number[],
  limit: number,
  widthOf: (i: number) => number,
  runEntry: (i: number, width: number) => Promise<void>,
  signal: AbortSignal,
  halt: AbortController,
): Promise<unknown> {
  const running = new Map<number, Promise<void>>();
  let free = limit;
  let error: unknown = null;
  while ((pending.length > 0 && !signal.aborted && error === null) || running.size > 0) {
    for (let k = 0; k < pending.length && !signal.aborted && error === null; k++) {
      const i = pending[k] as number;
      if (m.entries[i]?.seed !== m.entries[pending[0] as number]?.seed) break;
      const width = widthOf(i);
      if (width > free) continue;
      pending.splice(k--, 1);
      free -= width;
      const task = runEntry(i, width)
        .catch((err) => {
          error ??= err;
          halt.abort('error');
        })
        .finally(() => {
          free += width;
          running.delete(i);
        });
      running.set(i, task);
    }
    if (running.size === 0) break;
    await Promise.race(running.values());
  }
  return error;
}
