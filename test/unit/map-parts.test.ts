// The idea map's parts that are not the fit: which snapshots of a run it takes, the judge's prompts
// and how its answers are read (a command judge's stdout, each agent CLI's final message in its
// recorded output), the map: config keys, the report section and the picture, rendered to pixels.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import { describe, expect, it } from 'vitest';
import { finalMessage } from '../../src/agents/specs.js';
import { type AgentKind, type ConfigError, parseConfig } from '../../src/core/config.js';
import { MAP_COLORS, mapLayout, renderMapSvg } from '../../src/core/map/chart.js';
import { readTripletAnswer, specPrompt, tripletFile, tripletPrompt } from '../../src/core/map/prompts.js';
import { buildMap, type MapSnapshot } from '../../src/core/map/record.js';
import { mapSection, mapText } from '../../src/core/map/report.js';
import { heldOut, newQuestions, runSnapshots } from '../../src/core/map/sample.js';
import { mapSettings, tripletCount } from '../../src/core/map/settings.js';
import { simulate } from '../../src/core/plan.js';
import type { Episode, RunState } from '../../src/core/state.js';

const TEXT = 'grader: {command: x}\nagent: {command: y}\nbudget: {total: 400, unit: tokens, episode: 24}\n';
const config = (extra = '') => parseConfig(`${TEXT}${extra}`, 't.yml');

function run(strategy: string, seed: number, id = `${strategy}-${seed}`): RunState {
  const s = simulate(
    config(`strategy: ${strategy}\n`),
    (e: Episode) => ({ spent: e.allowance, score: 10 + e.round + (e.branch === 1 ? 2 : 0) }),
    seed,
  );
  // Each run's commits its own, as real runs' are.
  const rounds = s.rounds.map((r) => ({
    ...r,
    episodes: r.episodes.map((e) => ({
      ...e,
      base: e.base === 'base' ? 'base' : `${id}-${e.base}`,
      ...(e.result ? { result: { ...e.result, commit: `${id}-${e.result.commit}` } } : {}),
    })),
  }));
  return { ...s, id, rounds, best: s.best ? { ...s.best, commit: `${id}-${s.best.commit}` } : null };
}

describe('runSnapshots', () => {
  const ff = run('fork-and-flush', 1);

  it('takes every episode when the run has fewer than map.snapshots, marking forks and the best', () => {
    const s = runSnapshots(ff, 51);
    expect(s).toHaveLength(ff.rounds.flatMap((r) => r.episodes).length);
    const fork = ff.rounds.filter((r) => r.kind === 'fork');
    expect(s.filter((x) => x.branch === 'selected')).toHaveLength(fork.length);
    expect(s.filter((x) => x.branch === 'rejected')).toHaveLength(fork.length * 3);
    // The fork points of the two later rounds (the opening round's is the initial workspace: not a snapshot).
    expect(s.filter((x) => x.forkPoint).map((x) => x.commit)).toEqual(fork.slice(1).map((r) => r.episodes[0]?.base));
    expect(s.filter((x) => x.final).map((x) => x.commit)).toEqual([ff.best?.commit]);
  });

  it('keeps every fork point, branch end and the best past the limit, and spreads the rest', () => {
    const single = run('single-run', 2);
    const all = runSnapshots(single, 100);
    const few = runSnapshots(single, 5);
    expect(few).toHaveLength(5);
    expect(few.some((x) => x.final)).toBe(true);
    expect(few.at(-1)?.episode).toBe(all.at(-1)?.episode);
    const forks = runSnapshots(ff, 3);
    expect(forks.length).toBeGreaterThan(12);
    expect(forks.filter((x) => x.branch !== null)).toHaveLength(12);
  });
});

