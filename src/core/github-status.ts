// Where a GitHub run stands, in the places people look: the status comment on the issue (edited
// in place: the status, a checklist of rounds with their branches' scores and spend, the plan, the
// leaderboard, score versus spend), the run's own check run, and the result pull request's title
// and body. Pure text from the run's state and its record's view (github-text.ts GitHubView).

import { BODY_MAX_CHARS, CHECK_OUTPUT_MAX_BYTES, CHECKLIST_MAX_ROUNDS } from './bounds.js';
import { charged, spent } from './budget.js';
import { type ChartData, chartData } from './chart.js';
import { endWarnings } from './end-warnings.js';
import { branchView, clip, commentMarker, type GitHubView, type RunPhase } from './github-text.js';
import { describeEpisodeId, GITHUB } from './names.js';
import { plan, planWarnings, widthText } from './plan.js';
import { leaderboardMarkdown, scoreText } from './report.js';
import { extraRounds, extraRoundsText, extraSpent } from './schedule.js';
import type { RunState } from './state.js';
import { haltsOnGitHub, type RunStop, retryStopped, runStop } from './stop.js';
import { formatNumber, inertCodeSpan, markdownTable } from './text.js';

export function issueComment(
  state: RunState,
  phase: RunPhase,
  notes: string[] = [],
  view: GitHubView = branchView(state),
): string {
  const c = state.config;
  const unit = c.budget.unit;
  const best = state.best
    ? `**${scoreText(state.best.score)}** from ${describeEpisodeId(state.best.episode)} (\`${view.best}\`)`
    : 'none yet';
  const gain = gainText(state);
  // The schedule, simulated once for the comment (each sync writes it).
  const phases = plan(c);
  const parts = [
    commentMarker(state.id),
    `### forkflush: ${c.strategy}, budget ${formatNumber(c.budget.total)} ${unit}${widthText(c, phases)}`,
    '',
    `**Status:** ${statusText(state, phase, view)}  `,
    `**Spent:** ${formatNumber(spent(state), 2)} of ${formatNumber(c.budget.total)} ${unit}  `,
    `**Best score** (${c.grader.direction}): ${best}${gain ? `, ${gain}` : ''}  `,
    `**Initial workspace:** ${baseText(state, view)}  `,
    ...(view.resultPr ? [`**Result:** #${view.resultPr} (a draft pull request, kept current)  `] : []),
    ...(view.overrides
      ? [`**Overrides:** \`${view.overrides.text}\` (${view.overrides.source}), checked like the config  `]
      : []),
    `**Lineage:** \`${view.lineage}\``,
    ...afterPlanLines(state),
    ...notes.map((n) => `> ${n}`),
    ...planWarnings(c, phases).map((w) => `> **Warning:** ${w}`),
  ];
  if (state.rounds.length > 0) parts.push('', '#### Rounds', '', roundsChecklist(state));
  parts.push('', '<details><summary>Plan</summary>', '', planMarkdown(state, phases), '', '</details>');
  if (view.map) parts.push('', ...mapLines(view.map));
  if (state.rounds.some((r) => r.episodes.some((e) => e.result))) {
    parts.push('', '#### Leaderboard', '', leaderboardMarkdown(state, 10));
    // No chart before anything scored (every setup failed, say): it would have no line to draw.
    const points = chartData(state).best;
    if (points.length > 0) {
      parts.push('', '#### Best score versus spend', '', mermaidChart(points, unit));
      parts.push('', '<details><summary>As a table</summary>', '', bestTable(points, unit), '', '</details>');
    }
  }
  return clip(`${parts.join('\n')}\n`, BODY_MAX_CHARS);
}

/** Where the run stands, in a phrase. */
function statusText(state: RunState, phase: RunPhase, view: GitHubView): string {
  const open = state.rounds.find((r) => !r.decision);
  // A run a stop halted (every branch of a round failed setup, the agent cannot start, a grader
  // that scored nothing once the initial workspace's grade is in) says why, whatever else holds.
  const halted = haltedBy(state, phase, view);
  if (view.stopReason) return `stopped: ${view.stopReason}; then \`/autoresearch resume\``;
  if (view.blocked) return stuckText(view.blocked);
  if (halted) return `stopped: ${halted.markdown}${retryStopped(state) ? ' (`/autoresearch resume`)' : ''}`;
  if (phase === 'stopped' && state.status === 'finished')
    return 'finished, and stopped: no more rounds after the plan (the issue was closed, its label removed, or `/autoresearch stop`); `/autoresearch resume` lets them run again';
  if (phase === 'stopped')
    return 'stopped (the label was removed, the issue closed, or `/autoresearch stop`); `/autoresearch resume` continues it';
  if (phase === 'finished') {
    const notes = endWarnings(state, inertCodeSpan);
    return notes.length > 0 ? `finished; note: ${notes.join('; ')}` : 'finished';
  }
  if (!open) return 'starting';
  return `round ${open.index} (${open.phase}) running: ${open.episodes.filter((e) => e.result).length} of ${open.episodes.length} episodes done`;
}

