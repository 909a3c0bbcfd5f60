// Reports of a run: the leaderboard, the rounds, and the markdown report. Pure: the same state
// always renders the same text, for the CLI, report.md and (later) issue comments.
import { charged, estimatedSpent, spent } from './budget.js';
import { describeContext } from './journal.js';
import { bestBranch, describeEpisodeId } from './names.js';
import { widthText } from './plan.js';
import { type AgentUsage, allEpisodes, type Episode, type Round, type RunState, setupFailed } from './state.js';
import { runStop } from './stop.js';
import { codeSpan, formatNumber, inertCodeSpan, markdownTable, shellQuote } from './text.js';

export type Outcome = 'adopted' | 'dropped' | 'kept' | 'undecided';
/** What the leaderboard and `status --json` say of an episode: its outcome, or that its setup failed. */
export type RowOutcome = Outcome | 'setup-failed';

export interface LeaderboardRow {
  episode: Episode;
  phase: string;
  outcome: RowOutcome;
}

/** An episode whose setup failed never ran its agent, and is never adopted, whatever its round decided. */
export function rowOutcome(round: Round, e: Episode): RowOutcome {
  return setupFailed(e) ? 'setup-failed' : outcomeOf(round, e);
}

/** What its round's decision did with an episode: a serial round keeps what it adopted (all that ran). */
export function outcomeOf(round: Round, e: Episode): Outcome {
  if (!round.decision) return 'undecided';
  if (!round.decision.adopted.includes(e.id)) return 'dropped';
  return round.kind === 'serial' ? 'kept' : 'adopted';
}

/** Every episode with a result, best first; episodes without a score last, then by id. */
export function leaderboard(state: RunState): LeaderboardRow[] {
  const sign = state.config.grader.direction === 'maximize' ? -1 : 1;
  const rows = state.rounds.flatMap((r) =>
    r.episodes.filter((e) => e.result).map((e) => ({ episode: e, phase: r.phase, outcome: rowOutcome(r, e) })),
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
        spentText(e),
        r?.exit ?? '',
        row.outcome,
        r?.usage ? usageText(r.usage) : '',
        r?.score === null ? (r.reason ?? '') : (r?.note ?? ''),
      ];
    });
}

/**
 * The leaderboard as a markdown table; the last column (a reason or a note, which an agent's or a
 * grader's output can fill) as inert code: the table goes into pull request bodies, where a
 * `fixes #12` would close an issue on merge.
 */
export function leaderboardMarkdown(state: RunState, limit = Number.POSITIVE_INFINITY): string {
  const rows = leaderboardRows(state, limit).map((r) => [...r.slice(0, -1), inertCodeSpan(r.at(-1) ?? '')]);
  return markdownTable(LEADERBOARD_HEADER, rows);
}

/** An episode's spend as the tables show it: `~` before an estimate (the agent reported no usage). */
export function spentText(e: Episode): string {
  const estimated = e.result?.spentBasis === 'estimated';
  return `${estimated ? '~' : ''}${formatNumber(e.result?.spent ?? 0, 2)}`;
}

/** Where an episode's spend comes from, as `status --json` says it. */
export function spentBasis(e: Episode): 'measured' | 'estimated' | 'none' | null {
  return e.result ? (e.result.spentBasis ?? 'measured') : null;
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
    const winner =
      r.kind === 'fork'
        ? r.decision
          ? (r.decision.winner ?? (r.decision.voided ? 'none: void, leader kept' : 'none: leader kept'))
          : 'pending'
        : '';
    return [
      String(r.index),
      r.phase,
      r.kind,
      r.episodes.map((e) => `${e.id} ${scoreText(e.result?.score)}`).join(', '),
      winner,
      formatNumber(
        r.episodes.reduce((s, e) => s + charged(e), 0),
        2,
      ),
    ];
  });
}

