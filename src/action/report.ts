// What the job reports: its outputs, a notice when this attempt's own result is not the one on
// the branch, and the summary for the job's page: the episode's row, then what it used (tokens,
// cost, turns, time), the agent and its version, where its log is, what it changed, the
// journal's new entries and links. Text an agent wrote is shown as code, never as markdown.
import { FAILURE_WHAT, GENERIC_FIX } from '../core/failure.js';
import { describeContext } from '../core/journal.js';
import { mapText } from '../core/map/report.js';
import { describeEpisodeId, episodeBranch, mapRef } from '../core/names.js';
import { stoppingFailure } from '../core/stop.js';
import { codeSpan, formatNumber, markdownTable, plainText } from '../core/text.js';
import type { ArtifactResult } from './artifact.js';
import type { BaseOutcome } from './base-job.js';
import type { JobOutcome } from './episode-job.js';
import type { MapJobOutcome } from './map-job.js';

export type OutputName =
  | 'score'
  | 'spent'
  | 'exit'
  | 'commit'
  | 'reason'
  | 'tokens'
  | 'cost'
  | 'agent-version'
  | 'log-file';

/** What the job knows beyond the outcome: the agent's version and log. */
export interface LogFacts {
  /** The agent CLI's version (empty: unknown, or no agent ran in this job). */
  agentVersion?: string | null;
  /** The redacted copy of the agent's log on the runner. */
  logFile?: string | null;
}

/**
 * The Action's outputs (action.yml): score is empty when the episode has none; tokens and cost
 * are empty when the agent did not report them.
 */
export function jobOutputs(o: JobOutcome, x: LogFacts = {}): Record<OutputName, string> {
  const r = o.result;
  const u = r.usage;
  return {
    score: r.score === null ? '' : plain(r.score),
    spent: plain(r.spent),
    exit: r.exit,
    commit: r.commit,
    reason: r.reason ?? '',
    tokens: u ? String(u.inputTokens + u.outputTokens) : '',
    cost: u && u.costUsd !== null ? plain(u.costUsd) : '',
    'agent-version': x.agentVersion ?? '',
    'log-file': x.logFile ?? '',
  };
}

/** A number without float noise (5.8500000000000005 -> 5.85), at full useful precision. */
function plain(x: number): string {
  return String(Number(x.toPrecision(12)));
}

/** Why this attempt's own result is not the one reported, or null when it is. */
export function jobNotice(o: JobOutcome): string | null {
  const which = `episode ${o.episode.id} of run ${o.run}`;
  if (o.attempt === 'already-recorded') {
    return `${which} already has its result on its branch (commit ${o.result.commit.slice(0, 10)}), from an earlier attempt: it was not run again`;
  }
  if (o.attempt === 'lost-race') {
    return `another attempt at ${which} pushed its result first (commit ${o.result.commit.slice(0, 10)}): that result stands, this attempt's is dropped`;
  }
  return null;
}

/**
 * Why the job fails (red) though its result was recorded: the agent failed in a way that stops
 * the run (a refused key, an exhausted quota, ...: core/stop.ts). The result on the branch tells
 * the app to stop the run; the red job tells whoever looks at the workflow run. Null otherwise.
 */
export function jobFailure(o: JobOutcome): string | null {
  const f = stoppingFailure(o.result);
  if (!f) return null;
  return `the agent failed: ${FAILURE_WHAT[f.kind]} (${plainText(f.quote)}): ${f.fix ?? GENERIC_FIX[f.kind]}. The run stops; its issue says so`;
}

/** What the summary shows beyond the outcome. */
export interface SummaryFacts extends LogFacts {
  /** The agent's kind (agent.kind). */
  agentKind?: string | null;
  /** Lines of transcript printed in the job log. */
  transcriptLines?: number;
  artifact?: ArtifactResult | null;
  /** `git diff --stat` of the episode's commit, line by line. */
  diffStat?: string[];
  /** The lines the episode added to the journal. */
  journal?: string[];
  /** The run's issue. */
  issue?: number | null;
  /** Where the repository is on the web: GITHUB_SERVER_URL and GITHUB_REPOSITORY. */
  serverUrl?: string;
  repository?: string;
  /** GITHUB_RUN_ID and GITHUB_RUN_ATTEMPT: this workflow run. */
  runId?: string;
  runAttempt?: string;
}

