// The comparison's Figure 7 as a person sees it: rendered to pixels (resvg), then checked where it
// matters: each baseline's p10–p90 band and its median, fork-and-flush's median, its best run's
// fork rounds shaded and adopted branches as stars, the y axis where the strategies differ.
import { Resvg } from '@resvg/resvg-js';
import { describe, expect, it } from 'vitest';
import { CHART_COLORS, chartData } from '../../src/core/chart.js';
import {
  BAND_OPACITY,
  bestAt,
  type ChartGroup,
  compareChartData,
  compareChartLayout,
  renderCompareChartSvg,
  STRATEGY_COLORS,
} from '../../src/core/compare/chart.js';
import { parseConfig, type Strategy } from '../../src/core/config.js';
import { simulate } from '../../src/core/plan.js';
import type { Episode, RunState } from '../../src/core/state.js';

const TEXT = 'grader: {command: x}\nagent: {command: y}\nbudget: {total: 400, unit: tokens, episode: 24}\n';

function run(strategy: Strategy, seed: number, score: (e: Episode) => number): RunState {
  const s = simulate(
    parseConfig(`${TEXT}strategy: ${strategy}\n`, 't.yml'),
    (e) => ({ spent: e.allowance, score: score(e) }),
    seed,
  );
  return { ...s, id: `${strategy}-${seed}`, base: { ...s.base, score: 0 } };
}

const SEEDS = [1, 2, 3, 4, 5];
const groups: ChartGroup[] = [
  {
    strategy: 'single-run',
    variant: 'as-is',
    runs: SEEDS.map((seed) => ({ seed, state: run('single-run', seed, (e) => 60 + 3 * seed + e.round * 0.5) })),
  },
  {
    strategy: 'fork-and-flush',
    variant: 'as-is',
    runs: SEEDS.map((seed) => ({
      seed,
      state: run('fork-and-flush', seed, (e) => 70 + 2 * seed + e.round + (e.branch === 1 ? 1.5 : 0)),
    })),
  },
];

function render(svg: string) {
  const r = new Resvg(svg, { font: { loadSystemFonts: false } }).render();
  const pixels = r.pixels;
  const at = (x: number, y: number) => {
    const i = (Math.round(y) * r.width + Math.round(x)) * 4;
    return [pixels[i], pixels[i + 1], pixels[i + 2]] as [number, number, number];
  };
  return { width: r.width, height: r.height, at };
}

const rgb = (hex: string) => [1, 3, 5].map((i) => Number.parseInt(hex.slice(i, i + 2), 16)) as [number, number, number];
const near = (a: number[], c: number[], tolerance = 12) => c.every((v, i) => Math.abs(v - (a[i] ?? -999)) <= tolerance);
/** A colour at the band's opacity over white. */
const over = (hex: string, under = [255, 255, 255]) =>
  rgb(hex).map((c, i) => (under[i] ?? 255) + (c - (under[i] ?? 255)) * BAND_OPACITY);