/** One paragraph: where the run stands; `markdown`: for report.md, what others wrote in the stop as inert code. */
export function summary(state: RunState, markdown = false): string {
  const c = state.config;
  const unit = c.budget.unit;
  const stop = runStop(state);
  const estimated = estimatedSpent(state);
  const lines = [
    `Strategy ${c.strategy}, ${c.grader.direction} the score, budget ${formatNumber(c.budget.total)} ${unit} ` +
      `(spent ${formatNumber(spent(state), 2)}${estimated > 0 ? `, of which ${formatNumber(estimated, 2)} estimated` : ''})${widthText(c)}, seed ${state.seed}: ${runStatus(state)}.`,
  ];
  if (stop) lines.push(`Stopped: ${markdown ? stop.markdown : stop.message}.`);
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

/** Where a local run's repository is, for the lines that say how to take its result home. */
export interface RunPlace {
  /** The repository the run worked in. */
  repo: string;
  /** The folder the user named; the repository itself unless the run worked on a copy. */
  taskDir: string;
  /** The run worked on a copy (the task folder is not a git repository). */
  scratch: boolean;
}

/** How to take the best workspace into the user's own branch (no lines when nothing scored). */
export function takeHomeLines(state: RunState, place: RunPlace): string[] {
  if (!state.best) return [];
  if (state.best.episode === 'base') return ['No episode beat the initial workspace: there is nothing to take home.'];
  const best = bestBranch(state.id);
  if (!place.scratch) {
    // Git writes over the files a checkout ignores (a .env of the user's, where the agent wrote
    // one); these stop and name them instead.
    return [
      `Take the best workspace into your branch: git merge --no-overwrite-ignore ${best}`,
      `(or look at it first: git switch --no-overwrite-ignore --create try-${state.id} ${best})`,
    ];
  }
  return [
    `The run worked on a copy of ${place.taskDir} (it is not the root of a git repository): the best workspace is branch ${best} of ${place.repo}.`,
    `Copy its files over yours: git -C ${shellQuote(place.repo)} archive ${best} | tar -x -C ${shellQuote(place.taskDir)}`,
  ];
}

/** What the leaderboard's outcomes mean. */
export const OUTCOMES_LEGEND =
  'adopted: the winner of its fork round, whose workspace the lineage continues from; dropped: a branch that lost its round; ' +
  'kept: an episode of a serial stretch (each one continues the last); setup-failed: its setup failed, so its agent never ran ' +
  '(it spent nothing and is never adopted); undecided: its round is not decided yet (still running, or the run stopped before).';

/** What the spend column's marks mean. */
export const SPENT_LEGEND =
  'Spent: measured, or as the agent reported it; ~ marks an estimate, for an agent that reported no usage (README, "Troubleshooting").';

export function renderReport(
  state: RunState,
  o: { chartFile?: string; place?: RunPlace; episodeLogs?: (episode: string) => { name: string; path: string }[] } = {},
): string {
  const parts = [`# forkflush run ${state.id}`, '', summary(state, true).split('\n').join('  \n'), ''];
  const home = o.place ? takeHomeLines(state, o.place) : [];
  // The command as code, the parenthesis that closes the sentence outside it (a copied command must run).
  if (home.length > 0) parts.push(home.map((l) => l.replace(/: (git [^)]*)(\)?)$/, ': `$1`$2')).join('  \n'), '');
  if (o.chartFile) parts.push(`![Score versus spend](${o.chartFile})`, '');
  parts.push('## Leaderboard', '', leaderboardMarkdown(state), '', `_${OUTCOMES_LEGEND} ${SPENT_LEGEND}_`, '');
  parts.push(
    '## Rounds',
    '',
    markdownTable(
      ['round', 'phase', 'kind', 'scores', 'winner', `spent (${state.config.budget.unit})`],
      roundRows(state),
    ),
    '',
  );
  const failed = allEpisodes(state).filter((e) => e.result && (e.result.score === null || e.result.exit === 'crash'));
  if (failed.length > 0 && o.episodeLogs) {
    parts.push('## Episodes without a score, or that crashed', '');
    for (const e of failed) {
      const r = e.result as NonNullable<typeof e.result>;
      const why = [
        r.score === null ? (r.reason ?? 'no score') : r.exit,
        r.failure ? `${r.failure.kind}: ${r.failure.quote}` : null,
        r.score === null ? null : r.note,
      ]
        .filter(Boolean)
        .join('; ');
      const logs = o.episodeLogs(e.id).map((l) => `[${l.name}](${l.path})`);
      parts.push(`- ${e.id}: ${codeSpan(why)}${logs.length > 0 ? ` (${logs.join(', ')})` : ''}`);
    }
    parts.push('');
  }
  return parts.join('\n');
}

/** Where a run stands, as far as its state says (a shell knows more: whether a process drives it). */
function runStatus(state: RunState): 'finished' | 'stopped' | 'in progress' {
  if (state.status === 'finished') return 'finished';
  return runStop(state) ? 'stopped' : 'in progress';
}

/** `forkflush status --json`: where a run stands (README, "JSON output"). */
export function statusJson(
  state: RunState,
  o: { folder: string; live: { pid: number } | null; resume: string | null },
): Record<string, unknown> {
  const c = state.config;
  const stop = state.status === 'finished' || o.live ? null : runStop(state);
  return {
    run: state.id,
    folder: o.folder,
    status: state.status === 'finished' ? 'finished' : o.live ? 'running' : stop ? 'stopped' : 'interrupted',
    stopped: stop ? { code: stop.code, message: stop.message } : null,
    pid: o.live?.pid ?? null,
    strategy: c.strategy,
    direction: c.grader.direction,
    budget: { total: c.budget.total, unit: c.budget.unit, spent: spent(state), estimated: estimatedSpent(state) },
    seed: state.seed,
    initial: { score: state.base.score, reason: state.base.reason ?? null },
    best: state.best
      ? {
          score: state.best.score,
          episode: state.best.episode,
          commit: state.best.commit,
          branch: bestBranch(state.id),
        }
      : null,
    rounds: state.rounds.map((r) => ({
      index: r.index,
      phase: r.phase,
      kind: r.kind,
      decided: r.decision !== undefined,
      winner: r.decision?.winner ?? null,
      voided: r.decision?.voided ?? null,
      episodes: r.episodes.map((e) => ({
        id: e.id,
        lineage: e.lineage,
        allowance: e.allowance,
        score: e.result ? e.result.score : null,
        spent: e.result?.spent ?? null,
        spentBasis: spentBasis(e),
        interruptedSpent: e.interruptedSpent ?? 0,
        interruptedBasis: e.interruptedBasis ?? 'measured',
        failure:
          e.result?.failure ?? (e.result?.agentNotStarted ? { kind: 'cli', quote: e.result.agentNotStarted } : null),
        retries: e.result?.retries?.length ?? 0,
        exit: e.result?.exit ?? null,
        reason: e.result?.reason ?? null,
        note: e.result?.note ?? null,
        outcome: rowOutcome(r, e),
      })),
    })),
    resume: o.resume,
  };
}
