// Score versus spend. The x axis is the run's cumulative spend. Each episode is a segment from
// where its round started (the spend so far, the parent's score) to where the round ended (the
// spend after it, its own score), so a fork round fans out from one point and the adopted branch
// leads on into the next round. The best-so-far line steps up at the end of each round.
import { charged } from './budget.js';
import { type Outcome, outcomeOf } from './report.js';
import type { RunState } from './state.js';
import { formatNumber } from './text.js';

export interface ChartSegment {
  id: string;
  x0: number;
  y0: number | null;
  x1: number;
  y1: number;
  outcome: Outcome;
}

export interface ChartData {
  segments: ChartSegment[];
  /** Failed episodes (no score), at the spend where they ended. */
  failures: { id: string; x: number }[];
  best: { x: number; y: number }[];
  forkPoints: number[];
  /** The spend each fork round spans, shaded in the chart. */
  forkRounds: { index: number; x0: number; x1: number }[];
  initial: number | null;
  xMax: number;
  /** The y axis: where the differences are (zoomRange); scores outside it sit on its edge. */
  yRange: [number, number];
}

export function chartData(state: RunState): ChartData {
  const c = state.config;
  const better = (a: number, b: number) => (c.grader.direction === 'maximize' ? a > b : a < b);
  const headScore = new Map<number, number | null>(state.lineages.map((l) => [l.index, state.base.score]));
  const segments: ChartSegment[] = [];
  const failures: { id: string; x: number }[] = [];
  const best: { x: number; y: number }[] = [];
  const forkRounds: ChartData['forkRounds'] = [];
  let bestScore = state.base.score;
  if (bestScore !== null) best.push({ x: 0, y: bestScore });
  let x = 0;
  for (const round of state.rounds) {
    const x1 = x + round.episodes.reduce((sum, e) => sum + charged(e), 0);
    if (round.kind === 'fork' && x1 > x) forkRounds.push({ index: round.index, x0: x, x1 });
    for (const e of round.episodes) {
      const r = e.result;
      if (!r) continue;
      if (r.score === null) failures.push({ id: e.id, x: x1 });
      else {
        const y0 = headScore.get(e.lineage) ?? null;
        segments.push({ id: e.id, x0: x, y0, x1, y1: r.score, outcome: outcomeOf(round, e) });
      }
    }
    x = x1;
    for (const e of round.episodes) {
      if (round.decision?.adopted.includes(e.id)) headScore.set(e.lineage, e.result?.score ?? null);
      const s = e.result?.score;
      if (s !== null && s !== undefined && (bestScore === null || better(s, bestScore))) bestScore = s;
    }
    if (bestScore !== null) best.push({ x, y: bestScore });
  }
  const forkPoints =
    c.strategy === 'single-run' || c.strategy === 'best-of-n' ? [] : c.fork.at.map((a) => a * c.budget.total);
  const opening = state.rounds[0]?.episodes.flatMap((e) => (e.result?.score == null ? [] : [e.result.score])) ?? [];
  const later = state.rounds
    .slice(1)
    .flatMap((r) => r.episodes.flatMap((e) => (e.result?.score == null ? [] : [e.result.score])));
  return {
    segments,
    failures,
    best,
    forkPoints,
    forkRounds,
    initial: state.base.score,
    xMax: Math.max(c.budget.total, x),
    yRange: zoomRange({ direction: c.grader.direction, opening, later, best: bestScore, initial: state.base.score }),
  };
}

/**
 * The y axis runs from the worse of the opening round's best and the 10th percentile of the later
 * rounds' scores, to the best score: after the opening round the gains are small next to the
 * jump from an empty workspace, and an axis from the initial score would flatten them into a line.
 * Without an opening score the floor is the 10th percentile of every score. The initial score,
 * and the few scores worse than the floor, sit on the axis's edge, marked as off the axis.
 */
