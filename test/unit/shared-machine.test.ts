// The episodes of a local run on one machine, and a judge that has it alone (local/shared-machine.ts).
import { describe, expect, it } from 'vitest';
import { EpisodeFloor } from '../../src/local/shared-machine.js';

/** A promise and what settles it. */
function later<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const tick = () => new Promise((r) => setImmediate(r));
const NEVER = new AbortController().signal;

describe('EpisodeFloor', () => {
  it('tells a window that saw no other episode from one that did (one in flight, or one started since)', async () => {
    const floor = new EpisodeFloor();
    const a = later();
    const b = later();
    let alone = () => true;
    let beside = () => false;
    const first = floor.run(async () => {
      alone = floor.othersSince();
      await a.promise;
      beside = floor.othersSince();
    });
    await tick();
    expect(alone()).toBe(false);
    const second = floor.run(() => b.promise);
    await tick();
    expect(alone()).toBe(true);
    a.resolve();
    await first;
    b.resolve();
    await second;
    expect(beside()).toBe(true);
  });

  it('runs a judge alone: after the episodes in flight end, and before any that would start meanwhile', async () => {
    const floor = new EpisodeFloor();
    const order: string[] = [];
    const other = later();
    const judged = floor.run(async () => {
      await tick();
      return floor.alone(async () => {
        order.push('judged alone');
        return 9;
      }, NEVER);
    });
    const sibling = floor.run(async () => {
      await other.promise;
      order.push('sibling ended');
    });
    await tick();
    await tick();
    const next = floor.run(async () => {
      order.push('next started');
    });
    await tick();
    expect(order).toEqual([]);
    other.resolve();
    await Promise.all([judged, sibling, next]);
    expect(await judged).toBe(9);
    expect(order).toEqual(['sibling ended', 'judged alone', 'next started']);
  });

  it('runs two judges that want it alone at once one after the other (neither waits for the other)', async () => {
    const floor = new EpisodeFloor();
    let running = 0;
    let most = 0;
    const judge = () =>
      floor.run(async () => {
        await tick();
        return floor.alone(async () => {
          running++;
          most = Math.max(most, running);
          await tick();
          running--;
          return 'graded';
        }, NEVER);
      });
    expect(await Promise.all([judge(), judge(), judge()])).toEqual(['graded', 'graded', 'graded']);
    expect(most).toBe(1);
  });

  it('stops waiting on a stop, and lets the next episodes run', async () => {
    const floor = new EpisodeFloor();
    const stop = new AbortController();
    const other = later();
    const sibling = floor.run(() => other.promise);
    const judged = floor.run(() => floor.alone(async () => 'graded', stop.signal));
    await tick();
    stop.abort();
    await expect(judged).rejects.toThrow(/stopped while waiting to be judged alone/);
    expect(await floor.run(async () => 'next')).toBe('next');
    other.resolve();
    await sibling;
    expect(floor.othersSince()()).toBe(false);
  });
});
