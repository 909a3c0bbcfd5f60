// Score versus spend. The x axis is the run's cumulative spend. Each episode is a segment from
// where its round started (the spend so far, the parent's score) to where the round ended (the
// spend after it, its own score), so a fork round fans out from one point and the adopted branch
// leads on into the next round. The best-so-far line steps up at the end of each round.
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
  xMax: number;
}

export function chartData(state: RunState): ChartData {
  const c = state.config;
  const better = (a: number, b: number) => (c.grader.direction === 'maximize' ? a > b : a < b);
  const headScore = new Map<number, number | null>(state.lineages.map((l) => [l.index, state.base.score]));
  const segments: ChartSegment[] = [];
  const failures: { id: string; x: number }[] = [];
  const best: { x: number; y: number }[] = [];
  let bestScore = state.base.score;
  if (bestScore !== null) best.push({ x: 0, y: bestScore });
  let x = 0;
  for (const round of state.rounds) {
    const x1 = x + round.episodes.reduce((sum, e) => sum + (e.result?.spent ?? 0), 0);
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
  return { segments, failures, best, forkPoints, xMax: Math.max(c.budget.total, x) };
}

const W = 760;
const H = 400;
const M = { left: 64, right: 20, top: 48, bottom: 52 };
const COLORS: Record<Outcome, string> = { adopted: '#1d4ed8', kept: '#15803d', dropped: '#9ca3af', running: '#d97706' };

export function renderChartSvg(state: RunState): string {
  const d = chartData(state);
  const ys = [...d.segments.flatMap((s) => (s.y0 === null ? [s.y1] : [s.y0, s.y1])), ...d.best.map((b) => b.y)];
  const [yMin, yMax] = paddedRange(ys);
  const px = (x: number) => M.left + (x / (d.xMax || 1)) * (W - M.left - M.right);
  const py = (y: number) => H - M.bottom - ((y - yMin) / (yMax - yMin)) * (H - M.top - M.bottom);
  const f = (n: number) => n.toFixed(1);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="12">`,
    `<title>forkflush run ${esc(state.id)}: score versus spend</title>`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${M.left}" y="20" font-size="14" font-weight="600">Score versus spend (${esc(state.config.grader.direction)})</text>`,
  );
  // Axes and ticks.
  const unit = state.config.budget.unit;
  out.push(`<g stroke="#374151"><line x1="${M.left}" y1="${H - M.bottom}" x2="${W - M.right}" y2="${H - M.bottom}"/>`);
  out.push(`<line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${H - M.bottom}"/></g>`);
  for (const t of ticks(0, d.xMax)) {
    out.push(
      `<line x1="${f(px(t))}" y1="${H - M.bottom}" x2="${f(px(t))}" y2="${H - M.bottom + 4}" stroke="#374151"/>`,
    );
    out.push(`<text x="${f(px(t))}" y="${H - M.bottom + 18}" text-anchor="middle">${formatNumber(t)}</text>`);
  }
  for (const t of ticks(yMin, yMax)) {
    out.push(`<line x1="${M.left - 4}" y1="${f(py(t))}" x2="${W - M.right}" y2="${f(py(t))}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${M.left - 8}" y="${f(py(t) + 4)}" text-anchor="end">${formatNumber(t, 3)}</text>`);
  }
  out.push(`<text x="${(M.left + W - M.right) / 2}" y="${H - 12}" text-anchor="middle">spend (${esc(unit)})</text>`);
  out.push(
    `<text transform="translate(16 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">score</text>`,
  );
  for (const p of d.forkPoints) {
    out.push(
      `<line x1="${f(px(p))}" y1="${M.top}" x2="${f(px(p))}" y2="${H - M.bottom}" stroke="#f59e0b" stroke-dasharray="4 4"><title>fork point at ${formatNumber(p)} ${esc(unit)}</title></line>`,
    );
  }
  // Dropped branches first, so adopted ones are drawn on top.
  const order: Outcome[] = ['dropped', 'running', 'kept', 'adopted'];
  for (const o of order) {
    for (const s of d.segments.filter((seg) => seg.outcome === o)) {
      const color = COLORS[o];
      const dash = o === 'dropped' ? ' stroke-dasharray="3 3"' : '';
      if (s.y0 !== null) {
        out.push(
          `<line x1="${f(px(s.x0))}" y1="${f(py(s.y0))}" x2="${f(px(s.x1))}" y2="${f(py(s.y1))}" stroke="${color}" stroke-width="1.5"${dash}/>`,
        );
      }
      const mark =
        o === 'dropped'
          ? `<path d="M${f(px(s.x1) - 4)} ${f(py(s.y1) - 4)}l8 8m0 -8l-8 8" stroke="${color}" stroke-width="1.5"/>`
          : `<circle cx="${f(px(s.x1))}" cy="${f(py(s.y1))}" r="3.5" fill="${color}"/>`;
      out.push(`<g><title>${esc(s.id)}: ${formatNumber(s.y1, 4)} (${o})</title>${mark}</g>`);
    }
  }
  for (const fl of d.failures) {
    out.push(
      `<g><title>${esc(fl.id)}: no score</title><path d="M${f(px(fl.x) - 4)} ${H - M.bottom - 8}l8 8m0 -8l-8 8" stroke="#dc2626" stroke-width="1.5"/></g>`,
    );
  }
  if (d.best.length > 0) {
    const pts = d.best.map((b, i) => {
      const prev = d.best[i - 1];
      return prev ? `H${f(px(b.x))}V${f(py(b.y))}` : `M${f(px(b.x))} ${f(py(b.y))}`;
    });
    out.push(`<path d="${pts.join('')}" fill="none" stroke="#111827" stroke-width="2.5"/>`);
  }
  // Legend.
  const legend: [string, string, string][] = [
    ['best so far', '#111827', ''],
    ['adopted branch', COLORS.adopted, ''],
    ['serial episode', COLORS.kept, ''],
    ['dropped branch', COLORS.dropped, '3 3'],
    ['fork point', '#f59e0b', '4 4'],
  ];
  legend.forEach(([label, color, dash], i) => {
    const lx = M.left + 10 + i * 136;
    out.push(
      `<line x1="${lx}" y1="${M.top - 14}" x2="${lx + 18}" y2="${M.top - 14}" stroke="${color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`,
      `<text x="${lx + 24}" y="${M.top - 10}">${label}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function paddedRange(values: number[]): [number, number] {
  if (values.length === 0) return [0, 1];
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (lo === hi) {
    lo -= Math.abs(lo) * 0.1 || 1;
    hi += Math.abs(hi) * 0.1 || 1;
  }
  const pad = (hi - lo) * 0.08;
  return [lo - pad, hi + pad];
}

/** About five round-numbered ticks between lo and hi. */
export function ticks(lo: number, hi: number, count = 5): number[] {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * mag >= raw) ?? 10) * mag;
  const out: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Number(t.toPrecision(12)));
  return out;
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