/** A run held up by a work item that keeps failing: what, its error, and what forkflush does about it. */
function stuckText(b: NonNullable<GitHubView['blocked']>): string {
  const what = `stuck: forkflush could not ${workText(b.work)} (${inertCodeSpan(b.message)}; since ${b.since.slice(0, 16).replace('T', ' ')} UTC). `;
  // Without its record nothing can be recorded, a stop neither: no round starts until it can.
  if (b.work === 'record')
    return `${what}No round starts until it can (the round's jobs may still end): give the app back its permissions (\`contents: write\`), and it goes on at the next event or nightly tick`;
  return `${what}It tries again at the next event and each nightly tick: fix the cause (the worker workflow, the app's permissions, the branch), or \`/autoresearch stop\``;
}

/** What a work item of core/work.ts does, by its key, in words. */
function workText(key: string): string {
  const [kind, what] = key.split(':');
  if (kind === 'dispatch') return `start round ${what}'s jobs`;
  if (kind === 'settle') return `settle round ${what}`;
  if (kind === 'publish') return `publish episode ${what}'s result`;
  if (kind === 'best') return 'move the best workspace';
  if (kind === 'record') return "save the run's record";
  return "publish the run's result";
}

/** The stop that halted a run on GitHub (core/stop.ts haltsOnGitHub), or null. */
function haltedBy(state: RunState, phase: RunPhase, view: GitHubView): RunStop | null {
  const stop = phase === 'finished' ? null : runStop(state);
  return haltsOnGitHub(stop, view.baseGrade === 'done' || view.baseGrade === 'lost') ? stop : null;
}

/** The initial workspace's grade, or where it stands. */
function baseText(state: RunState, view: GitHubView): string {
  if (state.base.score !== null) return `**${scoreText(state.base.score)}**, graded in the sandbox as an episode is`;
  if (view.baseGrade === 'asked') return 'being graded, in a job of the opening round';
  if (view.baseGrade === 'done') return `no score${state.base.reason ? ` (${inertCodeSpan(state.base.reason)})` : ''}`;
  if (view.baseGrade === 'lost')
    return `not graded: its job gave no grade${state.base.reason ? ` (${inertCodeSpan(state.base.reason)})` : ''}`;
  return 'not graded (a run started before forkflush graded it on GitHub)';
}

/**
 * The rounds as a checklist, newest last: each round's branches with their scores (the winner in
 * bold), what it spent, and a box ticked once it is decided.
 */
export function roundsChecklist(state: RunState): string {
  const unit = state.config.budget.unit;
  const lines: string[] = [];
  const hidden = Math.max(0, state.rounds.length - CHECKLIST_MAX_ROUNDS);
  if (hidden > 0) lines.push(`- [x] rounds 0 to ${hidden - 1}: in the leaderboard and the plan below`);
  for (const r of state.rounds.slice(hidden)) {
    const adopted = r.decision?.adopted ?? [];
    const branches = r.episodes.map((e) => {
      const score = e.result
        ? e.result.exit === 'setup'
          ? 'setup failed'
          : e.result.score === null
            ? 'no score'
            : scoreText(e.result.score)
        : 'running';
      const text = `${e.id} ${score}`;
      return r.kind === 'fork' && adopted.includes(e.id) ? `**${text}** (won)` : text;
    });
    const spentHere = r.episodes.reduce((sum, e) => sum + charged(e), 0);
    const what = r.extra ? `${r.phase}, after the plan` : r.phase;
    const outcome =
      r.decision && r.kind === 'fork' && r.decision.winner === null ? ', no branch scored: the leader goes on' : '';
    lines.push(
      `- [${r.decision ? 'x' : ' '}] round ${r.index} (${what}): ${branches.join(' · ')}; ${formatNumber(spentHere, 2)} ${unit}${outcome}`,
    );
  }
  return lines.join('\n');
}