/** The job summary: the episode's row, then the details. */
export function jobSummary(o: JobOutcome, x: SummaryFacts = {}): string {
  const { episode: e, result: r } = o;
  const score = r.score === null ? `no score: ${codeSpan(r.reason ?? 'no reason given')}` : formatNumber(r.score, 6);
  const table = markdownTable(
    ['episode', 'phase', 'context', 'score', 'spent', 'exit', 'commit'],
    [
      [
        `${e.id} (${describeEpisodeId(e.id)})`,
        o.phase,
        describeContext(e),
        score,
        `${formatNumber(r.spent)} of ${formatNumber(e.allowance)} ${o.config.budget.unit}`,
        r.exit,
        r.commit.slice(0, 10),
      ],
    ],
  );
  const notes = [jobNotice(o), r.note ? `Note: ${codeSpan(r.note)}` : null].filter((n) => n !== null);
  const parts = [`### forkflush ${o.run}: episode ${e.id}`, '', table, ...notes.map((n) => `\n${n}`)];
  const details = detailRows(o, x);
  if (details.length > 0) parts.push('', markdownTable(['', ''], details));
  if (x.diffStat && x.diffStat.length > 0) parts.push('', '**Changes**', '', codeBlock(x.diffStat));
  else if (x.diffStat) parts.push('', '**Changes**: none');
  if (x.journal && x.journal.length > 0) parts.push('', '**The journal’s new entries**', '', codeBlock(x.journal));
  const links = summaryLinks(o, x);
  if (links.length > 0) parts.push('', `**Links**: ${links.join(' · ')}`);
  parts.push('');
  return parts.join('\n');
}

function detailRows(o: JobOutcome, x: SummaryFacts): string[][] {
  const r = o.result;
  const rows: string[][] = [];
  const u = r.usage;
  if (u) {
    rows.push([
      'tokens',
      `${count(u.inputTokens + u.outputTokens)} (${count(u.inputTokens)} in, ${count(u.outputTokens)} out)`,
    ]);
    const priced = u.pricedFrom ? ` (priced by forkflush: ${codeSpan(u.pricedFrom)})` : '';
    rows.push(['cost', u.costUsd === null ? 'not reported' : `$${formatNumber(u.costUsd, 4)}${priced}`]);
    if (u.turns !== null) rows.push(['turns', String(u.turns)]);
  } else if (o.attempt !== 'already-recorded') {
    rows.push(['tokens', 'not reported by the agent']);
  }
  if (x.agentKind) {
    // A command agent has no version of its own; an attempt that did not run had no agent.
    const unknown = o.attempt === 'already-recorded' || x.agentKind === 'command' ? '' : ' (version not known)';
    rows.push(['agent', `${x.agentKind}${x.agentVersion ? ` ${codeSpan(x.agentVersion)}` : unknown}`]);
  }
  rows.push([
    'time',
    `agent ${seconds(r.agentSeconds)}, grader ${seconds(r.graderSeconds)}, episode ${seconds(r.wallSeconds)}`,
  ]);
  if (r.sandbox) rows.push(['sandbox', codeSpan(r.sandbox)]);
  if (r.protectedChanged.length > 0) rows.push(['protected paths changed', codeSpan(r.protectedChanged.join(', '))]);
  const log = logCell(x);
  if (log) rows.push(['log', log]);
  return rows;
}

function logCell(x: SummaryFacts): string | null {
  const parts: string[] = [];
  if (x.transcriptLines !== undefined && x.logFile) {
    parts.push(`transcript in the job log (${x.transcriptLines} lines, in a collapsed group)`);
  }
  const a = x.artifact;
  if (a?.uploaded) parts.push(a.url ? `artifact [${a.name}](${a.url})` : `artifact ${codeSpan(a.name)}`);
  else if (a) parts.push(`no artifact (${codeSpan(a.why)})`);
  if (x.logFile) parts.push(`on the runner: ${codeSpan(x.logFile)} (redacted)`);
  return parts.length > 0 ? parts.join('; ') : null;
}

