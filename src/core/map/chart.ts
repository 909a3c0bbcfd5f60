// The idea map as the paper draws it: each snapshot a point, coloured by its run (or by strategy
// when the map has several) and shaded by its score; basins outlined; each run's path drawn in
// order; fork points ringed, selected branches as diamonds, rejected ones as crosses, each run's
// best as a star; the agreement in the caption. Only distances mean something, so both axes share
// one scale and carry no ticks. Pure: the same record always renders the same SVG.
import { crossMark, quantile } from '../chart.js';
import { STRATEGY_COLORS } from '../compare/chart.js';
import { formatNumber } from '../text.js';
import type { MapPoint, MapRecord } from './record.js';
import { agreementLine } from './report.js';

const W = 960;
const H = 700;
const PLOT = { x0: 24, y0: 56, x1: 680, y1: 640 };
const LEGEND_X = 704;
/** Each run's colour when the map is one strategy's (ten that stay apart in print and for most colour vision). */
export const RUN_COLORS = [
  '#1d4ed8',
  '#dc2626',
  '#059669',
  '#7c3aed',
  '#d97706',
  '#0891b2',
  '#db2777',
  '#4d7c0f',
  '#92400e',
  '#475569',
];
/** The basins' fill and outline, and the colour the PNG test looks for. */
export const MAP_COLORS = { basin: '#eef2f7', basinEdge: '#94a3b8', forkRing: '#111827', rejected: '#6b7280' } as const;
/** How far a basin's outline stands off its points, in pixels. */
const BASIN_PAD = 14;

export interface MapLayout {
  /** Where a map position is drawn; `off`: far outside the bulk of the map, drawn on the frame. */
  place: (x: number, y: number) => { x: number; y: number; off: boolean };
  colorOf: (p: Pick<MapPoint, 'run' | 'strategy'>) => string;
  /** Colour by strategy (several on the map) or by run. */
  by: 'strategy' | 'run';
}

/** A basin of fewer points than this share of the map (or 3) is small: the scale is not fitted to it. */
const SMALL_BASIN = 0.05;

/**
 * One scale for both axes (only distances mean something), fitted to the bulk of the map: the
 * points of its basins but the small ones. t-STE's heavy tails can put a lone snapshot far away,
 * and a scale fitted to it would crush the rest into dots; such a point, when it falls outside, is
 * drawn where its direction from the map's middle meets the frame, marked as far off.
 */
export function mapLayout(m: MapRecord): MapLayout {
  const least = Math.max(3, SMALL_BASIN * m.points.length);
  const big = m.points.filter((p) => (m.basins[p.basin]?.points.length ?? 0) >= least);
  const bulk = big.length > 0 ? big : m.points;
  const mx = middle(bulk.map((p) => p.x));
  const my = middle(bulk.map((p) => p.y));
  const xs = bulk.map((p) => p.x);
  const ys = bulk.map((p) => p.y);
  const [x0, x1] = [Math.min(...xs, mx), Math.max(...xs, mx)];
  const [y0, y1] = [Math.min(...ys, my), Math.max(...ys, my)];
  const pad = BASIN_PAD + 12;
  const span = Math.max(x1 - x0, y1 - y0) || 1;
  const scale = Math.min(PLOT.x1 - PLOT.x0 - 2 * pad, PLOT.y1 - PLOT.y0 - 2 * pad) / span;
  const cx = (PLOT.x0 + PLOT.x1) / 2 - ((x0 + x1) / 2) * scale;
  const cy = (PLOT.y0 + PLOT.y1) / 2 + ((y0 + y1) / 2) * scale;
  const inner = { x0: PLOT.x0 + 10, x1: PLOT.x1 - 10, y0: PLOT.y0 + 10, y1: PLOT.y1 - 10 };
  const mid = { x: cx + mx * scale, y: cy - my * scale };
  const strategies = new Set(m.points.map((p) => p.strategy));
  const runs = [...new Set(m.points.map((p) => p.run))];
  const by = strategies.size > 1 ? 'strategy' : 'run';
  return {
    place: (x, y) => {
      const px = cx + x * scale;
      const py = cy - y * scale;
      if (px >= inner.x0 && px <= inner.x1 && py >= inner.y0 && py <= inner.y1) return { x: px, y: py, off: false };
      // Along the ray from the map's middle to the point, as far as the frame.
      const t = Math.min(
        ...[
          px > inner.x1 ? (inner.x1 - mid.x) / (px - mid.x) : px < inner.x0 ? (inner.x0 - mid.x) / (px - mid.x) : 1,
          py > inner.y1 ? (inner.y1 - mid.y) / (py - mid.y) : py < inner.y0 ? (inner.y0 - mid.y) / (py - mid.y) : 1,
        ],
      );
      return { x: mid.x + (px - mid.x) * t, y: mid.y + (py - mid.y) * t, off: true };
    },
    colorOf: (p) =>
      by === 'strategy' ? STRATEGY_COLORS[p.strategy] : (RUN_COLORS[runs.indexOf(p.run) % RUN_COLORS.length] as string),
    by,
  };
}

