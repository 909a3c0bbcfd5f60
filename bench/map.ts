// The idea map's own cost, on top of its judge's calls, for a map the paper's size: 5 runs x 51
// snapshots and 6,000 triplet judgments (the toy's oracle answers them: families of solutions in a
// known plane). It times the fit (t-STE, then SOE), the basins and the record, and the picture, in
// CPU seconds of this process. The baseline, in the same run: one call of the cheapest judge there
// is (a command judge that prints "a", in the sandbox where it works), the floor under each of the
// map's 6,255 calls.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentFor } from '../src/agents/specs.js';
import { parseConfig } from '../src/core/config.js';
import { renderMapSvg } from '../src/core/map/chart.js';
import { buildMap, type MapInput, type MapSnapshot } from '../src/core/map/record.js';
import { newQuestions } from '../src/core/map/sample.js';
import { randomFrom } from '../src/core/rng.js';
import { askJudge } from '../src/local/map-judge.js';
import { isolationFor } from '../src/worker/boundary.js';

const RUNS = 5;
const SNAPSHOTS = 51;
const JUDGMENTS = 6000;

/** Snapshots of runs that each stay in one of three families, with a fork now and then to another. */
function snapshots(): { list: MapSnapshot[]; place: Map<string, [number, number]> } {
  const random = randomFrom(7);
  const corners: [number, number][] = [
    [0, 0],
    [10, 0],
    [5, 8.66],
  ];
  const list: MapSnapshot[] = [];
  const place = new Map<string, [number, number]>();
  for (let r = 0; r < RUNS; r++) {
    let family = r % 3;
    let knob = 0;
    for (let i = 0; i < SNAPSHOTS; i++) {
      if (i % 17 === 16) family = (family + 1) % 3;
      knob += random() - 0.3;
      const commit = `${r}${String(i).padStart(3, '0')}`.padEnd(40, 'a');
      const [cx, cy] = corners[family] as [number, number];
      place.set(commit, [cx + 0.4 * knob, cy + 0.3 * (random() - 0.5)]);
      list.push({
        run: `run-${r}`,
        strategy: r < 3 ? 'fork-and-flush' : 'single-run',
        variant: null,
        seed: r,
        episode: `r${i}.b0`,
        commit,
        base: i === 0 ? 'base' : (list.at(-1) as MapSnapshot).commit,
        score: knob,
        round: i,
        phase: 'solo',
        lineage: 0,
        path: true,
        forkPoint: i % 17 === 15,
        branch: i % 17 === 16 ? 'selected' : null,
        final: i === SNAPSHOTS - 1,
      });
    }
  }
  return { list, place };
}

function input(embedding: 'tste' | 'soe'): MapInput {
  const { list, place } = snapshots();
  const d = (x: string, y: string) => {
    const [p, q] = [place.get(x), place.get(y)] as [[number, number], [number, number]];
    return Math.hypot(p[0] - q[0], p[1] - q[1]);
  };
  const questions = newQuestions(
    list.map((s) => s.commit),
    JUDGMENTS,
    new Set(),
    24,
  );
  return {
    target: { kind: 'compare', id: 'compare-bench' },
    createdAt: new Date(0).toISOString(),
    direction: 'maximize',
    judge: { kind: 'command', label: 'oracle' },
    embedding,
    seed: 24,
    snapshots: list,
    judgments: questions.map((q) => ({ ...q, answer: d(q.anchor, q.a) <= d(q.anchor, q.b) ? 'a' : 'b' })),
    heldOutShare: 0.1,
    failed: { specs: [], judgments: 0, errors: [] },
    calls: { spec: { made: list.length, cached: 0, failed: 0 }, triplet: { made: JUDGMENTS, cached: 0, failed: 0 } },
    spent: 0,
    unit: 'tokens',
    budget: 1,
  };
}

/** CPU seconds (user + system) of this process that `f` takes. */
function cpu<T>(f: () => T): { value: T; seconds: number } {
  const start = process.cpuUsage();
  const value = f();
  const used = process.cpuUsage(start);
  return { value, seconds: (used.user + used.system) / 1e6 };
}

const tste = input('tste');
const fit = cpu(() => buildMap(tste));
const picture = cpu(() => renderMapSvg(fit.value, { title: 'bench' }));
const soe = cpu(() => buildMap(input('soe')));
const m = fit.value;
console.log(
  `map: ${m.points.length} points, ${m.judgments} judgments: t-STE, basins and record ${fit.seconds.toFixed(2)} s CPU ` +
    `(held-out agreement ${m.agreement.heldOut?.toFixed(3)}, ${m.basins.length} basins); picture ${picture.seconds.toFixed(2)} s; ` +
    `SOE instead ${soe.seconds.toFixed(2)} s (agreement ${soe.value.agreement.heldOut?.toFixed(3)})`,
);

// The baseline: calls of the cheapest judge, one after another.
const work = mkdtempSync(join(tmpdir(), 'forkflush-bench-map-'));
const config = parseConfig(
  'grader: {command: x}\nagent: {command: "echo a"}\nbudget: {total: 10, unit: tokens}\n',
  'bench.yml',
);
const isolation = await isolationFor('auto');
mkdirSync(join(work, 'base'));
const setup = {
  adapter: agentFor(config),
  judge: config.agent,
  config,
  isolation,
  env: process.env,
  work: join(work, 'calls'),
  failedLogs: join(work, 'failed'),
  hidden: [],
  unit: 'tokens' as const,
  signal: new AbortController().signal,
};
const CALLS = 20;
const t0 = performance.now();
for (let i = 0; i < CALLS; i++) {
  const r = await askJudge(
    setup,
    { step: 'triplet', name: `t${i}`, prompt: 'x', cwd: join(work, 'base'), triplet: '{}', seed: 1 },
    1,
  );
  if (!r.ok) throw new Error(`the baseline judge failed: ${r.error}`);
}
const perCall = (performance.now() - t0) / 1000 / CALLS;
rmSync(work, { recursive: true, force: true });
const calls = m.points.length + m.judgments;
console.log(
  `baseline: one call of a judge that prints "a" (${isolation.sandbox ? isolation.label : 'no sandbox'}) ${(perCall * 1000).toFixed(0)} ms wall; ` +
    `the map's ${calls} calls at least ${(perCall * calls).toFixed(0)} s one at a time`,
);
console.log(
  `map: ${(fit.seconds + picture.seconds).toFixed(2)} s CPU to fit and draw, ${((fit.seconds + picture.seconds) / perCall).toFixed(1)} times one call's wall time, ${(((fit.seconds + picture.seconds) / (perCall * calls)) * 100).toFixed(2)}% of the calls' floor`,
);
