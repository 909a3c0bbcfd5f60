// The idea map's core on a toy whose basins are known: runs that search in families of solutions
// (a run mostly stays in its family, a fork may jump to another), judged by an oracle that knows
// the families. The map must agree with held-out judgments (at least 0.8, well above run identity),
// find the families as basins, and measure each fork's jump in median single-run steps.
import { describe, expect, it } from 'vitest';
import { buildMap, type Judgment, type MapInput, type MapSnapshot } from '../../src/core/map/record.js';
import { heldOut, newQuestions, tripletKey } from '../../src/core/map/sample.js';
import { randomFrom } from '../../src/core/rng.js';

interface Toy extends MapSnapshot {
  family: number;
  knob: number;
}

/** Runs of 12 snapshots: single runs stay in one family; fork runs jump at rounds 4 and 8. */
function toyRuns(seed: number): Toy[] {
  const random = randomFrom(seed);
  const out: Toy[] = [];
  const runs = [
    { run: 'run-s1', strategy: 'single-run' as const, family: 0 },
    { run: 'run-s2', strategy: 'single-run' as const, family: 1 },
    { run: 'run-f1', strategy: 'fork-and-flush' as const, family: 0 },
    { run: 'run-f2', strategy: 'fork-and-flush' as const, family: 2 },
  ];
  let c = 0;
  for (const r of runs) {
    let family = r.family;
    let knob = random() * 3;
    let prev = 'base';
    for (let round = 0; round < 12; round++) {
      const fork = r.strategy === 'fork-and-flush' && (round === 4 || round === 8);
      const branches = fork ? 3 : 1;
      const winner = Math.floor(random() * branches);
      let next = prev;
      const leader = { family, knob };
      for (let b = 0; b < branches; b++) {
        // A fork's selected branch moves to the next family; rejected ones stay near the leader.
        const f = fork && b === winner ? (leader.family + 1) % 3 : leader.family;
        const k = leader.knob + (random() - 0.5) * 2;
        const commit = `c${String(c++).padStart(4, '0')}`;
        out.push({
          run: r.run,
          strategy: r.strategy,
          variant: null,
          seed: 1,
          episode: `r${round}.b${b}`,
          commit,
          base: prev,
          score: f * 10 + k,
          round,
          phase: fork ? 'fork' : 'solo',
          lineage: 0,
          path: !fork || b === winner,
          forkPoint: false,
          branch: fork ? (b === winner ? 'selected' : 'rejected') : null,
          final: false,
          family: f,
          knob: k,
        });
        if (!fork || b === winner) {
          next = commit;
          family = f;
          knob = k;
        }
      }
      for (const s of out) if (s.commit === prev) s.forkPoint ||= fork;
      prev = next;
    }
  }
  return out;
}

/** The oracle: families 10 apart on a line, knobs within them. */
function oracle(points: Toy[], q: { anchor: string; a: string; b: string }): Judgment {
  const at = new Map(points.map((p) => [p.commit, p]));
  const d = (x: string, y: string) => {
    const p = at.get(x) as Toy;
    const r = at.get(y) as Toy;
    return 10 * Math.abs(p.family - r.family) + Math.abs(p.knob - r.knob);
  };
  return { ...q, answer: d(q.anchor, q.a) <= d(q.anchor, q.b) ? 'a' : 'b' };
}

function toyInput(points: Toy[], count: number): MapInput {
  const questions = newQuestions(
    points.map((p) => p.commit),
    count,
    new Set(),
    24,
  );
  return {
    target: { kind: 'compare', id: 'compare-toy' },
    createdAt: '2026-11-30T10:00:00.000Z',
    direction: 'maximize',
    judge: { kind: 'command', label: 'oracle' },
    embedding: 'tste',
    seed: 24,
    snapshots: points,
    judgments: questions.map((q) => oracle(points, q)),
    heldOutShare: 0.1,
    failed: { specs: [], judgments: 0, errors: [] },
    calls: { spec: { made: points.length, cached: 0, failed: 0 }, triplet: { made: count, cached: 0, failed: 0 } },
    spent: 0,
    unit: 'tokens',
    budget: 100,
  };
}

