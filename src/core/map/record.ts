// The idea map of a run or a compare (map.json): its points placed by t-STE (or SOE) from the
// judge's triplet answers, grouped into basins, with the held-out agreement against run identity
// and chance, and each fork round's jumps in median single-run steps (the paper's appendix E).
// Pure: the same snapshots and answers always give the same record; the shell runs the judge.
import { z } from 'zod';
import type { Strategy } from '../config.js';
import { STRATEGIES } from '../method.js';
import { basinName, convexHull, findBasins } from './basins.js';
import { EMBEDDINGS, type Embedding, MAP_UNITS, type MapUnit } from './config.js';
import { heldOut, type Snapshot } from './sample.js';
import { agreement, type Coordinates, embed, type IndexTriplet } from './tste.js';

export const MAP_VERSION = 1;

const pointSchema = z.object({
  /** The snapshot's commit: the id the judge saw in its triplet file. */
  id: z.string(),
  run: z.string(),
  strategy: z.enum(STRATEGIES),
  variant: z.string().nullable(),
  seed: z.number(),
  episode: z.string(),
  round: z.number(),
  phase: z.string(),
  lineage: z.number(),
  commit: z.string(),
  score: z.number().nullable(),
  x: z.number(),
  y: z.number(),
  /** Its basin's index in `basins`. */
  basin: z.number(),
  path: z.boolean(),
  forkPoint: z.boolean(),
  branch: z.enum(['selected', 'rejected']).nullable(),
  final: z.boolean(),
});

const jumpSchema = z.object({ id: z.string(), steps: z.number().nullable(), newBasin: z.boolean() });

export const mapRecordSchema = z.object({
  version: z.literal(MAP_VERSION),
  target: z.object({ kind: z.enum(['run', 'compare', 'probe']), id: z.string() }),
  createdAt: z.string(),
  direction: z.enum(['maximize', 'minimize']),
  /** Who judged: its kind, and the model or command. */
  judge: z.object({ kind: z.string(), label: z.string() }),
  embedding: z.enum(EMBEDDINGS),
  seed: z.number(),
  points: z.array(pointSchema),
  basins: z.array(
    z.object({
      id: z.number(),
      name: z.string(),
      points: z.array(z.string()),
      runs: z.array(z.string()),
      hull: z.array(z.tuple([z.number(), z.number()])),
    }),
  ),
  /** The mean silhouette of the basins' cut; null for one basin. */
  silhouette: z.number().nullable(),
  agreement: z.object({
    /** On the held-out judgments: the share the map's distances agree with. */
    heldOut: z.number().nullable(),
    /** Run membership alone on the same judgments: the anchor's run-mate is closer; otherwise a coin. */
    runIdentity: z.number().nullable(),
    chance: z.number(),
    heldOutJudgments: z.number(),
    /** On the judgments the map was fitted to. */
    fitted: z.number().nullable(),
    fittedJudgments: z.number(),
  }),
  /** How many judgments the map used (fitted and held out): each one the judge answered, in `triplets`. */
  judgments: z.number(),
  /** Every judgment the map used, as the judge answered it. */
  triplets: z.array(
    z.object({
      anchor: z.string(),
      a: z.string(),
      b: z.string(),
      answer: z.enum(['a', 'b']),
      heldOut: z.boolean(),
    }),
  ),
  /** The median step between consecutive snapshots of single runs (or of serial episodes), and which. */
  step: z.object({ median: z.number().nullable(), from: z.enum(['single-run', 'serial']).nullable() }),
  /** Each fork round from a snapshot: how far its branches moved, in median steps. */
  jumps: z.array(
    z.object({
      run: z.string(),
      round: z.number(),
      phase: z.string(),
      from: z.string(),
      selected: jumpSchema.nullable(),
      rejected: z.array(jumpSchema),
    }),
  ),
  /** Per run: its snapshots on the map and the basins they fall in. */
  runs: z.array(
    z.object({
      run: z.string(),
      strategy: z.enum(STRATEGIES),
      variant: z.string().nullable(),
      seed: z.number(),
      points: z.number(),
      basins: z.array(z.string()),
    }),
  ),
  /** What the judge could not answer, after one retry each: left out, counted, its errors quoted. */
  failed: z.object({
    specs: z.array(z.object({ run: z.string(), episode: z.string(), commit: z.string(), error: z.string() })),
    judgments: z.number(),
    errors: z.array(z.string()),
  }),
  calls: z.object({
    spec: z.object({ made: z.number(), cached: z.number(), failed: z.number() }),
    triplet: z.object({ made: z.number(), cached: z.number(), failed: z.number() }),
  }),
  /** What the specs and judgments of this map cost (cached ones at what they cost when made). */
  spent: z.number(),
  unit: z.enum(MAP_UNITS),
  budget: z.number(),
});

