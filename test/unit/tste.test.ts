// t-STE and SOE against configurations whose answer is known: points on a line come back in their
// order (up to rotation, reflection and scale), three clusters come back as three clusters, the
// same judgments give the same map, and the agreement measure counts what it says.
import { describe, expect, it } from 'vitest';
import { agreement, type Coordinates, embed, type IndexTriplet } from '../../src/core/map/tste.js';
import { randomFrom } from '../../src/core/rng.js';

/** Triplets over `n` points drawn by the seed, each answered by the true distances. */
function judged(truth: Coordinates, count: number, seed: number): IndexTriplet[] {
  const random = randomFrom(seed);
  const n = truth.length;
  const at = (i: number) => truth[i] as [number, number];
  const d = (i: number, j: number) => Math.hypot(at(i)[0] - at(j)[0], at(i)[1] - at(j)[1]);
  const out: IndexTriplet[] = [];
  while (out.length < count) {
    const [a, b, c] = [0, 0, 0].map(() => Math.floor(random() * n)) as [number, number, number];
    if (a === b || a === c || b === c || d(a, b) === d(a, c)) continue;
    out.push(d(a, b) < d(a, c) ? { anchor: a, near: b, far: c } : { anchor: a, near: c, far: b });
  }
  return out;
}

/** The coordinates along their first principal axis. */
function principal(points: Coordinates): number[] {
  const mx = points.reduce((s, p) => s + p[0], 0) / points.length;
  const my = points.reduce((s, p) => s + p[1], 0) / points.length;
  let sxx = 0;
  let sxy = 0;
  let syy = 0;
  for (const [x, y] of points) {
    sxx += (x - mx) ** 2;
    sxy += (x - mx) * (y - my);
    syy += (y - my) ** 2;
  }
  const angle = 0.5 * Math.atan2(2 * sxy, sxx - syy);
  return points.map(([x, y]) => (x - mx) * Math.cos(angle) + (y - my) * Math.sin(angle));
}

/** Kendall's tau between two orders of the same items. */
function kendall(a: number[], b: number[]): number {
  let s = 0;
  let pairs = 0;
  for (let i = 0; i < a.length; i++)
    for (let j = i + 1; j < a.length; j++) {
      const [ai, aj, bi, bj] = [a[i], a[j], b[i], b[j]] as number[];
      s += Math.sign(((ai as number) - (aj as number)) * ((bi as number) - (bj as number)));
      pairs++;
    }
  return s / pairs;
}

describe('t-STE', () => {
  it('recovers points on a line in their order, up to rotation, reflection and scale', () => {
    const truth: Coordinates = Array.from({ length: 20 }, (_, i) => [i, 0]);
    const triplets = judged(truth, 1500, 1);
    const map = embed(truth.length, triplets, { seed: 7 });
    const tau = kendall(
      principal(map),
      truth.map((p) => p[0]),
    );
    expect(Math.abs(tau)).toBeGreaterThan(0.95);
    expect(agreement(map, triplets)).toBeGreaterThan(0.95);
    // Held-out judgments, not fitted, agree too.
    expect(agreement(map, judged(truth, 300, 99))).toBeGreaterThan(0.9);
  });

  it('keeps three separate clusters apart: every point nearer its own cluster than any other', () => {
    const centres = [
      [0, 0],
      [10, 0],
      [5, 9],
    ];
    const random = randomFrom(3);
    const truth: Coordinates = Array.from({ length: 36 }, (_, i) => {
      const [cx, cy] = centres[i % 3] as [number, number];
      return [cx + random() - 0.5, cy + random() - 0.5];
    });
    const map = embed(truth.length, judged(truth, 1200, 2), { seed: 5 });
    const at = (i: number) => map[i] as [number, number];
    const d = (i: number, j: number) => Math.hypot(at(i)[0] - at(j)[0], at(i)[1] - at(j)[1]);
    for (let i = 0; i < truth.length; i++) {
      const own = Math.max(...truth.map((_, j) => (j !== i && j % 3 === i % 3 ? d(i, j) : 0)));
      const other = Math.min(...truth.map((_, j) => (j % 3 !== i % 3 ? d(i, j) : Number.POSITIVE_INFINITY)));
      expect(own).toBeLessThan(other);
    }
  });

  it('gives the same map for the same judgments and seed, and another start for another seed', () => {
    const truth: Coordinates = Array.from({ length: 12 }, (_, i) => [i % 4, Math.floor(i / 4)]);
    const t = judged(truth, 400, 4);
    expect(embed(12, t, { seed: 1 })).toEqual(embed(12, t, { seed: 1 }));
    expect(embed(12, t, { seed: 1 })).not.toEqual(embed(12, t, { seed: 2 }));
  });

  it('refuses a triplet that names a point the map does not have', () => {
    expect(() => embed(3, [{ anchor: 0, near: 1, far: 3 }], { seed: 1 })).toThrow(/index 3 is not a point of 3/);
  });
});

describe('SOE', () => {
  it('recovers points on a line in their order too', () => {
    const truth: Coordinates = Array.from({ length: 20 }, (_, i) => [i, 0]);
    const triplets = judged(truth, 1500, 1);
    const map = embed(truth.length, triplets, { seed: 7, method: 'soe' });
    expect(
      Math.abs(
        kendall(
          principal(map),
          truth.map((p) => p[0]),
        ),
      ),
    ).toBeGreaterThan(0.95);
    expect(agreement(map, judged(truth, 300, 99))).toBeGreaterThan(0.9);
  });
});

describe('agreement', () => {
  it('counts the triplets whose anchor is nearer the chosen point, a tie as half, none as null', () => {
    const points: Coordinates = [
      [0, 0],
      [1, 0],
      [3, 0],
      [-1, 0],
    ];
    expect(agreement(points, [{ anchor: 0, near: 1, far: 2 }])).toBe(1);
    expect(agreement(points, [{ anchor: 0, near: 2, far: 1 }])).toBe(0);
    expect(agreement(points, [{ anchor: 0, near: 1, far: 3 }])).toBe(0.5);
    expect(agreement(points, [])).toBeNull();
  });
});
