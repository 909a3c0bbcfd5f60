// The comparison's Figure 7: best score so far against spend. Each baseline strategy is a band from
// the 10th to the 90th percentile of its runs and their median; fork-and-flush is its median and
// its best run's own trajectory (chart.ts's chartData: fork rounds shaded, adopted branches as
// stars, dropped ones as crosses). The y axis starts where the strategies differ (chart.ts's
// zoomRange over the medians past the first quarter of the budget, every final median in view).
import {
  CHART_COLORS,
  type ChartData,
  chartData,
  crossMark,
  dotMark,
  quantile,
  starMark,
  ticks,
  zoomRange,
} from '../chart.js';
import type { Strategy } from '../config.js';
import type { RunState } from '../state.js';
import { formatNumber } from '../text.js';
import type { CompareManifest } from './plan.js';
import { runDone } from './results.js';

/** Each strategy's colour; variants of one strategy share it, with their own dashes. */
export const STRATEGY_COLORS: Record<Strategy, string> = {
  'fork-and-flush': '#111827',
  'single-run': '#e11d48',
  'best-of-n': '#7c3aed',
  'fork-only': '#0d9488',
  'flush-only': '#ea580c',
};
const DASHES = ['', '7 4', '2 3', '10 3 2 3'];
/** The bands' opacity over white (the PNG test blends with it). */
export const BAND_OPACITY = 0.18;
const GRID = 240;

export interface SeriesPoint {
  x: number;
  p10: number | null;
  p50: number | null;
  p90: number | null;
}

export interface CompareSeries {
  strategy: Strategy;
  variant: string;
  label: string;
  color: string;
  dash: string;
  runs: number;
  /** Baselines with two runs or more: a p10–p90 band under the median. */
  band: boolean;
  points: SeriesPoint[];
}

export interface CompareChartData {
  series: CompareSeries[];
  /** Fork-and-flush's best run, drawn whole. */
  highlight: { run: string; seed: number; label: string; data: ChartData } | null;
  xMax: number;
  yRange: [number, number];
  initial: number | null;
}

export interface ChartGroup {
  strategy: Strategy;
  variant: string;
  /** The group's runs with their seeds. */
  runs: { seed: number; state: RunState }[];
}

/** The chart's groups: each strategy and variant of the plan, with its runs that are done. */
export function chartGroups(m: CompareManifest, states: Map<string, RunState>): ChartGroup[] {
  return m.variants.flatMap((v) =>
    m.strategies.map((strategy) => ({
      strategy,
      variant: v.name,
      runs: m.entries.flatMap((e) => {
        const st = e.run ? states.get(e.run) : undefined;
        return e.strategy === strategy && e.variant === v.name && st && runDone(st)
          ? [{ seed: e.seed, state: st }]
          : [];
      }),
    })),
  );
}

/** The best score so far of a run at a spend (null: nothing scored yet). */
export function bestAt(best: { x: number; y: number }[], x: number): number | null {
  let y: number | null = null;
  for (const p of best) {
    if (p.x <= x + 1e-9) y = p.y;
    else break;
  }
  return y;
}

