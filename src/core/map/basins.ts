// Idea basins: groups of points of an idea map that lie together. Average-linkage clustering of the
// embedding (each merge joins the two groups whose points are nearest on average), cut at the
// number of groups, from 2 to MAX_BASINS, whose mean silhouette is best; when even the best cut has
// no substantial structure (BASIN_SILHOUETTE), the map is one basin. Pure and deterministic: ties
// go to the lower index. Also the outline drawn around a basin: its points' convex hull.
import { BASIN_SILHOUETTE, MAX_BASINS } from '../method.js';
import type { Coordinates } from './tste.js';

export interface Clustering {
  /** Each point's basin: 0 for the largest, then by size (ties: the basin of the earlier point first). */
  labels: number[];
  count: number;
  /** The mean silhouette of the cut chosen (null: one basin, or too few points to say). */
  silhouette: number | null;
}

export function findBasins(points: Coordinates): Clustering {
  const n = points.length;
  const one: Clustering = { labels: points.map(() => 0), count: n === 0 ? 0 : 1, silhouette: null };
  if (n < 4) return one;
  const d = distances(points);
  const cuts = averageLinkage(d, n);
  let best: { labels: number[]; k: number; s: number } | null = null;
  for (let k = 2; k <= Math.min(MAX_BASINS, n - 1); k++) {
    const labels = cuts(k);
    const s = meanSilhouette(d, n, labels);
    if (best === null || s > best.s + 1e-12) best = { labels, k, s };
  }
  if (best === null || best.s <= BASIN_SILHOUETTE) return { ...one, silhouette: best?.s ?? null };
  return { labels: bySize(best.labels), count: best.k, silhouette: best.s };
}

/** The pairwise distances, row by row. */
function distances(points: Coordinates): Float64Array {
  const n = points.length;
  const d = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = i + 1; j < n; j++) {
      const p = points[i] as [number, number];
      const q = points[j] as [number, number];
      const v = Math.hypot(p[0] - q[0], p[1] - q[1]);
      d[i * n + j] = v;
      d[j * n + i] = v;
    }
  return d;
}

/**
 * Average linkage (UPGMA) by the Lance–Williams update: merges until one group is left, recording
 * each merge; returns the labels of the cut into k groups.
 */
function averageLinkage(d: Float64Array, n: number): (k: number) => number[] {
  const between = Float64Array.from(d);
  const size = new Array<number>(n).fill(1);
  const alive = new Array<boolean>(n).fill(true);
  const merges: [number, number][] = [];
  for (let left = n; left > 1; left--) {
    let bi = -1;
    let bj = -1;
    let bd = Number.POSITIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      if (!alive[i]) continue;
      for (let j = i + 1; j < n; j++) {
        if (!alive[j]) continue;
        const v = between[i * n + j] as number;
        if (v < bd) [bi, bj, bd] = [i, j, v];
      }
    }
    // Group j joins group i; i's distance to every other group is the size-weighted mean.
    const si = size[bi] as number;
    const sj = size[bj] as number;
    for (let k = 0; k < n; k++) {
      if (!alive[k] || k === bi || k === bj) continue;
      const v = (si * (between[bi * n + k] as number) + sj * (between[bj * n + k] as number)) / (si + sj);
      between[bi * n + k] = v;
      between[k * n + bi] = v;
    }
    size[bi] = si + sj;
    alive[bj] = false;
    merges.push([bi, bj]);
  }
  return (k) => {
    // Replay the first n - k merges with a union of groups, then number the groups by first point.
    const parent = Array.from({ length: n }, (_, i) => i);
    const root = (i: number): number => {
      let r = i;
      while (parent[r] !== r) r = parent[r] as number;
      return r;
    };
    for (const [i, j] of merges.slice(0, n - k)) parent[root(j)] = root(i);
    const ids = new Map<number, number>();
    return parent.map((_, i) => {
      const r = root(i);
      if (!ids.has(r)) ids.set(r, ids.size);
      return ids.get(r) as number;
    });
  };
}

/** The mean silhouette (Rousseeuw, 1987): how much nearer each point is to its own group than the next. */
function meanSilhouette(d: Float64Array, n: number, labels: number[]): number {
  const k = Math.max(...labels) + 1;
  const sizes = new Array<number>(k).fill(0);
  for (const l of labels) sizes[l] = (sizes[l] as number) + 1;
  let total = 0;
  const sums = new Float64Array(k);
  for (let i = 0; i < n; i++) {
    sums.fill(0);
    for (let j = 0; j < n; j++)
      if (j !== i) sums[labels[j] as number] = (sums[labels[j] as number] as number) + (d[i * n + j] as number);
    const own = labels[i] as number;
    const ownSize = (sizes[own] as number) - 1;
    // A point alone in its group has silhouette 0.
    if (ownSize === 0) continue;
    const a = (sums[own] as number) / ownSize;
    let b = Number.POSITIVE_INFINITY;
    for (let c = 0; c < k; c++) if (c !== own) b = Math.min(b, (sums[c] as number) / (sizes[c] as number));
    total += (b - a) / Math.max(a, b) || 0;
  }
  return total / n;
}

/** Relabels groups by size, largest first; equal sizes keep the order of their first point. */
function bySize(labels: number[]): number[] {
  const k = Math.max(...labels) + 1;
  const size = new Array<number>(k).fill(0);
  const first = new Array<number>(k).fill(Number.POSITIVE_INFINITY);
  labels.forEach((l, i) => {
    size[l] = (size[l] as number) + 1;
    first[l] = Math.min(first[l] as number, i);
  });
  const order = Array.from({ length: k }, (_, i) => i).sort(
    (a, b) => (size[b] as number) - (size[a] as number) || (first[a] as number) - (first[b] as number),
  );
  const rank = new Array<number>(k);
  order.forEach((l, r) => {
    rank[l] = r;
  });
  return labels.map((l) => rank[l] as number);
}

/** The convex hull of the points, counter-clockwise from the lowest-leftmost (Andrew's monotone chain). */
export function convexHull(points: Coordinates): Coordinates {
  const p = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  if (p.length < 3) return p;
  const cross = (o: [number, number], a: [number, number], b: [number, number]) =>
    (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
  const half = (list: Coordinates): Coordinates => {
    const out: Coordinates = [];
    for (const q of list) {
      while (
        out.length >= 2 &&
        cross(out[out.length - 2] as [number, number], out[out.length - 1] as [number, number], q) <= 0
      )
        out.pop();
      out.push(q);
    }
    out.pop();
    return out;
  };
  return [...half(p), ...half([...p].reverse())];
}

/** A basin's name in pictures and reports: A, B, ..., Z, then A2, B2, ... */
export function basinName(index: number): string {
  const letter = String.fromCharCode(65 + (index % 26));
  return index < 26 ? letter : `${letter}${Math.floor(index / 26) + 1}`;
}