/** The median; 0 of no values. */
const middle = (xs: number[]) => (xs.length === 0 ? 0 : quantile(xs, 0.5));

export function renderMapSvg(m: MapRecord, o: { title: string }): string {
  const L = mapLayout(m);
  const f = (n: number) => n.toFixed(1);
  const at = (p: MapPoint) => {
    const q = L.place(p.x, p.y);
    return [q.x, q.y] as const;
  };
  const byId = new Map(m.points.map((p) => [p.id, p]));
  const shade = scoreShade(m);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="12">`,
    `<title>${esc(o.title)}</title>`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${PLOT.x0}" y="24" font-size="15" font-weight="600">${esc(o.title)}</text>`,
    `<text x="${PLOT.x0}" y="42" fill="#4b5563">${esc(subtitle(m))}</text>`,
    `<rect x="${PLOT.x0}" y="${PLOT.y0}" width="${PLOT.x1 - PLOT.x0}" height="${PLOT.y1 - PLOT.y0}" fill="none" stroke="#e5e7eb"/>`,
  ];
  // Basins: each hull drawn thick with round joins (its points padded), an outline under a fill.
  for (const b of m.basins) {
    const hull = b.hull.map(([x, y]) => L.place(x, y)).map((q) => `${f(q.x)} ${f(q.y)}`);
    const d = `M${hull.join('L')}${hull.length > 2 ? 'Z' : ''}`;
    const round = 'stroke-linejoin="round" stroke-linecap="round"';
    out.push(
      `<g><title>basin ${b.name}: ${plural(b.points.length, 'snapshot')} of ${plural(b.runs.length, 'run')}</title>`,
      `<path d="${d}" fill="${MAP_COLORS.basinEdge}" stroke="${MAP_COLORS.basinEdge}" stroke-width="${2 * BASIN_PAD + 3}" ${round}/>`,
      `<path d="${d}" fill="${MAP_COLORS.basin}" stroke="${MAP_COLORS.basin}" stroke-width="${2 * BASIN_PAD}" ${round}/></g>`,
    );
  }
  for (const b of m.basins) {
    // Above its outline's highest point, inside the plot.
    const top = b.hull.map(([x, y]) => L.place(x, y)).sort((p, q) => p.y - q.y)[0];
    if (!top) continue;
    const x = Math.min(PLOT.x1 - 12, Math.max(PLOT.x0 + 12, top.x));
    const y = Math.max(PLOT.y0 + 14, top.y - BASIN_PAD - 6);
    out.push(`<text x="${f(x)}" y="${f(y)}" text-anchor="middle" font-weight="600" fill="#334155">${b.name}</text>`);
  }
  // Each run's path (per lineage) in order, then each fork round's moves from its fork point.
  const lineages = new Map<string, MapPoint[]>();
  for (const p of m.points.filter((q) => q.path)) {
    const key = `${p.run} ${p.lineage}`;
    lineages.set(key, [...(lineages.get(key) ?? []), p]);
  }
  for (const ps of lineages.values()) {
    if (ps.length < 2) continue;
    const d = ps.map((p, i) => `${i === 0 ? 'M' : 'L'}${f(at(p)[0])} ${f(at(p)[1])}`).join('');
    out.push(
      `<path d="${d}" fill="none" stroke="${L.colorOf(ps[0] as MapPoint)}" stroke-width="1.3" stroke-opacity="0.6"/>`,
    );
  }
  for (const j of m.jumps) {
    const from = byId.get(j.from);
    if (!from) continue;
    for (const r of j.rejected) {
      const to = byId.get(r.id);
      if (to)
        out.push(
          `<line x1="${f(at(from)[0])}" y1="${f(at(from)[1])}" x2="${f(at(to)[0])}" y2="${f(at(to)[1])}" stroke="${MAP_COLORS.rejected}" stroke-width="1" stroke-dasharray="2 3"/>`,
        );
    }
  }
  // The points: plain snapshots first, marked ones on top.
  const order = (p: MapPoint) => (p.final ? 3 : p.branch === 'selected' || p.forkPoint ? 2 : p.branch ? 1 : 0);
  for (const p of [...m.points].sort((a, b) => order(a) - order(b))) {
    const { x, y, off } = L.place(p.x, p.y);
    const color = L.colorOf(p);
    const fill = p.score === null ? '#ffffff' : mix(color, shade(p.score));
    const label = `${p.run} ${p.episode} (${p.phase})${p.score === null ? ', no score' : `: ${formatNumber(p.score, 4)}`}, basin ${m.basins[p.basin]?.name ?? '?'}${off ? '; far off the map, drawn on its frame' : ''}`;
    const marks: string[] = off ? [farMark(x, y)] : [];
    if (p.forkPoint)
      marks.push(
        `<circle cx="${f(x)}" cy="${f(y)}" r="8" fill="none" stroke="${MAP_COLORS.forkRing}" stroke-width="1.5"/>`,
      );
    if (p.final) marks.push(star(x, y, color));
    else if (p.branch === 'selected') marks.push(diamond(x, y, fill, color));
    else if (p.branch === 'rejected') marks.push(crossMark([x, y], color));
    else marks.push(`<circle cx="${f(x)}" cy="${f(y)}" r="4" fill="${fill}" stroke="${color}" stroke-width="1.2"/>`);
    out.push(`<g><title>${esc(label)}</title>${marks.join('')}</g>`);
  }
  out.push(...legend(m, L), ...caption(m));
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function subtitle(m: MapRecord): string {
  const runs = new Set(m.points.map((p) => p.run)).size;
  return `${plural(m.points.length, 'snapshot')} of ${plural(runs, 'run')}, placed by ${m.embedding === 'soe' ? 'SOE' : 't-STE'} from ${plural(m.judgments, 'triplet judgment')} of ${m.judge.label}; ${plural(m.basins.length, 'basin')}`;
}

