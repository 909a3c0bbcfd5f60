// The run chart as a person sees it: rendered to pixels (resvg), then checked where it matters:
// fork rounds shaded, the y axis zoomed so the gains after the opening round are visible, adopted
// branches as stars, dropped ones as crosses, the initial score as an arrow off the axis.
import { Resvg } from '@resvg/resvg-js';
import { describe, expect, it } from 'vitest';
import { CHART_COLORS, chartData, chartLayout, quantile, renderChartSvg, zoomRange } from '../../src/core/chart.js';
import { parseConfig } from '../../src/core/config.js';
import { simulate } from '../../src/core/plan.js';
import type { Episode, RunState } from '../../src/core/state.js';

/** A run like the bundled example's: a big jump in the opening round, then small gains. */
function exampleRun(direction: 'maximize' | 'minimize' = 'maximize'): RunState {
  const sign = direction === 'maximize' ? 1 : -1;
  const score = (e: Episode) => {
    const [r, b] = e.id.slice(1).split('.b').map(Number) as [number, number];
    if (r === 0) return sign * ([98.6, 98.9, 88.1, 98.2][b] ?? 0);
    return sign * (98.9 + 0.04 * r + (b === 1 ? 0.03 : -0.02 * b));
  };
  const s = simulate(
    parseConfig(
      `grader: {command: x, direction: ${direction}}\nagent: {command: y}\nbudget: {total: 400, unit: tokens, episode: 24}\n`,
      't.yml',
    ),
    (e) => ({ spent: e.allowance, score: score(e) }),
    1,
  );
  return { ...s, base: { ...s.base, score: sign * 87.3 } };
}

function render(state: RunState) {
  // Text needs fonts a CI machine may lack; the checks look at shapes and colours only.
  const r = new Resvg(renderChartSvg(state), { font: { loadSystemFonts: false } }).render();
  // RGBA, read once (each read of .pixels copies the image).
  const pixels = r.pixels;
  const at = (x: number, y: number) => {
    const i = (Math.round(y) * r.width + Math.round(x)) * 4;
    return [pixels[i], pixels[i + 1], pixels[i + 2]] as [number, number, number];
  };
  return { width: r.width, height: r.height, at };
}

const rgb = (hex: string) => [1, 3, 5].map((i) => Number.parseInt(hex.slice(i, i + 2), 16)) as [number, number, number];
const near = (a: number[], hex: string, tolerance = 10) =>
  rgb(hex).every((c, i) => Math.abs(c - (a[i] ?? -999)) <= tolerance);

/** How many pixels of the box around (x, y) have this colour. */
function count(img: ReturnType<typeof render>, hex: string, x0: number, y0: number, x1: number, y1: number): number {
  let n = 0;
  for (let y = Math.max(0, Math.floor(y0)); y <= Math.min(img.height - 1, y1); y++) {
    for (let x = Math.max(0, Math.floor(x0)); x <= Math.min(img.width - 1, x1); x++) if (near(img.at(x, y), hex)) n++;
  }
  return n;
}

