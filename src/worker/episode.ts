// The worker: one episode on one branch. The same code runs in the local runner and in the
// Action's matrix job. The caller prepares the checkout and the context folder; this runs the
// agent within its budget, restores protected paths, grades, writes the journal and commits.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AgentAdapter } from '../agents/agent.js';
import { CONFIG_PATH, type Config } from '../core/config.js';
import { appendToJournal, commitMessage, type EpisodeDetails, journalEntry } from '../core/journal.js';
import type { Episode, EpisodeResult } from '../core/state.js';
import { Git } from '../io/git.js';
import { sandboxEnv } from './env.js';
import { runGrader } from './grade.js';
import { startGradeService } from './grade-service.js';

export class InterruptedError extends Error {
  override name = 'InterruptedError';
}

export interface EpisodeJob {
  runId: string;
  config: Config;
  episode: Episode;
  phase: string;
  /** The checkout, at `episode.base`, on the episode's branch. */
  workdir: string;
  /** The episode's branch, e.g. refs/heads/forkflush/<run>/round-1/branch-0. */
  branchRef: string;
  /** Prepared by the caller: empty (fresh) or holding the context to continue. */
  contextDir: string;
  /** A private folder outside the checkout for the prompt, usage and logs. */
  scratchDir: string;
  prompt: string;
  agent: AgentAdapter;
  /** Extra paths to protect (e.g. the config file the run was started with). */
  alsoProtected?: string[];
  /** Aborts the episode (Ctrl-C); the episode is then left without a result. */
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

export async function runEpisode(job: EpisodeJob): Promise<EpisodeResult> {
  const started = performance.now();
  const { config, episode } = job;
  const git = new Git(job.workdir);
  const env = sandboxEnv(job.env ?? process.env);
  await mkdir(job.scratchDir, { recursive: true });
  const promptFile = join(job.scratchDir, 'prompt.md');
  await writeFile(promptFile, job.prompt);

  const stopForBudget = new AbortController();
  const unit = config.budget.unit;
  const grading = await startGradeService({
    config,
    workdir: job.workdir,
    scratchDir: job.scratchDir,
    env,
    limit: unit === 'evaluations' ? Math.max(1, Math.floor(episode.allowance + 1e-9)) : Number.POSITIVE_INFINITY,
    onExhausted: () => stopForBudget.abort('budget'),
  });
  const interrupt = job.signal ?? new AbortController().signal;
  const budgetMs = unit === 'minutes' ? episode.allowance * 60_000 : Number.POSITIVE_INFINITY;
  const agentTimeoutMs = config.agent.timeout * 1000;
  let outcome: Awaited<ReturnType<AgentAdapter['run']>>;
  try {
    outcome = await job.agent.run({
      workdir: job.workdir,
      prompt: job.prompt,
      promptFile,
      contextDir: job.contextDir,
      usageFile: join(job.scratchDir, 'usage.json'),
      logFile: join(job.scratchDir, 'agent.log'),
      gradeCommand: grading.command,
      allowance: episode.allowance,
      unit,
      seed: episode.seed,
      episodeId: episode.id,
      deadlineMs: Math.min(budgetMs, agentTimeoutMs),
      deadlineIsBudget: budgetMs <= agentTimeoutMs,
      env,
      signal: AbortSignal.any([interrupt, stopForBudget.signal]),
    });
  } finally {
    await grading.close();
  }
  if (interrupt.aborted) throw new InterruptedError(`episode ${episode.id} was interrupted`);

  const measured =
    unit === 'minutes'
      ? outcome.seconds / 60
      : unit === 'evaluations'
        ? grading.evaluations()
        : (outcome.reportedSpend ?? episode.allowance);
  // Six decimals are plenty for any unit and keep float noise out of commits and reports.
  const spent = Math.round(measured * 1e6) / 1e6;

  // The grader is the judge: put protected paths back as they were at the episode's base.
  const protectedChanged = await restoreProtected(git, episode.base, [
    ...config.grader.protected,
    ...(job.alsoProtected ?? [CONFIG_PATH]),
  ]);
  let score: number | null = null;
  let reason: string | undefined;
  let graderSeconds = 0;
  if (protectedChanged.length > 0) {
    reason = `the agent changed protected paths: ${protectedChanged.join(', ')}`;
  } else {
    const g = await runGrader(config, job.workdir, env);
    graderSeconds = g.seconds;
    score = g.score;
    reason = g.reason;
  }
  const partial = {
    score,
    ...(reason ? { reason } : {}),
    ...(outcome.note ? { note: outcome.note } : {}),
    ...(outcome.usage ? { usage: outcome.usage } : {}),
    spent,
    exit: outcome.exit,
    protectedChanged,
    agentSeconds: seconds(outcome.seconds),
    graderSeconds: seconds(graderSeconds),
  };
  const journalPath = join(job.workdir, config.journal);
  const existing = await readFile(journalPath, 'utf8').catch(() => '');
  await mkdir(join(journalPath, '..'), { recursive: true });
  await writeFile(
    journalPath,
    appendToJournal(existing, journalEntry(config, job.phase, episode, { ...partial, commit: '', wallSeconds: 0 })),
  );
  const wallSeconds = seconds((performance.now() - started) / 1000);
  const details = await episodeDetails(git, episode.base, journalPath);
  const message = commitMessage(job.runId, config, episode, { ...partial, wallSeconds }, details);
  const commit = await commitWorkspace(git, job.branchRef, episode.base, message);
  return { ...partial, commit, wallSeconds };
}

/** The diff stat against the base and the journal's last entries, for the commit body. */
async function episodeDetails(git: Git, base: string, journalPath: string): Promise<EpisodeDetails> {
  await git.exec(['add', '-A']);
  const diffStat = await git.out(['diff', '--cached', '--shortstat', base]);
  const journal = await readFile(journalPath, 'utf8').catch(() => '');
  const journalTail = journal
    .split('\n')
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== '')
    .slice(-JOURNAL_TAIL)
    .map((l) => (l.length > JOURNAL_LINE_MAX ? `${l.slice(0, JOURNAL_LINE_MAX)}...` : l));
  return { diffStat, journalTail };
}