function legend(m: MapRecord, L: MapLayout): string[] {
  const out: string[] = [];
  let y = PLOT.y0 + 8;
  const line = (mark: string, text: string) => {
    out.push(mark, `<text x="${LEGEND_X + 22}" y="${y + 4}">${esc(text)}</text>`);
    y += 20;
  };
  out.push(`<text x="${LEGEND_X}" y="${y}" font-weight="600">${L.by === 'strategy' ? 'Strategy' : 'Run'}</text>`);
  y += 18;
  const keys = new Map<string, MapPoint>();
  for (const p of m.points)
    keys.set(L.by === 'strategy' ? p.strategy : p.run, keys.get(L.by === 'strategy' ? p.strategy : p.run) ?? p);
  const shown = [...keys].slice(0, 12);
  for (const [key, p] of shown) {
    const run = m.runs.find((r) => r.run === key);
    const text = L.by === 'strategy' ? key : `${key}${run ? ` (${run.strategy}, seed ${run.seed})` : ''}`;
    line(`<circle cx="${LEGEND_X + 8}" cy="${y}" r="5" fill="${L.colorOf(p)}"/>`, text);
  }
  if (keys.size > shown.length) line('', `and ${keys.size - shown.length} more`);
  y += 8;
  out.push(`<text x="${LEGEND_X}" y="${y}" font-weight="600">Marks</text>`);
  y += 18;
  const c = '#374151';
  line(
    `<circle cx="${LEGEND_X + 8}" cy="${y}" r="4" fill="${mix(c, 0.35)}" stroke="${c}" stroke-width="1.2"/>`,
    'snapshot (lighter: lower score)',
  );
  line(
    `<circle cx="${LEGEND_X + 8}" cy="${y}" r="8" fill="none" stroke="${MAP_COLORS.forkRing}" stroke-width="1.5"/>`,
    'fork point',
  );
  line(diamond(LEGEND_X + 8, y, c, c), 'selected branch');
  line(`${crossMark([LEGEND_X + 8, y], c)}`, 'rejected branch (dotted: its move)');
  line(star(LEGEND_X + 8, y, c), "the run's best");
  line(
    `<line x1="${LEGEND_X}" y1="${y}" x2="${LEGEND_X + 16}" y2="${y}" stroke="${c}" stroke-width="1.3" stroke-opacity="0.6"/>`,
    "the run's path, in order",
  );
  line(
    `<rect x="${LEGEND_X}" y="${y - 6}" width="16" height="12" rx="5" fill="${MAP_COLORS.basin}" stroke="${MAP_COLORS.basinEdge}"/>`,
    'a basin',
  );
  if (m.points.some((p) => L.place(p.x, p.y).off)) line(farMark(LEGEND_X + 8, y), 'far off: drawn on the frame');
  y += 8;
  out.push(`<text x="${LEGEND_X}" y="${y}" font-weight="600">Basins visited</text>`);
  y += 18;
  for (const r of m.runs.slice(0, 10)) {
    out.push(
      `<text x="${LEGEND_X}" y="${y}" fill="#374151">${esc(`${r.strategy} seed ${r.seed}: ${r.basins.join(' ')}`)}</text>`,
    );
    y += 16;
  }
  if (m.runs.length > 10)
    out.push(`<text x="${LEGEND_X}" y="${y}" fill="#374151">and ${m.runs.length - 10} more runs</text>`);
  return out;
}