/** What the run's own check run says: running while episodes run, then the result. */
export interface RunCheckText {
  status: 'in_progress' | 'completed';
  conclusion?: 'success' | 'neutral' | 'failure' | 'cancelled';
  title: string;
  summary: string;
}

/**
 * The run's check run (GITHUB.check), stable by name so a branch protection rule can require it:
 * in progress while rounds run; then success when an episode beat the initial workspace, neutral
 * when none did, failure when none scored or the run's setup stopped it, cancelled when a person
 * stopped it before its end.
 */
export function runCheckText(state: RunState, phase: RunPhase, view: GitHubView): RunCheckText {
  const open = state.rounds.find((r) => !r.decision);
  const gain = gainText(state);
  const bestScore = state.best ? `best ${scoreText(state.best.score)}${gain ? ` (${gain})` : ''}` : 'no score yet';
  const halted = haltedBy(state, phase, view) !== null;
  const summary = clip(
    [
      `**Status:** ${statusText(state, phase, view)}  `,
      `**Spent:** ${formatNumber(spent(state), 2)} of ${formatNumber(state.config.budget.total)} ${state.config.budget.unit}  `,
      `**Initial workspace:** ${baseText(state, view)}`,
      ...(view.issue ? ['', `Where the run stands, and how to steer it: issue #${view.issue}.`] : []),
      '',
      roundsChecklist(state),
    ].join('\n'),
    CHECK_OUTPUT_MAX_BYTES,
  );
  if (phase === 'running' && open && !view.stopReason && !halted) {
    const doing = view.blocked
      ? `stuck: could not ${workText(view.blocked.work)}`
      : `round ${open.index} (${open.phase}) running`;
    return { status: 'in_progress', title: `${doing}; ${bestScore}`, summary };
  }
  if (state.status !== 'finished' || halted || view.stopReason) {
    const stopped = halted || view.stopReason !== undefined;
    return {
      status: 'completed',
      conclusion: stopped ? 'failure' : phase === 'stopped' ? 'cancelled' : 'neutral',
      title: `stopped; ${bestScore}`,
      summary,
    };
  }
  const beat = state.best !== null && state.best.episode !== 'base';
  // An initial workspace its job never graded: whether the run gained anything is unknown.
  const unmeasured = beat && view.baseGrade === 'lost';
  return {
    status: 'completed',
    conclusion: state.best === null ? 'failure' : beat && !unmeasured ? 'success' : 'neutral',
    title:
      state.best === null
        ? 'finished; no episode scored'
        : `finished; ${bestScore}${unmeasured ? '; the initial workspace was not graded, so the gain is unknown' : ''}`,
    summary,
  };
}

/** The rounds after the plan, as the comment says them: what may run, and what ran and spent. */
function afterPlanLines(state: RunState): string[] {
  const text = extraRoundsText(state.config);
  const opened = state.rounds.filter((r) => r.extra).length;
  if (text === null && opened === 0) return [];
  const x = extraRounds(state.config);
  const unit = state.config.budget.unit;
  const ran = `${opened} so far, ${formatNumber(extraSpent(state), 2)} of ${formatNumber(x.budget)} ${unit} spent`;
  return [`  \n**After the plan:** ${text ? `${text}; ` : ''}${ran}`];
}

export function planMarkdown(state: RunState, phases = plan(state.config)): string {
  const unit = state.config.budget.unit;
  const rows = phases.map((p) => [
    p.phase,
    p.kind === 'fork' ? 'fork round' : 'serial',
    String(p.branches),
    String(p.rounds),
    formatNumber(p.budgetEach, 2),
    `${formatNumber(p.cumulative, 2)} (${Math.round((p.cumulative / state.config.budget.total) * 100)}%)`,
  ]);
  return markdownTable(['phase', 'kind', 'branches', 'episodes', `budget each (${unit})`, 'cumulative'], rows);
}

/** A Mermaid line chart of the best score so far at the end of each round (chartData's `best`). */
function mermaidChart(points: ChartData['best'], unit: string): string {
  const ys = points.map((p) => p.y);
  const lo = Math.min(...ys);
  const hi = Math.max(...ys);
  const pad = (hi - lo) * 0.1 || Math.abs(hi) * 0.1 || 1;
  return [
    '```mermaid',
    'xychart-beta',
    `  x-axis "spend (${unit})" [${points.map((p) => `"${formatNumber(p.x, 1)}"`).join(', ')}]`,
    `  y-axis "best score" ${formatNumber(lo - pad, 4)} --> ${formatNumber(hi + pad, 4)}`,
    `  line [${ys.map((y) => formatNumber(y, 4)).join(', ')}]`,
    '```',
  ].join('\n');
}