export type MapRecord = z.infer<typeof mapRecordSchema>;
export type MapPoint = MapRecord['points'][number];

/** A snapshot as the map shows it: its run's strategy, variant and seed with it. */
export interface MapSnapshot extends Snapshot {
  strategy: Strategy;
  variant: string | null;
  seed: number;
}

export interface Judgment {
  anchor: string;
  a: string;
  b: string;
  answer: 'a' | 'b';
}

export interface MapInput {
  target: MapRecord['target'];
  createdAt: string;
  direction: 'maximize' | 'minimize';
  judge: MapRecord['judge'];
  embedding: Embedding;
  seed: number;
  /** The snapshots with a spec, in run order. */
  snapshots: MapSnapshot[];
  /** The judge's answers about them. */
  judgments: Judgment[];
  heldOutShare: number;
  failed: MapRecord['failed'];
  calls: MapRecord['calls'];
  spent: number;
  unit: MapUnit;
  budget: number;
}

export function buildMap(i: MapInput): MapRecord {
  const index = new Map(i.snapshots.map((s, k) => [s.commit, k]));
  // In one order whatever order the judge's answers came in (a pool of calls, the cache): the same
  // judgments make the same map.
  const key = (j: Judgment) => `${j.anchor} ${j.a} ${j.b}`;
  const judgments = [...i.judgments]
    .sort((x, y) => (key(x) < key(y) ? -1 : key(x) > key(y) ? 1 : 0))
    .filter((j) => index.has(j.anchor) && index.has(j.a) && index.has(j.b))
    .map((j) => ({ ...j, heldOut: heldOut(j, i.heldOutShare) }));
  const asIndex = (j: Judgment): IndexTriplet => {
    const [near, far] = j.answer === 'a' ? [j.a, j.b] : [j.b, j.a];
    return { anchor: index.get(j.anchor) as number, near: index.get(near) as number, far: index.get(far) as number };
  };
  const fitted = judgments.filter((j) => !j.heldOut).map(asIndex);
  const held = judgments.filter((j) => j.heldOut).map(asIndex);
  const coords = embed(i.snapshots.length, fitted, { seed: i.seed, method: i.embedding });
  const clustering = findBasins(coords);
  const runOf = (k: number) => i.snapshots[k]?.run;
  const points: MapPoint[] = i.snapshots.map((s, k) => ({
    id: s.commit,
    run: s.run,
    strategy: s.strategy,
    variant: s.variant,
    seed: s.seed,
    episode: s.episode,
    round: s.round,
    phase: s.phase,
    lineage: s.lineage,
    commit: s.commit,
    score: s.score,
    x: round6((coords[k] as [number, number])[0]),
    y: round6((coords[k] as [number, number])[1]),
    basin: clustering.labels[k] ?? 0,
    path: s.path,
    forkPoint: s.forkPoint,
    branch: s.branch,
    final: s.final,
  }));
  const basins = Array.from({ length: clustering.count }, (_, b) => {
    const members = points.filter((p) => p.basin === b);
    return {
      id: b,
      name: basinName(b),
      points: members.map((p) => p.id),
      runs: [...new Set(members.map((p) => p.run))],
      hull: convexHull(members.map((p): [number, number] => [p.x, p.y])),
    };
  });
  const step = medianStep(i.snapshots, coords);
  return {
    version: MAP_VERSION,
    target: i.target,
    createdAt: i.createdAt,
    direction: i.direction,
    judge: i.judge,
    embedding: i.embedding,
    seed: i.seed,
    points,
    basins,
    silhouette: clustering.silhouette === null ? null : round6(clustering.silhouette),
    agreement: {
      heldOut: rounded(agreement(coords, held)),
      runIdentity: rounded(runIdentity(held, runOf)),
      chance: 0.5,
      heldOutJudgments: held.length,
      fitted: rounded(agreement(coords, fitted)),
      fittedJudgments: fitted.length,
    },
    judgments: judgments.length,
    triplets: judgments,
    step,
    jumps: forkJumps(i.snapshots, points, coords, step.median),
    runs: runSummaries(i.snapshots, points, basins),
    failed: i.failed,
    calls: i.calls,
    spent: round6(i.spent),
    unit: i.unit,
    budget: i.budget,
  };
}