describe("the judge's prompts and answers", () => {
  it('asks for a functional spec: what it does, exact numbers, no names or style, the task as data', () => {
    const p = specPrompt({
      task: 'Maximize the satisfied clauses.',
      taskFile: 'TASK.md',
      protected: ['grade.mjs'],
      journal: 'NOTES.md',
    });
    expect(p).toMatch(/functional specification/);
    expect(p).toMatch(/every quantitative choice with its exact value/);
    expect(p).toMatch(/Leave out names \(of files, functions, variables\), formatting/);
    expect(p).toContain('`grade.mjs`, `TASK.md`');
    expect(p).toContain('```text\nMaximize the satisfied clauses.\n```');
    expect(p).toMatch(/read-only: read it, change nothing/);
  });

  it('asks which of A and B is closer to the anchor, with the specs fenced, the answer on the last line', () => {
    const p = tripletPrompt({ anchor: 'uses ```tabu```', a: 'walksat', b: 'greedy' });
    expect(p).toContain('````text\nuses ```tabu```\n````');
    expect(p).toMatch(/Answer with one letter, a or b, alone on the last line/);
    expect(JSON.parse(tripletFile({ id: 'x', spec: 's' }, { id: 'y', spec: 't' }, { id: 'z', spec: 'u' }))).toEqual({
      anchor: { id: 'x', spec: 's' },
      a: { id: 'y', spec: 't' },
      b: { id: 'z', spec: 'u' },
    });
  });

  it("reads a command judge's last stdout line strictly, and an agent's final message leniently", () => {
    expect(readTripletAnswer('thinking\nb\n\n', true)).toEqual({ answer: 'b' });
    expect(readTripletAnswer('a', true)).toEqual({ answer: 'a' });
    expect(readTripletAnswer('B', true)).toEqual({ problem: 'the judge\'s last stdout line was "B", not "a" or "b"' });
    expect(readTripletAnswer('', true)).toEqual({
      problem: 'the judge\'s last stdout line was nothing, not "a" or "b"',
    });
    for (const text of ['A', '**b**', 'Answer: a.', 'Solution B', '`a`', '(b)'])
      expect('answer' in readTripletAnswer(`Both use local search.\n${text}`, false)).toBe(true);
    expect(readTripletAnswer('**Answer: B**', false)).toEqual({ answer: 'b' });
    expect(readTripletAnswer('a or b, hard to say', false)).toEqual({
      problem: 'the judge\'s final message was "a or b, hard to say", not "a" or "b"',
    });
  });

  const recorded = (kind: string, file: string) =>
    readFileSync(join(import.meta.dirname, '..', 'fixtures', 'agents', kind, file), 'utf8');

  it.each([
    ['claude-code', 'fresh.stream.jsonl', 'Wrote notes.txt.'],
    ['codex', 'fresh.stdout.jsonl', 'Wrote 42.'],
    ['copilot', 'fresh.stdout.jsonl', 'Done.'],
    ['gemini', 'result-fresh.stdout.txt', 'All done.'],
    ['opencode', 'fresh.stdout.jsonl', 'All done: wrote x.txt'],
  ])("finds %s's final message in its recorded output", (kind, file, message) => {
    expect(finalMessage(kind as AgentKind, recorded(kind, file))).toBe(message);
  });

  it("finds aider's last reply before its usage line, and a command judge's whole stdout", () => {
    const aider =
      'Aider v0.86\nModel: x\n\nI looked.\nTokens: 1k sent, 9 received.\nBoth search locally.\na\nTokens: 2k sent, 5 received. Cost: $0.01 message, $0.02 session.\n';
    expect(finalMessage('aider', aider)).toBe('Both search locally.\na');
    expect(finalMessage('command', 'spec\nlines\n')).toBe('spec\nlines\n');
    expect(finalMessage('claude-code', 'not json\n')).toBeNull();
  });
});

describe('map: in the config', () => {
  it('defaults to the paper: 51 snapshots, 23.5 judgments a point, 10% held out, the task agent, budget.total', () => {
    const s = mapSettings(config());
    expect(s).toMatchObject({
      snapshots: 51,
      triplets: null,
      heldOut: 0.1,
      budget: 400,
      unit: 'tokens',
      embedding: 'tste',
    });
    expect(s.judge.command).toBe('y');
    expect(tripletCount(s, 255)).toBe(6000);
    expect(tripletCount({ triplets: 90 }, 255)).toBe(90);
  });

  it('takes a judge of any kind with the agent keys, its budget and unit', () => {
    const s = mapSettings(
      config(
        'map:\n  judge: {kind: claude-code, model: haiku, max_turns: 3}\n  budget: 2\n  unit: usd\n  snapshots: 20\n  embedding: soe\n',
      ),
    );
    expect(s.judge).toMatchObject({ kind: 'claude-code', model: 'haiku', max_turns: 3, timeout: 1800 });
    expect(s).toMatchObject({ budget: 2, unit: 'usd', snapshots: 20, embedding: 'soe' });
    expect(
      mapSettings(
        config().budget.unit === 'tokens' ? parseConfig(TEXT.replace('tokens', 'evaluations'), 'e.yml') : config(),
      ),
    ).toMatchObject({ unit: 'minutes', budget: 60 });
  });

  it('says what is wrong with a map: key, where', () => {
    const problems = (extra: string) => {
      try {
        config(extra);
        return [];
      } catch (e) {
        return (e as ConfigError).problems;
      }
    };
    expect(problems('map:\n  judge: {kind: command}\n')).toEqual([
      expect.stringMatching(/map\.judge\.command is required for map\.judge\.kind "command"/),
    ]);
    expect(problems('map:\n  held_out: 0.9\n')).toEqual([
      expect.stringMatching(/map\.held_out must be a fraction above 0 and at most 0\.5, got 0\.9/),
    ]);
    expect(problems('map:\n  unit: usd\n')).toEqual([
      expect.stringMatching(/map\.budget is required when map\.unit \(usd\) is not budget\.unit \(tokens\)/),
    ]);
    expect(problems('map:\n  snapshot: 3\n')).toEqual([
      expect.stringMatching(/t\.yml:5:3: unknown key "map\.snapshot"; did you mean "snapshots"\?/),
    ]);
  });
});