export function compareChartData(
  groups: ChartGroup[],
  o: { direction: 'maximize' | 'minimize'; budget: number; variants: number },
): CompareChartData {
  const data = groups.map((g) => g.runs.map((r) => ({ ...r, chart: chartData(r.state) })));
  const xMax = Math.max(o.budget, ...data.flat().map((r) => r.chart.xMax));
  const xs = Array.from({ length: GRID + 1 }, (_, i) => (i / GRID) * xMax);
  const good = (y: number) => (o.direction === 'maximize' ? y : -y);
  const series: CompareSeries[] = groups.map((g, gi) => {
    const runs = data[gi] ?? [];
    const points = xs.map((x) => {
      const ys = runs.flatMap((r) => {
        const y = bestAt(r.chart.best, x);
        return y === null ? [] : [y];
      });
      if (ys.length === 0) return { x, p10: null, p50: null, p90: null };
      // In goodness, so that p90 is the better edge whatever the direction.
      const q = (p: number) => good(quantile(ys.map(good), p));
      return { x, p10: q(0.1), p50: q(0.5), p90: q(0.9) };
    });
    const variantIndex = Math.max(0, [...new Set(groups.map((x) => x.variant))].indexOf(g.variant));
    return {
      strategy: g.strategy,
      variant: g.variant,
      label: o.variants > 1 ? `${g.strategy} (${g.variant})` : g.strategy,
      color: STRATEGY_COLORS[g.strategy],
      dash: DASHES[variantIndex % DASHES.length] as string,
      runs: runs.length,
      band: g.strategy !== 'fork-and-flush' && runs.length >= 2,
      points,
    };
  });
  const ff = data.flatMap((runs, gi) => (groups[gi]?.strategy === 'fork-and-flush' ? runs : []));
  const top = ff
    .filter((r) => r.state.best)
    .sort((a, b) => good(b.state.best?.score ?? 0) - good(a.state.best?.score ?? 0) || a.seed - b.seed)[0];
  const highlight = top
    ? {
        run: top.state.id,
        seed: top.seed,
        label: `fork-and-flush's best run (seed ${top.seed})`,
        data: top.chart,
      }
    : null;
  const medians = series.flatMap((s) =>
    s.points.filter((p) => p.x >= 0.25 * o.budget && p.p50 !== null).map((p) => p.p50 as number),
  );
  const finals = series.flatMap((s) => (s.points.at(-1)?.p50 != null ? [s.points.at(-1)?.p50 as number] : []));
  const everything = [
    ...series.flatMap((s) => s.points.flatMap((p) => (p.p90 === null ? [] : [p.p90]))),
    ...(highlight?.data.segments.map((s) => s.y1) ?? []),
  ];
  const best = everything.length > 0 ? good(Math.max(...everything.map(good))) : null;
  const worstFinal = finals.length > 0 ? good(Math.min(...finals.map(good))) : null;
  const initial = ff[0]?.state.base.score ?? groups[0]?.runs[0]?.state.base.score ?? null;
  const yRange = zoomRange({
    direction: o.direction,
    opening: worstFinal === null ? [] : [worstFinal],
    later: medians,
    best,
    initial,
  });
  return { series, highlight, xMax, yRange, initial };
}

/** One panel per baseline, fork-and-flush over each: four bands in one plot would be mud. */
const ONE = { width: 676, height: 320 };
const TWO = { width: 380, height: 230 };
const M = { left: 64, right: 16, title: 22, bottom: 44 };

export interface Panel {
  /** The baseline this panel shows behind fork-and-flush (null: fork-and-flush alone). */
  baseline: CompareSeries | null;
  plot: { x0: number; x1: number; y0: number; y1: number };
  px: (x: number) => number;
  py: (y: number) => number;
  rawY: (y: number) => number;
}

/** The legend's labels, in order: the baselines (one colour each), fork-and-flush's series, the best run's marks. */
function legendLabels(d: CompareChartData): string[] {
  const labels = d.series.map((s) => `${s.label}${s.band ? ': median, p10–p90' : ': median'}`);
  if (d.highlight) labels.push(d.highlight.label, 'adopted', 'dropped', 'serial episode', 'fork round');
  return labels;
}

/** Where each legend item goes: rows above the panels, as many as it takes. */
function legendPlaces(labels: string[], width: number): { x: number; y: number }[] {
  let x = M.left + 10;
  let y = 40;
  return labels.map((label) => {
    const w = 40 + label.length * 6.5;
    if (x + w > width - M.right && x > M.left + 10) {
      x = M.left + 10;
      y += 18;
    }
    const at = { x, y };
    x += w;
    return at;
  });
}

export function compareChartLayout(d: CompareChartData) {
  const baselines = d.series.filter((s) => s.strategy !== 'fork-and-flush');
  const wanted: (CompareSeries | null)[] = baselines.length > 0 ? baselines : [null];
  const cols = wanted.length === 1 ? 1 : 2;
  const size = cols === 1 ? ONE : TWO;
  const outer = { width: M.left + size.width + M.right, height: M.title + size.height + M.bottom };
  const width = cols * outer.width;
  const legend = legendPlaces(legendLabels(d), width);
  const top = (legend.at(-1)?.y ?? 40) + 16;
  // And a line at the bottom for the initial score, when it is off the axes.
  const height = top + Math.ceil(wanted.length / cols) * outer.height + 18;
  const [yMin, yMax] = d.yRange;
  const panels: Panel[] = wanted.map((baseline, i) => {
    const x0 = (i % cols) * outer.width + M.left;
    const y0 = top + Math.floor(i / cols) * outer.height + M.title;
    const plot = { x0, x1: x0 + size.width, y0, y1: y0 + size.height };
    const px = (x: number) => plot.x0 + (x / (d.xMax || 1)) * size.width;
    const rawY = (y: number) => plot.y1 - ((y - yMin) / (yMax - yMin)) * size.height;
    const py = (y: number) => Math.min(plot.y1, Math.max(plot.y0, rawY(y)));
    return { baseline, plot, px, py, rawY };
  });
  return { width, height, legend, panels };
}