/**
 * The run-identity heuristic on the held-out judgments: the point from the anchor's run is the
 * closer one; when both or neither are, a coin (half a judgment right, on average).
 */
function runIdentity(held: IndexTriplet[], runOf: (k: number) => string | undefined): number | null {
  if (held.length === 0) return null;
  let right = 0;
  for (const t of held) {
    const near = runOf(t.near) === runOf(t.anchor);
    const far = runOf(t.far) === runOf(t.anchor);
    right += near === far ? 0.5 : near ? 1 : 0;
  }
  return right / held.length;
}

/**
 * The median distance between consecutive snapshots of a lineage's path in single runs; a map
 * without single runs takes the steps into serial episodes of every run instead.
 */
function medianStep(snapshots: MapSnapshot[], coords: Coordinates): MapRecord['step'] {
  const steps = (keep: (s: MapSnapshot) => boolean) => {
    const out: number[] = [];
    const byLineage = new Map<string, number[]>();
    snapshots.forEach((s, k) => {
      if (!s.path) return;
      const key = `${s.run} ${s.lineage}`;
      byLineage.set(key, [...(byLineage.get(key) ?? []), k]);
    });
    for (const ks of byLineage.values())
      for (let n = 1; n < ks.length; n++) {
        const [p, q] = [ks[n - 1] as number, ks[n] as number];
        if (keep(snapshots[q] as MapSnapshot)) out.push(dist(coords[p], coords[q]));
      }
    return out;
  };
  const single = steps((s) => s.strategy === 'single-run');
  if (single.length > 0) return { median: round6(median(single)), from: 'single-run' };
  const serial = steps((s) => s.branch === null);
  return serial.length > 0 ? { median: round6(median(serial)), from: 'serial' } : { median: null, from: null };
}

/** Each fork round that started from a snapshot: how far each branch moved, and into which basin. */
function forkJumps(
  snapshots: MapSnapshot[],
  points: MapPoint[],
  coords: Coordinates,
  unit: number | null,
): MapRecord['jumps'] {
  const at = new Map(snapshots.map((s, k) => [`${s.run} ${s.commit}`, k]));
  const rounds = new Map<string, number[]>();
  snapshots.forEach((s, k) => {
    if (s.branch === null || !at.has(`${s.run} ${s.base}`)) return;
    const key = `${s.run} ${s.round}`;
    rounds.set(key, [...(rounds.get(key) ?? []), k]);
  });
  return [...rounds.values()].map((ks) => {
    const first = snapshots[ks[0] as number] as MapSnapshot;
    const from = at.get(`${first.run} ${first.base}`) as number;
    const jump = (k: number) => ({
      id: (points[k] as MapPoint).id,
      steps: unit ? round6(dist(coords[from], coords[k]) / unit) : null,
      newBasin: (points[k] as MapPoint).basin !== (points[from] as MapPoint).basin,
    });
    const selected = ks.find((k) => snapshots[k]?.branch === 'selected');
    return {
      run: first.run,
      round: first.round,
      phase: first.phase,
      from: (points[from] as MapPoint).id,
      selected: selected === undefined ? null : jump(selected),
      rejected: ks.filter((k) => snapshots[k]?.branch === 'rejected').map(jump),
    };
  });
}

function runSummaries(snapshots: MapSnapshot[], points: MapPoint[], basins: MapRecord['basins']): MapRecord['runs'] {
  const runs = [...new Set(snapshots.map((s) => s.run))];
  return runs.map((run) => {
    const first = snapshots.find((s) => s.run === run) as MapSnapshot;
    const mine = points.filter((p) => p.run === run);
    const visited = [...new Set(mine.map((p) => p.basin))].sort((a, b) => a - b);
    return {
      run,
      strategy: first.strategy,
      variant: first.variant,
      seed: first.seed,
      points: mine.length,
      basins: visited.map((b) => basins[b]?.name ?? String(b)),
    };
  });
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

function dist(p: readonly [number, number] | undefined, q: readonly [number, number] | undefined): number {
  return p && q ? Math.hypot(p[0] - q[0], p[1] - q[1]) : Number.NaN;
}

const round6 = (x: number) => Math.round(x * 1e6) / 1e6;
const rounded = (x: number | null) => (x === null ? null : round6(x));

/** map.json's text, checked: a map.json forkflush cannot read is said with the file and the field. */
export function parseMapRecord(text: string): MapRecord | { problem: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { problem: 'not JSON' };
  }
  const r = mapRecordSchema.safeParse(json);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  return { problem: `${issue?.path.join('.') || 'the map'}: ${issue?.message ?? 'not valid'}` };
}