describe('the comparison chart, rendered', () => {
  const d = compareChartData(groups, { direction: 'maximize', budget: 400, variants: 1 });
  const layout = compareChartLayout(d);
  const { plot, px, py, rawY } = layout.panels[0] as (typeof layout.panels)[0];
  const svg = renderCompareChartSvg(d, { title: 'compare test', unit: 'tokens' });
  const img = render(svg);
  const sr = d.series[0] as NonNullable<(typeof d.series)[0]>;
  const ff = d.series[1] as NonNullable<(typeof d.series)[1]>;

  it('computes each strategy’s percentiles of best-so-far over its runs at each spend', () => {
    const p = sr.points.find((x) => x.x >= 300) as NonNullable<(typeof sr.points)[0]>;
    const values = groups[0]?.runs.map((r) => bestAt(chartData(r.state).best, p.x)) ?? [];
    const [a, b, c, e, f] = [...(values as number[])].sort((x, y) => x - y) as [number, number, number, number, number];
    expect(p.p50).toBe(c);
    expect(p.p10).toBeCloseTo(a + (b - a) * 0.4, 9);
    expect(p.p90).toBeCloseTo(e + (f - e) * 0.6, 9);
    expect(sr.band).toBe(true);
    expect(ff.band).toBe(false);
    expect([img.width, img.height]).toEqual([layout.width, layout.height]);
  });

  it('draws the baseline’s band between its p10 and p90, and its median on it', () => {
    let checked = 0;
    for (const p of sr.points.filter((x) => x.x > 120 && x.x < 390 && x.p10 !== null && x.p90 !== null)) {
      const [lo, hi, mid] = [py(p.p10 as number), py(p.p90 as number), py(p.p50 as number)];
      if (lo - hi < 14) continue;
      const x = px(p.x);
      // Not on the antialiased edge of a fork round's shade.
      if (
        (d.highlight?.data.forkRounds ?? []).some((r) => Math.min(Math.abs(px(r.x0) - x), Math.abs(px(r.x1) - x)) < 3)
      )
        continue;
      // Inside the band, away from its median: the band's colour (over white or a fork round's shade).
      const y = Math.abs((lo + mid) / 2 - mid) > 4 ? (lo + mid) / 2 : (hi + mid) / 2;
      const c = img.at(x, y);
      expect(
        near(c, over(STRATEGY_COLORS['single-run'])) ||
          near(c, over(STRATEGY_COLORS['single-run'], rgb(CHART_COLORS.forkRound))),
        `${c} at ${x},${y}`,
      ).toBe(true);
      // Outside it, a little below p10: no band.
      if (lo + 5 < plot.y1) expect(near(img.at(x, lo + 5), over(STRATEGY_COLORS['single-run']))).toBe(false);
      expect(count(img, rgb(STRATEGY_COLORS['single-run']), x, mid - 1, x, mid + 1)).toBeGreaterThan(0);
      checked++;
    }
    expect(checked).toBeGreaterThan(20);
  });

  it("draws fork-and-flush's median, thick, and its best run with stars at the adopted branches", () => {
    for (const p of ff.points.filter((x) => x.x > 110 && x.x < 390).filter((_, i) => i % 7 === 0)) {
      const x = px(p.x);
      const y = py(p.p50 as number);
      expect(count(img, rgb(STRATEGY_COLORS['fork-and-flush']), x, y - 1.5, x, y + 1.5), `${x},${y}`).toBeGreaterThan(
        0,
      );
    }
    expect(d.highlight?.seed).toBe(5);
    const adopted = d.highlight?.data.segments.filter((s) => s.outcome === 'adopted') ?? [];
    expect(adopted.length).toBe(3);
    for (const s of adopted) {
      const [x, y] = [px(s.x1), py(s.y1)];
      expect(count(img, rgb(CHART_COLORS.adopted), x - 1, y - 7, x + 1, y - 5)).toBeGreaterThan(0);
    }
  });

  it("shades the best run's fork rounds", () => {
    const rounds = d.highlight?.data.forkRounds ?? [];
    expect(rounds.length).toBe(3);
    for (const r of rounds)
      expect(near(img.at((px(r.x0) + px(r.x1)) / 2, plot.y0 + 3), rgb(CHART_COLORS.forkRound), 3)).toBe(true);
    const between = (px(rounds[0]?.x1 ?? 0) + px(rounds[1]?.x0 ?? 0)) / 2;
    expect(near(img.at(between, plot.y0 + 3), [255, 255, 255], 3)).toBe(true);
  });

  it('puts the y axis where the strategies differ: the initial score is below it, every final median in it', () => {
    expect(rawY(0)).toBeGreaterThan(plot.y1);
    for (const s of d.series) {
      const last = s.points.at(-1)?.p50 as number;
      expect(rawY(last)).toBeGreaterThan(plot.y0);
      expect(rawY(last)).toBeLessThan(plot.y1);
    }
    // The medians past the first quarter fill most of the height.
    const medians = d.series.flatMap((s) => s.points.filter((p) => p.x > 100).map((p) => p.p50 as number));
    expect((py(Math.min(...medians)) - py(Math.max(...medians))) / (plot.y1 - plot.y0)).toBeGreaterThan(0.6);
    expect(svg).toContain('initial 0 (below the axes)');
  });

  it('gives each baseline a panel of its own, fork-and-flush over each', () => {
    const more: ChartGroup[] = [
      ...groups,
      {
        strategy: 'best-of-n',
        variant: 'as-is',
        runs: SEEDS.map((seed) => ({ seed, state: run('best-of-n', seed, (e) => 65 + seed + e.round) })),
      },
    ];
    const d2 = compareChartData(more, { direction: 'maximize', budget: 400, variants: 1 });
    const l2 = compareChartLayout(d2);
    expect(l2.panels.map((p) => p.baseline?.strategy)).toEqual(['single-run', 'best-of-n']);
    const img2 = render(renderCompareChartSvg(d2, { title: 't', unit: 'tokens' }));
    expect([img2.width, img2.height]).toEqual([l2.width, l2.height]);
    for (const p of l2.panels) {
      const other = p.baseline?.strategy === 'single-run' ? 'best-of-n' : 'single-run';
      const own = p.baseline?.strategy as Strategy;
      let ownLine = 0;
      let otherLine = 0;
      for (let x = p.plot.x0 + 2; x < p.plot.x1; x += 2) {
        ownLine += count(img2, rgb(STRATEGY_COLORS[own]), x, p.plot.y0, x, p.plot.y1);
        otherLine += count(img2, rgb(STRATEGY_COLORS[other]), x, p.plot.y0, x, p.plot.y1);
      }
      expect(ownLine, own).toBeGreaterThan(50);
      expect(otherLine, `${other} in the panel of ${own}`).toBe(0);
    }
  });
});

function count(img: ReturnType<typeof render>, c: number[], x0: number, y0: number, x1: number, y1: number): number {
  let n = 0;
  for (let y = Math.floor(y0); y <= Math.ceil(y1); y++)
    for (let x = Math.floor(x0); x <= Math.ceil(x1); x++) if (near(img.at(x, y), c)) n++;
  return n;
}