export function renderCompareChartSvg(d: CompareChartData, o: { title: string; unit: string }): string {
  const { width: W, height: H, legend, panels } = compareChartLayout(d);
  const f = (n: number) => n.toFixed(1);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="12">`,
    `<title>${esc(o.title)}</title>`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${M.left}" y="20" font-size="14" font-weight="600">${esc(o.title)}</text>`,
  ];
  const ff = d.series.filter((s) => s.strategy === 'fork-and-flush');
  for (const panel of panels) out.push(...drawPanel(d, panel, ff, o.unit, f));
  const p0 = panels[0] as Panel;
  if (d.initial !== null && (p0.rawY(d.initial) > p0.plot.y1 + 0.5 || p0.rawY(d.initial) < p0.plot.y0 - 0.5)) {
    const below = p0.rawY(d.initial) > p0.plot.y1;
    out.push(
      `<text x="8" y="${H - 8}" fill="#374151">initial ${formatNumber(d.initial, 4)} (${below ? 'below' : 'above'} the axes)</text>`,
    );
  }
  // The legend, in rows above the panels.
  const labels = legendLabels(d);
  const items: ((x: number, y: number) => string)[] = d.series.map(
    (s) => (x, y) =>
      `${s.band ? `<rect x="${x - 9}" y="${y - 6}" width="18" height="12" fill="${s.color}" fill-opacity="${BAND_OPACITY}"/>` : ''}` +
      `<line x1="${x - 9}" y1="${y}" x2="${x + 9}" y2="${y}" stroke="${s.color}" stroke-width="${s.strategy === 'fork-and-flush' ? 3 : 2}"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`,
  );
  if (d.highlight) {
    items.push(
      (x, y) =>
        `<line x1="${x - 9}" y1="${y}" x2="${x + 9}" y2="${y}" stroke="${CHART_COLORS.adopted}" stroke-width="1.5"/>`,
      (x, y) => starMark([x, y], CHART_COLORS.adopted),
      (x, y) => crossMark([x, y], CHART_COLORS.dropped),
      (x, y) => dotMark([x, y], CHART_COLORS.kept),
      (x, y) => `<rect x="${x - 9}" y="${y - 6}" width="18" height="12" fill="${CHART_COLORS.forkRound}"/>`,
    );
  }
  items.forEach((mark, i) => {
    const at = legend[i] as { x: number; y: number };
    out.push(mark(at.x, at.y), `<text x="${at.x + 14}" y="${at.y + 4}">${esc(labels[i] ?? '')}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** One panel: its baseline's band and median behind fork-and-flush's best run and median(s). */
function drawPanel(
  d: CompareChartData,
  p: Panel,
  ff: CompareSeries[],
  unit: string,
  f: (n: number) => string,
): string[] {
  const { plot, px, py } = p;
  const out: string[] = [];
  const name = p.baseline ? `${p.baseline.label} and fork-and-flush` : 'fork-and-flush';
  out.push(`<text x="${plot.x0}" y="${plot.y0 - 7}" font-weight="600">${esc(name)}</text>`);
  // Under everything: the fork rounds of fork-and-flush's best run.
  for (const r of d.highlight?.data.forkRounds ?? []) {
    out.push(
      `<rect x="${f(px(r.x0))}" y="${plot.y0}" width="${f(Math.max(1, px(r.x1) - px(r.x0)))}" height="${plot.y1 - plot.y0}" fill="${CHART_COLORS.forkRound}"/>`,
    );
  }
  out.push(`<g stroke="#374151"><line x1="${plot.x0}" y1="${plot.y1}" x2="${plot.x1}" y2="${plot.y1}"/>`);
  out.push(`<line x1="${plot.x0}" y1="${plot.y0}" x2="${plot.x0}" y2="${plot.y1}"/></g>`);
  for (const t of ticks(0, d.xMax)) {
    out.push(`<line x1="${f(px(t))}" y1="${plot.y1}" x2="${f(px(t))}" y2="${plot.y1 + 4}" stroke="#374151"/>`);
    out.push(`<text x="${f(px(t))}" y="${plot.y1 + 17}" text-anchor="middle">${formatNumber(t)}</text>`);
  }
  for (const t of ticks(d.yRange[0], d.yRange[1])) {
    out.push(`<line x1="${plot.x0 - 4}" y1="${f(py(t))}" x2="${plot.x1}" y2="${f(py(t))}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${plot.x0 - 8}" y="${f(py(t) + 4)}" text-anchor="end">${formatNumber(t, 4)}</text>`);
  }
  out.push(
    `<text x="${(plot.x0 + plot.x1) / 2}" y="${plot.y1 + 34}" text-anchor="middle">spend (${esc(unit)})</text>`,
    `<text transform="translate(${plot.x0 - 50} ${(plot.y0 + plot.y1) / 2}) rotate(-90)" text-anchor="middle">best score so far</text>`,
  );
  const path = (s: CompareSeries, key: 'p10' | 'p50' | 'p90') => {
    let d0 = '';
    let open = false;
    for (const q of s.points) {
      const y = q[key];
      if (y === null) {
        open = false;
        continue;
      }
      d0 += `${open ? 'L' : 'M'}${f(px(q.x))} ${f(py(y))}`;
      open = true;
    }
    return d0;
  };
  const b = p.baseline;
  const pts = b?.band ? b.points.filter((q) => q.p10 !== null && q.p90 !== null) : [];
  if (b && pts.length > 0) {
    const upper = pts.map((q) => `${f(px(q.x))},${f(py(q.p90 as number))}`);
    const lower = [...pts].reverse().map((q) => `${f(px(q.x))},${f(py(q.p10 as number))}`);
    out.push(
      `<polygon points="${[...upper, ...lower].join(' ')}" fill="${b.color}" fill-opacity="${BAND_OPACITY}"><title>${esc(b.label)}: 10th to 90th percentile of ${b.runs} runs</title></polygon>`,
    );
  }
  const line = (s: CompareSeries) =>
    `<path d="${path(s, 'p50')}" fill="none" stroke="${s.color}" stroke-width="${s.strategy === 'fork-and-flush' ? 3 : 2}"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}><title>${esc(s.label)}: median of ${s.runs} runs</title></path>`;
  if (b) out.push(line(b));
  // fork-and-flush's best run: its branches, thin, with the run chart's marks; its median(s) on top.
  const marks: string[] = [];
  const h = d.highlight;
  if (h) {
    for (const s of [...h.data.segments].sort((x, y) => order(x.outcome) - order(y.outcome))) {
      const color =
        s.outcome === 'adopted'
          ? CHART_COLORS.adopted
          : s.outcome === 'dropped'
            ? CHART_COLORS.dropped
            : CHART_COLORS.kept;
      if (s.y0 !== null)
        out.push(
          `<line x1="${f(px(s.x0))}" y1="${f(py(s.y0))}" x2="${f(px(s.x1))}" y2="${f(py(s.y1))}" stroke="${color}" stroke-width="1"${s.outcome === 'dropped' ? ' stroke-dasharray="3 3"' : ''}/>`,
        );
      const at = [px(s.x1), py(s.y1)] as const;
      const mark =
        s.outcome === 'adopted'
          ? starMark(at, color)
          : s.outcome === 'dropped'
            ? crossMark(at, color)
            : dotMark(at, color);
      marks.push(`<g><title>${esc(s.id)}: ${formatNumber(s.y1, 4)} (${s.outcome})</title>${mark}</g>`);
    }
    const best = h.data.best.map((q, i) => (i > 0 ? `H${f(px(q.x))}V${f(py(q.y))}` : `M${f(px(q.x))} ${f(py(q.y))}`));
    out.push(`<path d="${best.join('')}" fill="none" stroke="${CHART_COLORS.adopted}" stroke-width="1.5"/>`);
  }
  out.push(...ff.map(line), ...marks);
  return out;
}

const order = (o: string) => (o === 'dropped' ? 0 : o === 'adopted' ? 2 : 1);

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