function summaryLinks(o: JobOutcome, x: SummaryFacts): string[] {
  if (!x.serverUrl || !/^https?:\/\//.test(x.serverUrl) || !x.repository) return [];
  const repo = `${x.serverUrl.replace(/\/+$/, '')}/${x.repository}`;
  const links: string[] = [];
  if (x.issue) links.push(`[issue #${x.issue}](${repo}/issues/${x.issue})`);
  links.push(`[the commit](${repo}/commit/${o.result.commit})`);
  // Layout 2 keeps episodes off the branches: the commit is the place to see one.
  if (o.layout === 1) {
    const branch = episodeBranch(o.run, o.episode.round, o.episode.branch);
    links.push(`[the branch](${repo}/tree/${branch.split('/').map(encodeURIComponent).join('/')})`);
  }
  if (x.runId && /^\d+$/.test(x.runId)) {
    const attempt =
      x.runAttempt && /^\d+$/.test(x.runAttempt) && x.runAttempt !== '1' ? `/attempts/${x.runAttempt}` : '';
    links.push(`[this workflow run](${repo}/actions/runs/${x.runId}${attempt})`);
  }
  return links;
}

/** A fenced block that no backtick run in the text can close early; control characters gone. */
function codeBlock(lines: string[]): string {
  const text = plainText(lines.join('\n'));
  const longest = Math.max(0, ...(text.match(/`+/g) ?? []).map((t) => t.length));
  const fence = '`'.repeat(Math.max(3, longest + 1));
  return `${fence}text\n${text}\n${fence}`;
}

function count(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function seconds(s: number): string {
  return s >= 90 ? `${formatNumber(s / 60, 1)} min` : `${formatNumber(s, 1)} s`;
}

/** The outputs of the job that grades the initial workspace (action.yml's, those it has). */
export function baseOutputs(b: BaseOutcome): Record<string, string> {
  return { score: b.score === null ? '' : String(b.score), spent: '0', commit: b.commit, reason: b.reason ?? '' };
}

/** The job summary of the grade of the initial workspace. */
export function baseSummary(b: BaseOutcome): string {
  const score = b.score === null ? `no score (${plainText(b.reason ?? 'no reason given')})` : formatNumber(b.score, 6);
  const how = b.attempt === 'ran' ? 'graded here' : 'graded by an earlier job';
  return `### forkflush ${b.run}: the initial workspace\n\nScore: **${score}** (${how}, commit \`${b.commit.slice(0, 10)}\`). Every episode's gain is measured against it.\n`;
}

/** The outputs of the job that draws the idea map (action.yml's, those it has). */
export function mapOutputs(m: MapJobOutcome): Record<string, string> {
  return { commit: m.commit, spent: String(m.record.spent) };
}

/** The job summary of the idea map: what it shows in words, where it is, and its images. */
export function mapSummary(m: MapJobOutcome, artifact: ArtifactResult): string {
  const images = artifact.uploaded
    ? `The images are the artifact ${artifact.url ? `[${artifact.name}](${artifact.url})` : `\`${artifact.name}\``}.`
    : `The images were not uploaded as an artifact: ${plainText(artifact.why)}.`;
  return [
    `### forkflush ${m.run}: idea map`,
    '',
    // The judge's words (a failure's quote) are in it: shown as text, never as markdown.
    codeBlock(mapText(m.record)),
    '',
    `map.json, map.svg${m.pngNote ? '' : ', map.png'} and the judge's answers: \`${mapRef(m.run)}\` at \`${m.commit.slice(0, 10)}\`. ${images}`,
    ...(m.pngNote ? ['', plainText(m.pngNote)] : []),
    '',
  ].join('\n');
}