const JOURNAL_TAIL = 5;
const JOURNAL_LINE_MAX = 500;

/** Seconds to the millisecond, as the commit records them. */
function seconds(s: number): number {
  return Math.round(s * 1000) / 1000;
}

/** Restores paths matching the globs to `base`; returns the ones the agent had changed. */
async function restoreProtected(git: Git, base: string, globs: string[]): Promise<string[]> {
  if (globs.length === 0) return [];
  const specs = globs.map((g) => `:(glob)${g}`);
  await git.exec(['add', '-A']);
  const diff = await git.out(['diff', '--cached', '--name-only', '--no-renames', base, '--', ...specs]);
  const changed = diff === '' ? [] : diff.split('\n');
  if (changed.length > 0) await git.exec(['restore', `--source=${base}`, '--staged', '--worktree', '--', ...specs]);
  // Files the repository ignores are invisible to the diff, yet a grader may load them (a test
  // helper hidden by a .gitignore the agent wrote). Under protected paths they go before grading;
  // they do not void the score, since caches there (e.g. __pycache__) are ignored files too.
  await git.exec(['clean', '-fdX', '--', ...specs]);
  return changed;
}

/**
 * Commits everything in the workspace on top of what the agent left (its own commits included),
 * with the result in the message. If the agent moved HEAD off the episode's history, the commit
 * goes on the base instead, so the branch always descends from where the episode started.
 */
async function commitWorkspace(git: Git, branchRef: string, base: string, message: string): Promise<string> {
  await git.exec(['add', '-A']);
  const tree = await git.out(['write-tree']);
  const head = await git.revParse('HEAD');
  const parent = head && (await git.isAncestor(base, head)) ? head : base;
  const commit = (await git.exec(['commit-tree', tree, '-p', parent, '-F', '-'], { input: message })).stdout.trim();
  // The index already holds this tree, so pointing HEAD at the moved branch leaves a clean checkout.
  await git.exec(['update-ref', branchRef, commit]);
  await git.exec(['symbolic-ref', 'HEAD', branchRef]);
  return commit;
}