function bestTable(points: ChartData['best'], unit: string): string {
  return markdownTable(
    [`spend (${unit})`, 'best score'],
    points.map((p) => [formatNumber(p.x, 2), scoreText(p.y)]),
  );
}

/**
 * The best score against the initial workspace's: "+8 over the initial workspace" (a sign as the
 * scores go, whatever the direction), or null while either is unknown.
 */
export function gainText(state: RunState): string | null {
  const base = state.base.score;
  const best = state.best?.score;
  if (base === null || best === undefined) return null;
  const delta = best - base;
  const sign = delta > 0 ? '+' : delta < 0 ? '−' : '±';
  return `${sign}${formatNumber(Math.abs(delta), 4)} over the initial workspace`;
}

/** The result pull request's title: the run, its best score, and the gain over the initial workspace. */
export function finalPrTitle(state: RunState): string {
  const gain = gainText(state);
  return `forkflush ${state.id}: best score ${scoreText(state.best?.score)}${gain ? ` (${gain})` : ''}`;
}

/**
 * The result pull request's body, kept current while rounds run after the end (nightly ones,
 * `/autoresearch fork`): the scores, where the work ran, and how the repository's own CI may run on it.
 */
/** The files that run by themselves the result changes: named, since GitHub may fold their diffs away. */
function automationLines(paths: readonly string[]): string[] {
  if (paths.length === 0) return [];
  const named = paths.slice(0, 20).map(inertCodeSpan).join(', ');
  return [
    `- **It changes files that run by themselves** once CI, a hook manager, an editor or git reads them: ${named}` +
      `${paths.length > 20 ? ` and ${paths.length - 20} more` : ''}. An agent wrote them: read each before you add the label or merge.`,
  ];
}

export function finalPrBody(
  state: RunState,
  issue: number | null = null,
  view: GitHubView = branchView(state),
): string {
  const c = state.config;
  const gain = gainText(state);
  const open = state.rounds.find((r) => !r.decision);
  const body = [
    // forkflush's own closing keyword: the only one left active (agent text in the body is inert).
    ...(issue !== null ? [`Closes #${issue}.`, ''] : []),
    `The result of forkflush run \`${state.id}\`: the lineage after ${state.rounds.filter((r) => r.decision).length} rounds` +
      (open ? `; round ${open.index} (${open.phase}) is running, and this pull request follows its result.` : '.'),
    '',
    markdownTable(
      ['', 'score', ''],
      [
        [
          'best',
          `**${scoreText(state.best?.score)}**`,
          state.best ? `${describeEpisodeId(state.best.episode)}, on \`${view.best}\`` : 'no episode scored',
        ],
        ['initial workspace', scoreText(state.base.score), state.base.reason ? inertCodeSpan(state.base.reason) : ''],
        ['gain', gain ? `**${gain.split(' ')[0]}**` : '-', `${c.grader.direction}`],
      ],
    ),
    '',
    `Spent ${formatNumber(spent(state), 2)} of ${formatNumber(c.budget.total)} ${c.budget.unit}` +
      `${state.best && state.best.commit !== state.lineages[0]?.head ? ". The best workspace is not this branch's head: a later episode scored lower." : '.'}`,
    '',
    leaderboardMarkdown(state, 20),
    '',
    ...(view.map ? [...mapLines(view.map), ''] : []),
    '#### What ran where',
    '',
    `- The agents ran in forkflush's worker jobs (\`.github/workflows/${GITHUB.workflow}\`), each in a sandbox without this repository's tokens; their work stayed on \`${view.lineage}\` and the refs beside it, which no workflow runs on.`,
    `- This pull request's branch holds code an agent wrote. Let this repository's workflows run on it by adding the label \`${GITHUB.ciLabel}\` once you have read the diff (README, "Agent code and your CI"); forkflush takes the label off when the result moves.`,
    ...automationLines(view.automation ?? []),
  ];
  return clip(body.join('\n'), BODY_MAX_CHARS);
}

/** The last idea map drawn (`/autoresearch map`), as the status comment and the result pull request show it. */
function mapLines(map: { image: string; line: string }): string[] {
  return ['#### Idea map', '', `![Idea map: where the agents searched](${map.image})`, '', map.line];
}