describe('the idea map of a toy with known basins', () => {
  const points = toyRuns(1);
  const map = buildMap(toyInput(points, 2000));

  it('agrees with held-out judgments, far above run identity and chance', () => {
    const a = map.agreement;
    expect(a.heldOutJudgments).toBeGreaterThan(150);
    expect(a.heldOut).toBeGreaterThanOrEqual(0.85);
    expect(a.runIdentity).toBeLessThan(0.75);
    expect((a.heldOut as number) - (a.runIdentity as number)).toBeGreaterThan(0.15);
    expect(a.chance).toBe(0.5);
  });

  it('finds the families as its basins', () => {
    expect(map.basins).toHaveLength(3);
    const family = new Map(points.map((p) => [p.commit, p.family]));
    for (const b of map.basins) expect(new Set(b.points.map((id) => family.get(id))).size).toBe(1);
  });

  it('measures each fork: the selected branch jumps many single-run steps into a new basin, rejected ones stay', () => {
    expect(map.step.from).toBe('single-run');
    expect(map.jumps).toHaveLength(4);
    for (const j of map.jumps) {
      expect(j.selected?.newBasin).toBe(true);
      expect(j.selected?.steps).toBeGreaterThan(3);
      for (const r of j.rejected) expect(r.newBasin).toBe(false);
    }
    const visited = Object.fromEntries(map.runs.map((r) => [r.run, r.basins.length]));
    expect(visited).toEqual({ 'run-s1': 1, 'run-s2': 1, 'run-f1': 3, 'run-f2': 3 });
  });

  it('keeps every judgment as answered, with its part (fit or held out) decided by its own hash', () => {
    expect(map.judgments).toBe(2000);
    expect(map.triplets).toHaveLength(2000);
    for (const j of map.triplets.slice(0, 50)) expect(j.heldOut).toBe(heldOut(j, 0.1));
    expect(buildMap(toyInput(points, 2000))).toEqual(map);
  });

  // Failed before its fix: the judge's answers came back in the order a pool of calls finished,
  // so a re-run of the same map (its answers from the cache) recorded them in another order.
  it('is the same map whatever order the judgments came in', () => {
    const input = toyInput(points, 2000);
    expect(buildMap({ ...input, judgments: [...input.judgments].reverse() })).toEqual(map);
  });
});

describe('newQuestions', () => {
  const ids = Array.from({ length: 30 }, (_, i) => `p${i}`);

  it('asks the same questions of the same points, each once, never with a point twice', () => {
    const q = newQuestions(ids, 500, new Set(), 3);
    expect(q).toEqual(newQuestions([...ids].reverse(), 500, new Set(), 3));
    expect(new Set(q.map(tripletKey)).size).toBe(500);
    for (const t of q) expect(new Set([t.anchor, t.a, t.b]).size).toBe(3);
  });

  it('asks only the rest when some are answered, and reuses what a smaller map answered', () => {
    const first = newQuestions(ids, 300, new Set(), 3);
    const done = new Set(first.slice(0, 120).map(tripletKey));
    const rest = newQuestions(ids, 300, done, 3);
    expect(rest).toEqual(first.slice(120));
    const bigger = [...ids, ...Array.from({ length: 10 }, (_, i) => `q${i}`)];
    const more = newQuestions(bigger, 400, new Set(first.map(tripletKey)), 3);
    expect(more).toHaveLength(100);
    for (const t of more) expect(done.has(tripletKey(t))).toBe(false);
  });

  it('stops at every distinct question there is', () => {
    expect(newQuestions(['a', 'b', 'c', 'd'], 1000, new Set(), 1)).toHaveLength(12);
  });
});
