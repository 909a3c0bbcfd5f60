// The idea map in words: the lines `forkflush map` prints, and the section a run's or a compare's
// report.md gains when a map was made (basins visited per run by strategy, each fork's jump against
// the median single-run step, held-out agreement beside the paper's). Pure.

import { PAPER_MAP } from '../method.js';
import { codeSpan, formatNumber, markdownTable, plainText } from '../text.js';
import type { MapRecord } from './record.js';
import { median } from './record.js';

const fixed2 = (x: number | null) => (x === null ? '-' : x.toFixed(2));

/** A spend as people read it: thousands grouped from 10,000 on (tokens), else up to 4 decimals (dollars). */
export function amount(x: number): string {
  if (Math.abs(x) < 10_000) return formatNumber(x, 4);
  return String(Math.round(x)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
const plural = (n: number, word: string, many = `${word}s`) => `${formatNumber(n)} ${n === 1 ? word : many}`;

/** The agreement in one sentence, with run identity, chance and the paper's figures. */
export function agreementLine(m: MapRecord): string {
  const a = m.agreement;
  if (a.heldOut === null)
    return `No judgment was held out, so the map's agreement is not measured (fitted: ${fixed2(a.fitted)}).`;
  const paper = `the paper: ${PAPER_MAP.agreement.low.toFixed(2)}–${PAPER_MAP.agreement.high.toFixed(2)}, run identity ${PAPER_MAP.runIdentity.low.toFixed(2)}–${PAPER_MAP.runIdentity.high.toFixed(2)}`;
  return (
    `Held-out agreement ${fixed2(a.heldOut)} on ${plural(a.heldOutJudgments, 'judgment')} ` +
    `(run identity alone ${fixed2(a.runIdentity)}, chance ${fixed2(a.chance)}; ${paper}).`
  );
}

/** What `forkflush map` prints at the end. */
export function mapText(m: MapRecord): string[] {
  const runs = new Set(m.points.map((p) => p.run)).size;
  const c = m.calls;
  const failed = m.failed.specs.length + m.failed.judgments;
  return [
    `${m.target.kind} ${m.target.id}: ${plural(m.points.length, 'point')} from ${plural(runs, 'run')}, ${plural(m.basins.length, 'basin')}` +
      (m.silhouette === null ? '' : ` (silhouette ${fixed2(m.silhouette)})`),
    agreementLine(m),
    ...jumpLines(m),
    `judge ${m.judge.label}: ${plural(c.spec.made + c.spec.cached, 'spec')} (${formatNumber(c.spec.cached)} cached), ` +
      `${plural(c.triplet.made + c.triplet.cached, 'judgment')} (${formatNumber(c.triplet.cached)} cached)` +
      `${failed > 0 ? `, ${formatNumber(failed)} failed and left out` : ''}; ` +
      `spent ${amount(m.spent)} of ${amount(m.budget)} ${m.unit}`,
    ...(m.failed.errors.length > 0 ? [`first failure: ${plainText(m.failed.errors[0] ?? '')}`] : []),
  ];
}

/** The fork rounds' jumps in one or two sentences (the paper's appendix E). */
export function jumpLines(m: MapRecord): string[] {
  if (m.jumps.length === 0) return [];
  if (m.step.median === null || m.step.median === 0)
    return ["The fork rounds' jumps are not measured: the map has no single-run or serial steps to measure them by."];
  const selected = m.jumps.flatMap((j) => (j.selected?.steps == null ? [] : [j.selected.steps]));
  const rejected = m.jumps.flatMap((j) => j.rejected.flatMap((r) => (r.steps === null ? [] : [r.steps])));
  const newBasin = m.jumps.filter((j) => j.selected?.newBasin).length;
  const unit = m.step.from === 'single-run' ? 'median single-run steps' : 'median serial steps';
  const parts = [
    selected.length > 0
      ? `Selected fork branches moved a median of ${formatNumber(median(selected), 3)} ${unit} (most ${formatNumber(Math.max(...selected), 3)}); ` +
        `${newBasin} of ${m.jumps.length} fork rounds moved the lineage into another basin.`
      : 'No fork round selected a branch on the map.',
  ];
  if (rejected.length > 0)
    parts.push(
      `Rejected branches moved at most ${formatNumber(Math.max(...rejected), 3)} (median ${formatNumber(median(rejected), 3)}). ` +
        `The paper: a selected branch jumped ${PAPER_MAP.selectedJump} median single-run steps into a new basin, rejected ones at most 1.`,
    );
  return parts;
}

/** The section of report.md: the picture, the agreement, basins per run, the forks' jumps. */
export function mapSection(m: MapRecord, o: { image?: string; quote?: (text: string) => string } = {}): string {
  // A judge's failure quotes its answer, which the agents' files can dictate: shown as code.
  const quote = o.quote ?? ((t: string) => codeSpan(plainText(t)));
  const out = ['## Idea map', ''];
  if (o.image) out.push(`![Idea map: where the agents searched](${o.image})`, '');
  out.push(
    `${plural(m.points.length, 'snapshot')} of ${plural(m.runs.length, 'run')} placed by ${m.embedding === 'soe' ? 'SOE' : 't-STE'} from ${plural(m.judgments, 'triplet judgment')} ` +
      `of the judge (${m.judge.label}), grouped into ${plural(m.basins.length, 'basin')}; made ${m.createdAt.slice(0, 16).replace('T', ' ')} UTC by \`forkflush map\`. ${agreementLine(m)}`,
    '',
    '### Basins visited per run',
    '',
    markdownTable(
      ['strategy', 'variant', 'runs', 'basins visited, mean', 'each run (seed: basins)'],
      byStrategy(m).map((g) => [
        g.strategy,
        g.variant ?? '-',
        String(g.runs.length),
        formatNumber(g.runs.reduce((s, r) => s + r.basins.length, 0) / g.runs.length, 3),
        g.runs.map((r) => `${r.seed}: ${r.basins.join(' ')}`).join('; '),
      ]),
    ),
    '',
  );
  if (m.jumps.length > 0) {
    out.push('### Fork rounds: how far the branches moved', '', ...jumpLines(m).map((l) => `${l}  `), '');
    out.push(
      markdownTable(
        ['run', 'round', 'selected branch (steps)', 'into another basin', 'rejected branches, most (steps)'],
        m.jumps.map((j) => [
          j.run,
          `${j.round} (${j.phase})`,
          j.selected ? fixed2(j.selected.steps) : '-',
          j.selected ? (j.selected.newBasin ? 'yes' : 'no') : '-',
          j.rejected.length > 0 ? fixed2(Math.max(...j.rejected.map((r) => r.steps ?? 0))) : '-',
        ]),
      ),
      '',
      `_A step is the median distance between consecutive snapshots of ${m.step.from === 'single-run' ? 'single runs' : 'serial episodes'} on the map (${fixed2(m.step.median)}); a branch's move is its distance from the fork point in those steps._`,
      '',
    );
  }
  const failed = m.failed.specs.length + m.failed.judgments;
  if (failed > 0)
    out.push(
      `**${plural(failed, 'judge call')} failed** after a retry and ${failed === 1 ? 'was' : 'were'} left out ` +
        `(${plural(m.failed.specs.length, 'spec')}, ${plural(m.failed.judgments, 'judgment')}); first: ${quote(m.failed.errors[0] ?? '-')}`,
      '',
    );
  out.push(
    "_How to read it: each point is a snapshot (an episode's commit), placed so that snapshots the judge found alike are near each other; " +
      "only distances mean something, not the axes. Outlines are basins, lines each run's path in order, rings fork points, " +
      "diamonds selected branches, crosses rejected ones, stars each run's best; darker points scored better._",
    '',
  );
  return out.join('\n');
}

function byStrategy(m: MapRecord) {
  const groups = new Map<string, { strategy: string; variant: string | null; runs: MapRecord['runs'] }>();
  for (const r of m.runs) {
    const key = `${r.strategy} ${r.variant ?? ''}`;
    const g = groups.get(key) ?? { strategy: r.strategy, variant: r.variant, runs: [] };
    g.runs.push(r);
    groups.set(key, g);
  }
  return [...groups.values()];
}