function caption(m: MapRecord): string[] {
  const words = agreementLine(m).split(' ');
  // Two lines at most, about 120 characters each.
  const lines: string[] = [''];
  for (const w of words) {
    if (((lines.at(-1) as string) + w).length > 118 && lines.length < 2) lines.push('');
    lines[lines.length - 1] = `${lines.at(-1) ? `${lines.at(-1)} ` : ''}${w}`;
  }
  return lines.map((l, i) => `<text x="${PLOT.x0}" y="${PLOT.y1 + 22 + i * 16}" fill="#111827">${esc(l)}</text>`);
}

/** 0.25 for the map's worst score to 1 for its best (by the direction); 1 when all are equal. */
function scoreShade(m: MapRecord): (score: number) => number {
  const scores = m.points.flatMap((p) => (p.score === null ? [] : [p.score]));
  const lo = Math.min(...scores);
  const hi = Math.max(...scores);
  return (s) => {
    if (!(hi > lo)) return 1;
    const t = (s - lo) / (hi - lo);
    return 0.25 + 0.75 * (m.direction === 'maximize' ? t : 1 - t);
  };
}

/** The colour at `amount` of its strength over white. */
export function mix(hex: string, amount: number): string {
  const c = [1, 3, 5].map((i) => Number.parseInt(hex.slice(i, i + 2), 16));
  return `#${c
    .map((v) =>
      Math.round(255 - (255 - v) * amount)
        .toString(16)
        .padStart(2, '0'),
    )
    .join('')}`;
}

/** A point far off the map, drawn on its frame: a grey halo behind its mark. */
function farMark(x: number, y: number): string {
  return `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="11" fill="none" stroke="${MAP_COLORS.rejected}" stroke-width="1" stroke-dasharray="1 2"/>`;
}

/** The run's best: a star larger than the run chart's, outlined so it reads on any basin. */
function star(x: number, y: number, color: string): string {
  const points = Array.from({ length: 10 }, (_, i) => {
    const r = i % 2 === 0 ? 10 : 4.2;
    const a = -Math.PI / 2 + (i * Math.PI) / 5;
    return `${(x + r * Math.cos(a)).toFixed(1)},${(y + r * Math.sin(a)).toFixed(1)}`;
  });
  return `<polygon points="${points.join(' ')}" fill="${color}" stroke="#111827" stroke-width="1"/>`;
}

function diamond(x: number, y: number, fill: string, stroke: string): string {
  const r = 6;
  return `<path d="M${(x).toFixed(1)} ${(y - r).toFixed(1)}l${r} ${r}l${-r} ${r}l${-r} ${-r}z" fill="${fill}" stroke="${stroke}" stroke-width="1.5"/>`;
}

const plural = (n: number, word: string) => `${formatNumber(n)} ${n === 1 ? word : `${word}s`}`;

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