describe('the run chart, rendered', () => {
  const state = exampleRun();
  const d = chartData(state);
  const { plot, px, py } = chartLayout(d);
  const img = render(state);

  it('renders at its size', () => {
    expect([img.width, img.height]).toEqual([plot.width, plot.height]);
  });

  it('shades each fork round and nothing between them', () => {
    expect(d.forkRounds.map((r) => r.index)).toEqual([0, 3, 6]);
    const column = (x: number) =>
      count(img, CHART_COLORS.forkRound, x, plot.y0 + 1, x, plot.y1 - 1) / (plot.y1 - plot.y0);
    for (const r of d.forkRounds) expect(column((px(r.x0) + px(r.x1)) / 2 + 3)).toBeGreaterThan(0.6);
    const solo = state.rounds[1] as RunState['rounds'][number];
    const soloStart = d.forkRounds[0]?.x1 ?? 0;
    expect(column(px(soloStart) + 12)).toBe(0);
    expect(solo.kind).toBe('serial');
  });

  it('zooms the y axis: the gains after the opening round take most of its height', () => {
    // The best-so-far line's pixels right of the opening round.
    let top = Number.POSITIVE_INFINITY;
    let bottom = 0;
    const openingEnd = px(d.forkRounds[0]?.x1 ?? 0) + 3;
    for (let x = Math.ceil(openingEnd); x < plot.x1; x++) {
      for (let y = plot.y0; y <= plot.y1; y++) {
        if (near(img.at(x, y), CHART_COLORS.best, 12)) {
          top = Math.min(top, y);
          bottom = Math.max(bottom, y);
        }
      }
    }
    // From the opening round's best (98.9) to the best (99.22): linear from 87.3 it would be 3%.
    expect((bottom - top) / (plot.y1 - plot.y0)).toBeGreaterThan(0.6);
  });

  it('marks adopted branches with stars and dropped ones with crosses, where they ended', () => {
    const adopted = d.segments.filter((s) => s.outcome === 'adopted');
    const dropped = d.segments.filter((s) => s.outcome === 'dropped' && !chartLayout(d).off(s.y1));
    expect(adopted.length).toBe(3);
    expect(dropped.length).toBeGreaterThan(3);
    for (const s of adopted) {
      // A star's points reach 7 px from its centre; a dot's 3.5.
      const [x, y] = [px(s.x1), py(s.y1)];
      expect(count(img, CHART_COLORS.adopted, x - 1, y - 7, x + 1, y - 5)).toBeGreaterThan(0);
      expect(count(img, CHART_COLORS.adopted, x - 2, y - 2, x + 2, y + 2)).toBeGreaterThan(10);
    }
    for (const s of dropped) {
      // A cross: its arms' ends are coloured, its centre's neighbours left and right are not.
      const [x, y] = [px(s.x1), py(s.y1)];
      expect(count(img, CHART_COLORS.dropped, x - 4, y - 4, x - 3, y - 3)).toBeGreaterThan(0);
      expect(count(img, CHART_COLORS.dropped, x + 3, y + 3, x + 4, y + 4)).toBeGreaterThan(0);
    }
  });

  it('marks the initial score, below the axis, with an arrow under its corner', () => {
    expect(chartLayout(d).off(87.3)).toBe(true);
    expect(count(img, '#374151', plot.x0 - 50, plot.height - 22, plot.x0 - 42, plot.height - 10)).toBeGreaterThan(15);
    expect(renderChartSvg(state)).toContain('<title>initial score 87.3, off the axis</title>');
  });

  it('labels the best score', () => {
    const best = d.best.at(-1)?.y;
    expect(best).toBeCloseTo(99.22, 9);
    expect(renderChartSvg(state)).toContain('>best 99.22</text>');
  });
});

describe('zoomRange', () => {
  it('runs from the worse of the opening best and the later 10th percentile to the best, padded 8%', () => {
    const [lo, hi] = zoomRange({
      direction: 'maximize',
      opening: [10, 90],
      later: [91, 92, 95, 60],
      best: 95,
      initial: 0,
    });
    const floor = Math.min(90, quantile([91, 92, 95, 60], 0.1));
    expect(floor).toBeCloseTo(69.3, 9);
    expect([lo, hi]).toEqual([floor - (95 - floor) * 0.08, 95 + (95 - floor) * 0.08]);
  });

  it('turns round for minimize, and falls back to every score or the initial one', () => {
    const [lo, hi] = zoomRange({
      direction: 'minimize',
      opening: [12, 30],
      later: [11, 10.5],
      best: 10.5,
      initial: 50,
    });
    // The floor is the opening's best (12): the later scores are all better.
    expect(lo).toBeCloseTo(10.5 - 1.5 * 0.08, 9);
    expect(hi).toBeCloseTo(12 + 1.5 * 0.08, 9);
    expect(zoomRange({ direction: 'maximize', opening: [], later: [], best: 5, initial: 5 })).toEqual([4.42, 5.58]);
    expect(zoomRange({ direction: 'maximize', opening: [], later: [], best: null, initial: null })).toEqual([0, 1]);
  });

  it('stays finite for scores near the largest double, of either sign', () => {
    for (const scores of [[1.7e308], [-1.7e308, 1.7e308], [Number.MAX_VALUE, -Number.MAX_VALUE, 0]]) {
      const base = exampleRun();
      const episodes = base.rounds.flatMap((r) => r.episodes);
      const state: RunState = {
        ...base,
        rounds: base.rounds.map((r) => ({
          ...r,
          episodes: r.episodes.map((e) => ({
            ...e,
            ...(e.result
              ? { result: { ...e.result, score: scores[episodes.indexOf(e) % scores.length] as number } }
              : {}),
          })),
        })),
      };
      const svg = renderChartSvg(state);
      expect(svg, String(scores)).not.toMatch(/NaN|Infinity/);
    }
  });

  it('draws a minimized run with the same zoom', () => {
    const min = chartData(exampleRun('minimize'));
    const max = chartData(exampleRun('maximize'));
    expect(min.yRange.map((v) => -v).reverse()).toEqual(max.yRange.map((v) => expect.closeTo(v, 9)));
  });
});
