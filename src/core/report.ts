// Reports of a run: the leaderboard, the rounds, and the markdown report. Pure: the same state
// always renders the same text, for the CLI, report.md and (later) issue comments.
import { spent } from './budget.js';
import { describeContext } from './journal.js';
import { bestBranch, describeEpisodeId } from './names.js';
import { type AgentUsage, allEpisodes, type Episode, type Round, type RunState } from './state.js';
import { codeSpan, formatNumber, markdownTable } from './text.js';

export type Outcome = 'adopted' | 'dropped' | 'kept' | 'running';

export interface LeaderboardRow {
  episode: Episode;
  phase: string;
  outcome: Outcome;
}

export function outcomeOf(round: Round, e: Episode): Outcome {
  if (!round.decision) return 'running';
  if (round.kind === 'serial') return 'kept';
  return round.decision.adopted.includes(e.id) ? 'adopted' : 'dropped';
}

/** Every episode with a result, best first; episodes without a score last, then by id. */
export function leaderboard(state: RunState): LeaderboardRow[] {
  const sign = state.config.grader.direction === 'maximize' ? -1 : 1;
  const rows = state.rounds.flatMap((r) =>
    r.episodes.filter((e) => e.result).map((e) => ({ episode: e, phase: r.phase, outcome: outcomeOf(r, e) })),
  );
  return rows.sort((a, b) => {
    const sa = a.episode.result?.score ?? null;
    const sb = b.episode.result?.score ?? null;
    if (sa === null || sb === null) return sa === sb ? a.episode.round - b.episode.round : sa === null ? 1 : -1;
    return sign * (sa - sb) || a.episode.round - b.episode.round || a.episode.branch - b.episode.branch;
  });
}

export function scoreText(score: number | null | undefined): string {
  return score === null || score === undefined ? '-' : formatNumber(score, 4);
}

export function leaderboardRows(state: RunState, limit = Number.POSITIVE_INFINITY): string[][] {
  return leaderboard(state)
    .slice(0, limit)
    .map((row, i) => {
      const e = row.episode;
      const r = e.result;
      return [
        String(i + 1),
        e.id,
        row.phase,
        describeContext(e) + (e.directive ? ', directive' : ''),
        scoreText(r?.score),
        formatNumber(r?.spent ?? 0, 2),
        r?.exit ?? '',
        row.outcome,
        r?.usage ? usageText(r.usage) : '',
        r?.score === null ? (r.reason ?? '') : (r?.note ?? ''),
      ];
    });
}

/** The leaderboard as a markdown table; the last column (a reason or a note, which an agent's or a grader's output can fill) as code. */
export function leaderboardMarkdown(state: RunState, limit = Number.POSITIVE_INFINITY): string {
  const rows = leaderboardRows(state, limit).map((r) => [...r.slice(0, -1), codeSpan(r.at(-1) ?? '')]);
  return markdownTable(LEADERBOARD_HEADER, rows);
}

export const LEADERBOARD_HEADER = [
  '#',
  'episode',
  'phase',
  'context',
  'score',
  'spent',
  'ended',
  'outcome',
  'usage',
  'note',
];

/**
 * Tokens in and out, cost and turns: "12.3k/1.2k tokens, $0.041 as the agent reported it, 7 turns".
 * The cost says where it comes from: the agent's own report, or forkflush's price table.
 */
export function usageText(u: AgentUsage): string {
  const k = (n: number) => (n >= 1000 ? `${formatNumber(n / 1000, 1)}k` : String(n));
  const parts = [`${k(u.inputTokens)}/${k(u.outputTokens)} tokens`];
  if (u.costUsd !== null)
    parts.push(`$${formatNumber(u.costUsd, 3)} ${u.pricedFrom ? 'priced by forkflush' : 'as the agent reported it'}`);
  if (u.turns !== null) parts.push(`${u.turns} turns`);
  return parts.join(', ');
}

export function roundRows(state: RunState): string[][] {
  return state.rounds.map((r) => {
    const winner = r.kind === 'fork' ? (r.decision ? (r.decision.winner ?? 'none: leader kept') : 'pending') : '';
    return [
      String(r.index),
      r.phase,
      r.kind,
      r.episodes.map((e) => `${e.id} ${scoreText(e.result?.score)}`).join(', '),
      winner,
      formatNumber(
        r.episodes.reduce((s, e) => s + (e.result?.spent ?? 0), 0),
        2,
      ),
    ];
  });
}

/** One paragraph: where the run stands. */
export function summary(state: RunState): string {
  const c = state.config;
  const unit = c.budget.unit;
  const lines = [
    `Strategy ${c.strategy}, ${c.grader.direction} the score, budget ${formatNumber(c.budget.total)} ${unit} ` +
      `(spent ${formatNumber(spent(state), 2)}), K = ${c.fork.branches}, seed ${state.seed}: ${state.status}.`,
  ];
  if (state.best) {
    lines.push(
      `Best score: ${scoreText(state.best.score)} from ${describeEpisodeId(state.best.episode)}, ` +
        `on branch ${bestBranch(state.id)} (commit ${state.best.commit.slice(0, 10)}).`,
    );
  } else {
    lines.push('No workspace has a score yet.');
  }
  const base = state.base;
  lines.push(
    `Initial workspace: ${base.score === null ? `no score (${base.reason ?? 'not graded'})` : scoreText(base.score)}.`,
  );
  const isolation = isolationSummary(state);
  if (isolation) lines.push(isolation);
  return lines.join('\n');
}

/** How the episodes were confined: one sandbox for all, or which ones ran without. */
export function isolationSummary(state: RunState): string | null {
  const results = allEpisodes(state).flatMap((e) => (e.result?.sandbox ? [e.result.sandbox] : []));
  if (results.length === 0) return null;
  const kinds = [...new Set(results)];
  const off = results.filter((s) => s.startsWith('off')).length;
  if (kinds.length === 1) {
    return off > 0
      ? `Sandbox: OFF for every episode (${kinds[0]?.slice(4, -1)}): agents ran with your user's rights.`
      : `Sandbox: ${kinds[0]} for every episode (agent and grader confined).`;
  }
  return `Sandbox: ${kinds.join(', ')}; ${off} of ${results.length} episodes ran without it.`;
}

export function renderReport(state: RunState, chartFile?: string): string {
  const parts = [`# forkflush run ${state.id}`, '', summary(state).split('\n').join('  \n'), ''];
  if (chartFile) parts.push(`![Score versus spend](${chartFile})`, '');
  parts.push('## Leaderboard', '', leaderboardMarkdown(state), '');
  parts.push(
    '## Rounds',
    '',
    markdownTable(
      ['round', 'phase', 'kind', 'scores', 'winner', `spent (${state.config.budget.unit})`],
      roundRows(state),
    ),
    '',
  );
  return parts.join('\n');
}