/** A small map of two runs: A's snapshots on the left, B's on the right. */
function smallMap() {
  const snaps: MapSnapshot[] = [];
  for (const [run, strategy] of [
    ['run-a', 'single-run'],
    ['run-b', 'fork-and-flush'],
  ] as const)
    for (let i = 0; i < 6; i++)
      snaps.push({
        run,
        strategy,
        variant: null,
        seed: 1,
        episode: `r${i}.b0`,
        commit: `${run === 'run-a' ? 'a' : 'b'}${i}`.padEnd(40, '0'),
        base: i === 0 ? 'base' : `${run === 'run-a' ? 'a' : 'b'}${i - 1}`.padEnd(40, '0'),
        score: i,
        round: i,
        phase: 'solo',
        lineage: 0,
        path: true,
        forkPoint: false,
        branch: null,
        final: i === 5,
      });
  const x = (id: string) => (id.startsWith('a') ? 0 : 10) + Number(id[1]);
  const questions = newQuestions(
    snaps.map((s) => s.commit),
    400,
    new Set(),
    3,
  );
  return buildMap({
    target: { kind: 'compare', id: 'compare-small' },
    createdAt: '2026-11-30T10:00:00.000Z',
    direction: 'maximize',
    judge: { kind: 'command', label: 'command (node judge.mjs)' },
    embedding: 'tste',
    seed: 24,
    snapshots: snaps,
    judgments: questions.map((q) => ({
      ...q,
      answer: Math.abs(x(q.anchor) - x(q.a)) <= Math.abs(x(q.anchor) - x(q.b)) ? 'a' : 'b',
    })),
    heldOutShare: 0.1,
    failed: { specs: [], judgments: 0, errors: [] },
    calls: { spec: { made: 12, cached: 0, failed: 0 }, triplet: { made: 400, cached: 0, failed: 0 } },
    spent: 123.4,
    unit: 'tokens',
    budget: 1000,
  });
}

describe('the map in words and in a picture', () => {
  const m = smallMap();

  it('says the agreement beside run identity, chance and the paper, and each run by strategy', () => {
    const text = mapText(m).join('\n');
    expect(text).toMatch(/^compare compare-small: 12 points from 2 runs, 2 basins \(silhouette 0\.\d\d\)/);
    expect(text).toMatch(
      /Held-out agreement (0\.\d\d|1\.00) on \d+ judgments \(run identity alone 0\.\d\d, chance 0\.50; the paper: 0\.81–0\.87/,
    );
    expect(text).toContain(
      'judge command (node judge.mjs): 12 specs (0 cached), 400 judgments (0 cached); spent 123.4 of 1000 tokens',
    );
    const section = mapSection(m, { image: 'map.svg' });
    expect(section).toContain('![Idea map: where the agents searched](map.svg)');
    expect(section).toContain('| single-run | - | 1 | 1 | 1: A |');
    expect(heldOut(m.triplets[0] as { anchor: string; a: string; b: string }, 0.1)).toBe(m.triplets[0]?.heldOut);
  });

  it('draws each basin outlined, each run in its colour along its path, the best starred', () => {
    const svg = renderMapSvg(m, { title: 'Idea map of compare compare-small' });
    expect(svg).toContain('<title>Idea map of compare compare-small</title>');
    expect(svg).toMatch(/<title>basin A: 6 snapshots of 1 run<\/title>/);
    const r = new Resvg(svg, { font: { loadSystemFonts: false } }).render();
    const px = r.pixels;
    const at = (x: number, y: number) => {
      const i = (Math.round(y) * r.width + Math.round(x)) * 4;
      return [px[i], px[i + 1], px[i + 2]] as number[];
    };
    const L = mapLayout(m);
    // The basin's fill a little way off a point, inside the outline.
    const p = m.points[0] as (typeof m.points)[number];
    const fill = [1, 3, 5].map((i) => Number.parseInt(MAP_COLORS.basin.slice(i, i + 2), 16));
    const near = (c: number[]) => c.every((v, i) => Math.abs(v - (fill[i] as number)) <= 6);
    const around = [
      [8, 0],
      [-8, 0],
      [0, 8],
      [0, -8],
    ].filter(([dx, dy]) => near(at(L.place(p.x, p.y).x + (dx as number), L.place(p.x, p.y).y + (dy as number))));
    expect(around.length).toBeGreaterThan(0);
    // The best snapshot's star is drawn in its run's colour at its place.
    const best = m.points.find((q) => q.final && q.run === 'run-a') as (typeof m.points)[number];
    const c = at(L.place(best.x, best.y).x, L.place(best.x, best.y).y);
    const want = [1, 3, 5].map((i) => Number.parseInt(L.colorOf(best).slice(i, i + 2), 16));
    expect(c.every((v, i) => Math.abs(v - (want[i] as number)) <= 12)).toBe(true);
  });
});