export function zoomRange(o: {
  direction: 'maximize' | 'minimize';
  opening: number[];
  later: number[];
  best: number | null;
  initial: number | null;
}): [number, number] {
  const sign = o.direction === 'maximize' ? 1 : -1;
  // In "goodness" (higher is better) the floor is a low value; back to scores at the end.
  const good = (xs: number[]) => xs.map((v) => v * sign);
  const floors: number[] = [];
  if (o.opening.length > 0) floors.push(Math.max(...good(o.opening)));
  if (o.later.length > 0) floors.push(quantile(good(o.later), 0.1));
  if (floors.length === 0 && o.initial !== null) floors.push(o.initial * sign);
  if (o.best === null || floors.length === 0) return paddedRange(o.initial === null ? [] : [o.initial]);
  const floor = Math.min(...floors) * sign;
  return paddedRange([floor, o.best]);
}

/** The q-quantile (0..1) of values, interpolated between order statistics. */
export function quantile(values: number[], q: number): number {
  const xs = [...values].sort((a, b) => a - b);
  const at = (xs.length - 1) * q;
  const lo = Math.floor(at);
  const a = xs[lo] as number;
  const b = xs[Math.min(lo + 1, xs.length - 1)] as number;
  return a + (b - a) * (at - lo);
}

const W = 760;
const H = 400;
const M = { left: 64, right: 20, top: 48, bottom: 52 };
const COLORS: Record<Outcome, string> = {
  adopted: '#1d4ed8',
  kept: '#15803d',
  dropped: '#9ca3af',
  undecided: '#d97706',
};
/** The fork rounds' shading, and the colours the PNG test looks for. */
export const CHART_COLORS = { ...COLORS, best: '#111827', forkRound: '#fef3c7', failed: '#dc2626' } as const;

/** Where the chart draws a spend and a score, in SVG pixels. */
export function chartLayout(d: ChartData) {
  const [yMin, yMax] = d.yRange;
  const plot = { x0: M.left, x1: W - M.right, y0: M.top, y1: H - M.bottom, width: W, height: H };
  const px = (x: number) => plot.x0 + (x / (d.xMax || 1)) * (plot.x1 - plot.x0);
  // In halves: a score near the largest double would overflow a difference to Infinity.
  const rawY = (y: number) => plot.y1 - ((y / 2 - yMin / 2) / (yMax / 2 - yMin / 2)) * (plot.y1 - plot.y0);
  // Scores off the axis sit on its edge.
  const py = (y: number) => Math.min(plot.y1, Math.max(plot.y0, rawY(y)));
  const off = (y: number) => rawY(y) > plot.y1 + 0.5 || rawY(y) < plot.y0 - 0.5;
  return { plot, px, rawY, py, off };
}

