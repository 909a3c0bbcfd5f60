// A comparison's report, as the paper reports its evaluation: the Table-1-style table (best first),
// the ablation, fork-and-flush against single-run and best-of-n (relative improvement on the
// normalized scale, with the seed-by-seed count and a bootstrap interval), spend and wall time per
// strategy, and every run. Pure: the same results always give the same text.

import type { MapRecord } from '../map/record.js';
import { mapSection } from '../map/report.js';
import { BOOTSTRAP_RESAMPLES, CONFIDENCE, PAPER_RESULTS } from '../method.js';
import { formatNumber, markdownTable, textTable } from '../text.js';
import type { CompareManifest } from './plan.js';
import type { CompareResults, Comparison, SummaryRow } from './results.js';

const score = (x: number | null) => (x === null ? '-' : formatNumber(x, 4));
const fixed3 = (x: number | null) => (x === null ? '-' : x.toFixed(3));
export const percent = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
const pValue = (p: number) => (p < 0.001 ? '< 0.001' : p.toFixed(3).replace(/0+$/, '').replace(/\.$/, ''));
const seconds = (s: number | null) =>
  s === null ? '-' : s >= 120 ? `${formatNumber(s / 60, 1)} min` : `${formatNumber(s, 1)} s`;

/** A span of time as people say it: seconds, minutes or hours. */
export function duration(s: number): string {
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${formatNumber(s / 3600, 1)} h`;
}

const name = (x: { strategy: string; variant: string }, r: CompareResults) =>
  r.variants.length > 1 ? `${x.strategy} (${x.variant})` : x.strategy;

/** The Table-1 columns: best first; best and worst are by the direction. */
export function tableHeader(r: CompareResults): string[] {
  return [
    'rank',
    'strategy',
    ...(r.variants.length > 1 ? ['variant'] : []),
    'runs',
    'mean',
    'sd',
    'best',
    'worst',
    'normalized',
  ];
}

export function tableRows(r: CompareResults): string[][] {
  const max = r.direction === 'maximize';
  return r.summary.map((s) => [
    String(s.rank),
    s.strategy,
    ...(r.variants.length > 1 ? [s.variant] : []),
    s.scored === s.runs ? String(s.runs) : `${s.runs} (${s.runs - s.scored} no score)`,
    score(s.mean),
    score(s.sd),
    score(max ? s.max : s.min),
    score(max ? s.min : s.max),
    fixed3(s.normalized),
  ]);
}

/** Fork-and-flush against a baseline, in one sentence: the relative improvement and the paper's. */
export function improvementLine(c: Comparison, r: CompareResults): string {
  const of = (s: Comparison['a']) => r.summary.find((x) => x.strategy === s.strategy && x.variant === s.variant);
  const [a, b] = [of(c.a)?.normalized ?? null, of(c.b)?.normalized ?? null];
  const rel =
    c.relative !== null
      ? `${percent(c.relative)} on the normalized mean`
      : a === null
        ? `no relative improvement on the normalized mean (no run of ${name(c.a, r)} got a score)`
        : b === 0 && a > 0
          ? `unbounded on the normalized mean (every run of ${name(c.b, r)} was the comparison's worst, normalized 0)`
          : b === 0 && a === 0
            ? `none on the normalized mean (every run of both was the comparison's worst, normalized 0)`
            : 'no relative improvement on the normalized mean (nothing to normalize by)';
  const paper = c.paper === null ? '' : ` (the paper: ${percent(c.paper)})`;
  const gain = c.relativeGain === null ? '' : `; ${percent(c.relativeGain)} on the mean gain over the initial score`;
  return `${name(c.a, r)} over ${name(c.b, r)}: ${rel}${paper}${gain}.`;
}

/** What the seeds say about a difference: a sign count, a bootstrap interval, never a bare mean. */
export function significance(c: Comparison, r: CompareResults): string {
  const p = c.paired;
  const a = name(c.a, r);
  const b = name(c.b, r);
  if (p.pairs === 0) return `No seed has a score for both ${a} and ${b}: there is nothing to compare.`;
  const ties = p.ties > 0 ? `, tied on ${p.ties}` : '';
  const sign = p.signP === null ? '' : ` (two-sided sign test p = ${pValue(p.signP)})`;
  const d = p.difference ?? 0;
  const diff = `${a}'s best is ${formatNumber(Math.abs(d), 4)} ${d >= 0 ? 'better' : 'worse'} on average`;
  const parts = [
    `${a} was better than ${b} on ${p.wins} of ${p.pairs} seeds, worse on ${p.losses}${ties}${sign}; ${diff}`,
  ];
  if (p.interval) {
    const [lo, hi] = p.interval;
    const excludes = lo > 0 || hi < 0;
    parts[0] += `, ${Math.round(CONFIDENCE * 100)}% bootstrap interval of the difference ${formatNumber(lo, 4)} to ${formatNumber(hi, 4)}`;
    parts[0] += excludes
      ? `: it excludes 0, so over these ${p.pairs} seeds the difference is unlikely to be the luck of the seeds alone.`
      : `: it includes 0, so ${p.pairs} seeds cannot tell them apart.`;
    if (p.pairs < 5) parts.push('With fewer than 5 seeds, read the interval as rough.');
  } else {
    parts[0] += `: ${p.pairs} paired seed${p.pairs === 1 ? '' : 's'} are too few for an interval, so this cannot tell them apart.`;
  }
  if (p.unpaired > 0)
    parts.push(`${p.unpaired} seed${p.unpaired === 1 ? '' : 's'} without a score on one side are left out.`);
  return parts.join(' ');
}

/** Spend: equal within one episode, or which runs missed it; only runs that ended are checked. */
export function spendLine(r: CompareResults): string {
  const flagged = r.runs.filter((x) => x.spendOk === false);
  const unit = r.budget.unit;
  const checked = r.runs.filter((x) => x.spendOk !== null).length;
  const open = r.runs.length - checked;
  if (checked === 0) return 'No run has ended yet: their spend is checked when they do.';
  if (flagged.length === 0) {
    const which = open === 0 ? 'Every run' : `Every run that ended (${checked} of ${r.runs.length})`;
    return `${which} spent its budget of ${formatNumber(r.budget.total)} ${unit} within one episode: the comparison is at equal compute${open === 0 ? '' : ' so far'}.`;
  }
  const list = flagged.map(
    (x) =>
      `${x.strategy}${r.variants.length > 1 ? ` (${x.variant})` : ''} seed ${x.seed} spent ${formatNumber(x.spent, 2)}${x.status === 'stopped' ? ' (stopped: no score)' : ''}`,
  );
  return `FLAGGED: ${flagged.length} run${flagged.length === 1 ? '' : 's'} missed the budget of ${formatNumber(r.budget.total)} ${unit} by more than one episode: ${list.join('; ')}.`;
}

/** What a compare will run (`--dry-run`). */
export function comparePlan(m: CompareManifest, r: CompareResults, resumed: boolean): string {
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const total = formatNumber(r.budget.total * m.entries.length);
  return (
    `${m.id}${resumed ? ' (unfinished: this would resume it)' : ''}: ${m.entries.length} runs = ` +
    `${m.strategies.length} ${m.strategies.length === 1 ? 'strategy' : 'strategies'} (${m.strategies.join(', ')}) x ` +
    `${plural(m.variants.length, 'variant')} (${m.variants.map((x) => x.name).join(', ')}) x ${plural(m.seeds.length, 'seed')} (${m.seeds.join(', ')});\n` +
    `${formatNumber(r.budget.total)} ${r.budget.unit} each, ${total} ${r.budget.unit} in all; initial score ${score(r.initial)}.`
  );
}

/** The summary printed at the end of `forkflush compare`. */
export function compareText(r: CompareResults): string {
  const lines = [textTable(tableHeader(r), tableRows(r)), ''];
  for (const c of r.comparisons) lines.push(improvementLine(c, r), `  ${significance(c, r)}`);
  lines.push(spendLine(r));
  if (!r.complete)
    lines.push(
      `Unfinished: ${r.runs.filter((x) => x.status !== 'finished' && x.status !== 'idle').length} runs are not done; these figures are partial.`,
    );
  const idle = r.runs.filter((x) => x.status === 'idle').length;
  if (idle > 0)
    lines.push(
      `Idle: in ${idle} run${idle === 1 ? '' : 's'} no agent did any work; ${idle === 1 ? 'it is' : 'they are'} counted in runs, not in the scores.`,
    );
  return lines.join('\n');
}

const ABLATION = ['single-run', 'flush-only', 'fork-only', 'fork-and-flush'] as const;

export function renderCompareReport(
  r: CompareResults,
  o: { chartFile?: string; taskDir?: string; map?: MapRecord; mapFile?: string } = {},
): string {
  return [
    // 1. What was compared, and the paper's table of results.
    ...reportHead(r, o.taskDir),
    ...resultsSection(r),
    ...(o.chartFile ? [`![Best score so far versus spend](${o.chartFile})`, ''] : []),
    // 2. The ablation and the comparisons with the baselines, where the strategies ran.
    ...ablationSection(r),
    ...baselinesSection(r),
    // 3. The idea map, then what the runs spent and each run.
    ...(o.map ? [mapSection(o.map, o.mapFile ? { image: o.mapFile } : {})] : []),
    ...spendSection(r),
    ...runsSection(r),
  ].join('\n');
}

function reportHead(r: CompareResults, taskDir: string | undefined): string[] {
  return [
    `# forkflush ${r.kind} ${r.compare}`,
    '',
    [
      `${r.strategies.join(', ')}${r.variants.length > 1 ? ` x variants ${r.variants.join(', ')}` : ''}, ${r.seeds.length} seed${r.seeds.length === 1 ? '' : 's'} each (${r.seeds.join(', ')}: seed i is the same for every strategy).`,
      `Budget ${formatNumber(r.budget.total)} ${r.budget.unit} per run; ${r.direction} the score; the initial workspace scored ${score(r.initial)}.`,
      ...(taskDir ? [`Task: ${taskDir}.`] : []),
      ...(r.complete
        ? []
        : [
            '**Unfinished**: some runs are not done (resume with `forkflush compare --resume`); the figures below are partial.',
          ]),
    ].join('  \n'),
    '',
  ];
}

function resultsSection(r: CompareResults): string[] {
  return [
    "## Results (as the paper's Table 1)",
    '',
    markdownTable(tableHeader(r), tableRows(r)),
    '',
    `_Per run, its best score (the initial workspace's included). Mean and sd (sample, n - 1) over the runs with a score; ` +
      `normalized: the mean min–max normalized over every run of this comparison, the worst run 0 and the best 1` +
      (r.normalization
        ? ` (${score(r.normalization.worst)} and ${score(r.normalization.best)})`
        : ' (every run scored the same: no range)') +
      '. The paper averages this over tasks; here it is one task, so it depends on which strategies ran._',
    '',
  ];
}

/** The paper's ablation, where all four of its strategies ran. */
function ablationSection(r: CompareResults): string[] {
  const ablation = ABLATION.map((s) => r.summary.filter((x) => x.strategy === s));
  if (!ablation.every((rows) => rows.length > 0)) return [];
  const rows = ablation.flatMap((group) =>
    group.map((x: SummaryRow) => [
      x.strategy,
      ...(r.variants.length > 1 ? [x.variant] : []),
      fixed3(x.normalized),
      PAPER_RESULTS.ablation[x.strategy as (typeof ABLATION)[number]].toFixed(2),
    ]),
  );
  return [
    '## Ablation: fork and flush, alone and together',
    '',
    markdownTable(
      ['strategy', ...(r.variants.length > 1 ? ['variant'] : []), 'normalized', 'the paper (11 tasks)'],
      rows,
    ),
    '',
  ];
}

function baselinesSection(r: CompareResults): string[] {
  if (r.comparisons.length === 0) return [];
  return [
    '## Fork-and-flush against the baselines',
    '',
    ...r.comparisons.map((c) => `- ${improvementLine(c, r)} ${significance(c, r)}`),
    '',
    "_Relative improvement as the paper's +66% and +44%: the normalized mean of the first over the second's, minus 1; " +
      "on the mean gain over the initial score: (mean - initial) of the first over the second's, minus 1. " +
      'The difference and its interval are in score units, seed by seed (seed i of each strategy against each other); ' +
      `the bootstrap resamples those differences ${formatNumber(BOOTSTRAP_RESAMPLES)} times from a fixed seed._`,
    '',
  ];
}

function spendSection(r: CompareResults): string[] {
  return [
    '## Spend and wall time per strategy',
    '',
    spendLine(r),
    '',
    markdownTable(
      [
        'strategy',
        ...(r.variants.length > 1 ? ['variant'] : []),
        `mean spent (${r.budget.unit})`,
        'least',
        'most',
        'flagged',
        'wall time, mean',
        'wall time, all runs',
      ],
      r.summary.map((x) => [
        x.strategy,
        ...(r.variants.length > 1 ? [x.variant] : []),
        x.spent.mean === null ? '-' : formatNumber(x.spent.mean, 2),
        x.spent.min === null ? '-' : formatNumber(x.spent.min, 2),
        x.spent.max === null ? '-' : formatNumber(x.spent.max, 2),
        String(x.spendFlagged),
        seconds(x.wallSeconds.mean),
        seconds(x.wallSeconds.total),
      ]),
    ),
    '',
    `_Wall time: how long compare drove each run, over all its sessions; runs that ran side by side shared the machine. ` +
      `The compare took ${seconds(r.wall.compare)}, its runs ${seconds(r.wall.runs)} together._`,
    '',
  ];
}

function runsSection(r: CompareResults): string[] {
  return [
    '## Runs',
    '',
    markdownTable(
      [
        'seed',
        'strategy',
        ...(r.variants.length > 1 ? ['variant'] : []),
        'run',
        'status',
        'best',
        `spent (${r.budget.unit})`,
        'episodes',
        'wall time',
      ],
      r.runs.map((x) => [
        String(x.seed),
        x.strategy,
        ...(r.variants.length > 1 ? [x.variant] : []),
        x.run ?? '-',
        x.status,
        score(x.best),
        formatNumber(x.spent, 2),
        String(x.episodes),
        seconds(x.wallSeconds),
      ]),
    ),
    '',
    'Each run is an ordinary forkflush run: `forkflush status --run ID` shows it, and its report.md is in its own folder.',
    '',
  ];
}