export function renderChartSvg(state: RunState): string {
  const d = chartData(state);
  const layout = chartLayout(d);
  const unit = state.config.budget.unit;
  const initialOff = d.initial !== null && layout.off(d.initial);
  const { lines, marks } = episodeMarks(d, layout);
  return `${[
    // 1. The frame and its title; the fork rounds first, under everything else.
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="12">`,
    `<title>forkflush run ${esc(state.id)}: score versus spend</title>`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${M.left}" y="20" font-size="14" font-weight="600">Score versus spend (${esc(state.config.grader.direction)})</text>`,
    ...forkRoundBands(d, layout, unit),
    // 2. The axes, and the initial score where it is off them.
    ...axes(d, layout, unit),
    ...(initialOff && d.initial !== null ? [initialArrow(d.initial, layout)] : []),
    // 3. Each episode's line; the best so far over them; each episode's mark on top.
    ...lines,
    ...bestLine(d, layout, initialOff),
    ...marks,
    ...bestLabel(d, layout),
    // 4. The legend.
    ...legend(d),
    '</svg>',
  ].join('\n')}\n`;
}

type Layout = ReturnType<typeof chartLayout>;
const f = (n: number) => n.toFixed(1);

function forkRoundBands(d: ChartData, { plot, px }: Layout, unit: string): string[] {
  return d.forkRounds.map(
    (r) =>
      `<rect x="${f(px(r.x0))}" y="${plot.y0}" width="${f(Math.max(1, px(r.x1) - px(r.x0)))}" height="${plot.y1 - plot.y0}" fill="${CHART_COLORS.forkRound}"><title>fork round ${r.index}: ${formatNumber(r.x0, 3)} to ${formatNumber(r.x1, 3)} ${esc(unit)}</title></rect>`,
  );
}

function axes(d: ChartData, { plot, px, py }: Layout, unit: string): string[] {
  const [yMin, yMax] = d.yRange;
  const out = [
    `<g stroke="#374151"><line x1="${plot.x0}" y1="${plot.y1}" x2="${plot.x1}" y2="${plot.y1}"/>`,
    `<line x1="${plot.x0}" y1="${plot.y0}" x2="${plot.x0}" y2="${plot.y1}"/></g>`,
  ];
  for (const t of ticks(0, d.xMax)) {
    out.push(`<line x1="${f(px(t))}" y1="${plot.y1}" x2="${f(px(t))}" y2="${plot.y1 + 4}" stroke="#374151"/>`);
    out.push(`<text x="${f(px(t))}" y="${plot.y1 + 18}" text-anchor="middle">${formatNumber(t)}</text>`);
  }
  for (const t of ticks(yMin, yMax)) {
    out.push(`<line x1="${plot.x0 - 4}" y1="${f(py(t))}" x2="${plot.x1}" y2="${f(py(t))}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${plot.x0 - 8}" y="${f(py(t) + 4)}" text-anchor="end">${formatNumber(t, 4)}</text>`);
  }
  out.push(`<text x="${(plot.x0 + plot.x1) / 2}" y="${H - 12}" text-anchor="middle">spend (${esc(unit)})</text>`);
  out.push(`<text transform="translate(16 ${(plot.y0 + plot.y1) / 2}) rotate(-90)" text-anchor="middle">score</text>`);
  return out;
}

/** The initial score, off the axis: an arrow under the axis's corner, pointing its way. */
function initialArrow(initial: number, { plot, rawY }: Layout): string {
  const below = rawY(initial) > plot.y1;
  const y = H - 16;
  return (
    `<g fill="#374151"><title>initial score ${formatNumber(initial, 4)}, off the axis</title>` +
    `<path d="${below ? `M${plot.x0 - 50} ${y - 4}l8 0l-4 7z` : `M${plot.x0 - 50} ${y + 3}l8 0l-4 -7z`}"/>` +
    `<text x="${plot.x0 - 38}" y="${y + 4}">initial ${formatNumber(initial, 4)} (${below ? 'below' : 'above'} the axis)</text></g>`
  );
}

/** Each episode's line and mark: dropped branches first, so adopted ones are drawn on top. */
function episodeMarks(d: ChartData, { plot, px, py, off }: Layout): { lines: string[]; marks: string[] } {
  const lines: string[] = [];
  const marks: string[] = [];
  const order: Outcome[] = ['dropped', 'undecided', 'kept', 'adopted'];
  for (const o of order) {
    for (const s of d.segments.filter((seg) => seg.outcome === o)) {
      const color = COLORS[o];
      const dash = o === 'dropped' ? ' stroke-dasharray="3 3"' : '';
      if (s.y0 !== null) {
        lines.push(
          `<line x1="${f(px(s.x0))}" y1="${f(py(s.y0))}" x2="${f(px(s.x1))}" y2="${f(py(s.y1))}" stroke="${color}" stroke-width="1.5"${dash}/>`,
        );
      }
      const at = [px(s.x1), py(s.y1)] as const;
      const mark = o === 'dropped' ? cross(at, color) : o === 'adopted' ? star(at, color) : dot(at, color);
      const where = off(s.y1) ? ', off the axis' : '';
      marks.push(`<g><title>${esc(s.id)}: ${formatNumber(s.y1, 4)} (${o}${where})</title>${mark}</g>`);
    }
  }
  for (const fl of d.failures) {
    marks.push(`<g><title>${esc(fl.id)}: no score</title>${cross([px(fl.x), plot.y1 - 4], CHART_COLORS.failed)}</g>`);
  }
  return { lines, marks };
}

/** The best so far, from its first score on the axis: an initial score off it would run along the edge. */
function bestLine(d: ChartData, { px, py, off }: Layout, initialOff: boolean): string[] {
  if (d.best.length === 0) return [];
  const shown = initialOff ? d.best.filter((b) => !off(b.y)) : d.best;
  const pts = shown.map((b, i) => (i > 0 ? `H${f(px(b.x))}V${f(py(b.y))}` : `M${f(px(b.x))} ${f(py(b.y))}`));
  return [`<path d="${pts.join('')}" fill="none" stroke="${CHART_COLORS.best}" stroke-width="2.5"/>`];
}

function bestLabel(d: ChartData, { plot, px, py }: Layout): string[] {
  const last = d.best.at(-1);
  if (!last) return [];
  const y = py(last.y);
  return [
    `<text x="${f(px(last.x) - 4)}" y="${f(y < plot.y0 + 14 ? y + 16 : y - 8)}" text-anchor="end" font-weight="600">best ${formatNumber(last.y, 6)}</text>`,
  ];
}

function legend(d: ChartData): string[] {
  const entries: [string, (at: readonly [number, number]) => string][] = [
    [
      'best so far',
      ([lx, ly]) =>
        `<line x1="${lx - 9}" y1="${ly}" x2="${lx + 9}" y2="${ly}" stroke="${CHART_COLORS.best}" stroke-width="2.5"/>`,
    ],
    ['adopted branch', (at) => star(at, COLORS.adopted)],
    ['serial episode', (at) => dot(at, COLORS.kept)],
    ['dropped branch', (at) => cross(at, COLORS.dropped)],
    [
      'fork round',
      ([lx, ly]) => `<rect x="${lx - 9}" y="${ly - 6}" width="18" height="12" fill="${CHART_COLORS.forkRound}"/>`,
    ],
  ];
  if (d.failures.length > 0) entries.push(['no score', (at) => cross(at, CHART_COLORS.failed)]);
  const out: string[] = [];
  let lx = M.left + 10;
  for (const [label, mark] of entries) {
    out.push(mark([lx, M.top - 14]), `<text x="${lx + 14}" y="${M.top - 10}">${label}</text>`);
    // About 6.5 px per character at 12 px.
    lx += 40 + label.length * 6.5;
  }
  return out;
}

const dot = ([x, y]: readonly [number, number], color: string) =>
  `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="3.5" fill="${color}"/>`;

const cross = ([x, y]: readonly [number, number], color: string) =>
  `<path d="M${(x - 4).toFixed(1)} ${(y - 4).toFixed(1)}l8 8m0 -8l-8 8" stroke="${color}" stroke-width="2"/>`;

/** A five-pointed star (the paper's Figure 7 marks adopted branches so). */
function star([x, y]: readonly [number, number], color: string): string {
  const points = Array.from({ length: 10 }, (_, i) => {
    const r = i % 2 === 0 ? 7 : 3;
    const a = -Math.PI / 2 + (i * Math.PI) / 5;
    return `${(x + r * Math.cos(a)).toFixed(1)},${(y + r * Math.sin(a)).toFixed(1)}`;
  });
  return `<polygon points="${points.join(' ')}" fill="${color}"/>`;
}

function paddedRange(values: number[]): [number, number] {
  if (values.length === 0) return [0, 1];
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (lo === hi) {
    lo -= Math.abs(lo) * 0.1 || 1;
    hi += Math.abs(hi) * 0.1 || 1;
  }
  // Finite, whatever the scores (a grader may print 1.7e308): halves, and the largest double at most.
  const pad = (hi / 2 - lo / 2) * 0.16;
  const finite = (x: number) => Math.min(Number.MAX_VALUE, Math.max(-Number.MAX_VALUE, x));
  return [finite(finite(lo) - pad), finite(finite(hi) + pad)];
}

/** About five round-numbered ticks between lo and hi. */
export function ticks(lo: number, hi: number, count = 5): number[] {
  const half = hi / 2 - lo / 2;
  if (!(half > 0)) return [lo];
  const raw = (half / count) * 2;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * mag >= raw) ?? 10) * mag;
  const out: number[] = [];
  // Counted by index, and a few at most: near the largest double, t + step can equal t.
  const last = Math.floor(hi / step + 1e-9);
  for (let i = Math.ceil(lo / step); i <= last && out.length <= count * 3; i++)
    out.push(Number((i * step).toPrecision(12)));
  return out;
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

// ------------------------------------------------------------------------------------------------
// For the comparison chart (core/compare/chart.ts): the same marks as this one.

export { cross as crossMark, dot as dotMark, star as starMark };
