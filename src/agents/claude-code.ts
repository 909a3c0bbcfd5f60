// The `claude-code` agent: Anthropic's Claude Code CLI (`claude`, @anthropic-ai/claude-code),
// one print-mode session per episode.
//
// The conversation lives in a config folder forkflush owns, `<context>/home` (CLAUDE_CONFIG_DIR),
// and `<context>/session.json` names it. A fresh episode (empty context folder) starts a new
// session with an id chosen here (`--session-id`); a carried or copied one resumes it
// (`--resume <id>`) with the continuation prompt as the next user message. Claude Code files a
// transcript under the project folder of the directory it ran in
// (`home/projects/<cwd with non-alphanumerics as '-'>/<id>.jsonl`), so before resuming in another
// worktree the transcript's project folder is renamed to the new directory's.
// Docs: https://docs.claude.com/en/docs/claude-code/cli-reference (flags),
// https://docs.claude.com/en/docs/claude-code/headless (print mode, output formats, resume),
// https://code.claude.com/docs/en/env-vars (CLAUDE_CONFIG_DIR, traffic and telemetry switches),
// https://code.claude.com/docs/en/permission-modes (acceptEdits). Output formats: claude-code-output.ts.
// (Over 400 lines: Claude Code's login, home and transcript handling are its own and belong together.)

import { randomUUID } from 'node:crypto';
import { lstat, mkdir, readdir, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../core/config.js';
import type { AgentUsage } from '../core/state.js';
import { failureLine, formatNumber } from '../core/text.js';
import { readRegular } from '../io/agent-files.js';
import type { RunResult } from '../io/process.js';
import type { AgentFactory, AgentOutcome, AgentSession } from './agent.js';
import {
  addTotals,
  assistantTotals,
  decideExit,
  episodeUsage,
  projectDirName,
  readCostState,
  readStream,
  saysNoConversation,
  type Totals,
  transcriptProblem,
} from './claude-code-output.js';
import { AGENT_CLIS } from './clis.js';
import {
  defineAgent,
  GrowingFile,
  hasLogin,
  installLogins,
  isRecord,
  jsonLines,
  type LoginFile,
  launch,
  openContext,
  readFrom,
  removeLogins,
} from './session.js';

/** Inside the context folder: Claude Code's config folder and the session record. */
const HOME = 'home';
const SESSION_FILE = 'session.json';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What `<context>/session.json` holds. */
export interface ClaudeSessionRecord {
  sessionId: string;
  /** The real path of the workspace the session last ran in. */
  cwd: string;
  /** The conversation's cumulative cost and tokens when the last episode ended, if known. */
  totals: Totals | null;
  /** The episode that last ran the session. */
  episode: string;
}

export const claudeCodeAgent: AgentFactory = (agent) => {
  const adapter = new ClaudeCodeAdapter(agent);
  return defineAgent({
    kind: 'claude-code',
    maxTurns: agent.max_turns,
    // Its key, endpoint and switches; Bedrock's and Vertex's credentials come through agent.env.
    passEnv: ['ANTHROPIC_*', 'CLAUDE_CODE_*', 'DISABLE_*', 'MAX_THINKING_TOKENS'],
    missingLogin: (env) =>
      usesKey(env) ||
      env.CLAUDE_CODE_USE_BEDROCK ||
      env.CLAUDE_CODE_USE_VERTEX ||
      env.CLAUDE_CODE_USE_FOUNDRY ||
      agent.args.some((a) => a.startsWith('--settings')) ||
      hasLogin(claudeLogin(''), process.env)
        ? null
        : 'Claude Code has no API key and no login: set ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN (from ' +
          '`claude setup-token`, for a Claude subscription), or log in with `claude` (forkflush copies ' +
          '~/.claude/.credentials.json into each episode), or put that file in CLAUDE_CREDENTIALS_JSON',
    run: (s) => adapter.run(s),
  });
};

class ClaudeCodeAdapter {
  constructor(private readonly agent: Config['agent']) {}

  async run(s: AgentSession): Promise<AgentOutcome> {
    const started = performance.now();
    const notes: string[] = [];
    const cwd = await realpath(s.workdir);
    let prepared = await prepareContext(s.contextDir, cwd, s.episodeId);
    if (prepared.note) notes.push(prepared.note);
    let attempt = await this.launch(s, cwd, prepared, s.deadlineMs);
    // Claude Code is the judge of whether it can resume: if it finds no such conversation after
    // all, it has not called the model yet, so start afresh rather than lose the episode.
    const early = attempt.facts.result;
    if (
      prepared.resume &&
      attempt.run.stopped === null &&
      (early === null || !early.turns) &&
      saysNoConversation(`${attempt.run.stderr}\n${early?.message ?? ''}`)
    ) {
      const why = `Claude Code found no conversation ${prepared.sessionId}`;
      prepared = await restartFresh(s.contextDir, cwd, s.episodeId, why);
      if (prepared.note) notes.push(prepared.note);
      const left = s.deadlineMs - (performance.now() - started);
      attempt = await this.launch(s, cwd, prepared, Math.max(1, left));
    }
    const { run, facts } = attempt;
    notes.push(...attempt.notes);

    // Usage: the totals after the episode minus those it started from (claude-code-output.ts).
    const appended = (await readTranscriptFrom(prepared.home, prepared.sessionId, cwd, prepared.transcriptBytes)) ?? '';
    let totalsAfter: Totals | null = null;
    let usage: AgentUsage | undefined;
    let spendKnown = true;
    if (facts.result?.totals) {
      totalsAfter = facts.result.totals;
    } else {
      const recorded = readCostState(appended);
      if (recorded) {
        totalsAfter = recorded;
        notes.push(
          'Claude Code ended without a result; its usage is the cost record it wrote as it stopped (a model call cut off by the stop is not in it)',
        );
      } else {
        const read = assistantTotals(appended);
        if (read.responses > 0) {
          totalsAfter = addTotals(prepared.baseline, read.totals);
          spendKnown = false;
          notes.push(
            `Claude Code ended without recording its cost; its tokens were read from the transcript (${read.responses} model responses)`,
          );
        }
      }
    }
    if (totalsAfter) usage = episodeUsage(prepared.baseline, totalsAfter, facts.result?.turns ?? null);

    // The totals Claude Code itself recorded (an estimate read from the transcript is not one).
    await writeRecord(s.contextDir, {
      sessionId: prepared.sessionId,
      cwd,
      totals: (spendKnown ? totalsAfter : null) ?? prepared.baseline,
      episode: s.episodeId,
    });

    const decided = decideExit({
      stopped: run.stopped,
      deadlineIsBudget: s.deadlineIsBudget,
      ...(run.spawnError ? { spawnError: run.spawnError } : {}),
      exitCode: run.exitCode,
      signal: run.signal,
      result: facts.result,
      stderrTail: failureLine(run.stderr),
    });
    if (decided.note) notes.unshift(decided.note);
    if (run.stopped === 'budget' && s.unit === 'tokens' && attempt.tokensSeen > s.allowance)
      notes.unshift(
        `stopped after ${attempt.tokensSeen} tokens, over its allowance of ${formatNumber(s.allowance, 6)}`,
      );

    let reportedSpend: number | null = null;
    if (s.unit === 'tokens' || s.unit === 'usd') {
      if (usage && spendKnown)
        reportedSpend = s.unit === 'tokens' ? usage.inputTokens + usage.outputTokens : usage.costUsd;
      else notes.push('the spend is unknown; charged the whole allowance');
    }
    if (!usage) notes.push('Claude Code reported no usage');
    return {
      exit: decided.exit,
      reportedSpend,
      ...(usage ? { usage } : {}),
      ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
      seconds: (performance.now() - started) / 1000,
    };
  }

  private async launch(
    s: AgentSession,
    cwd: string,
    prepared: Prepared,
    timeoutMs: number,
  ): Promise<{ run: RunResult; facts: ReturnType<typeof readStream>; tokensSeen: number; notes: string[] }> {
    const args = [
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      // Edits inside the workspace (its working directory) without asking, and shell commands:
      // the narrowest set that lets it change files and run the grader. Writes outside the
      // workspace, protected paths (.git, .claude) through the file tools, web and MCP tools still
      // need a permission that nobody is there to give, so print mode denies them.
      '--permission-mode',
      'acceptEdits',
      '--allowedTools',
      'Bash',
      ...(prepared.resume ? ['--resume', prepared.sessionId] : ['--session-id', prepared.sessionId]),
      ...(this.agent.model ? ['--model', this.agent.model] : []),
      ...(this.agent.max_turns ? ['--max-turns', String(this.agent.max_turns)] : []),
      ...(s.unit === 'usd' ? ['--max-budget-usd', String(Number(Math.max(0, s.allowance).toPrecision(12)))] : []),
      ...this.agent.args,
    ];
    // Claude Code has no token limit: with a token budget, the transcript read as it grows (only
    // the assistant rows' ids, models and usage are kept).
    let tokensSeen = 0;
    const transcript = new GrowingFile(
      () => transcriptPath(prepared.home, prepared.sessionId, cwd),
      prepared.transcriptBytes,
    );
    const rows: string[] = [];
    // A Claude subscription login (`claude` /login on Linux): its credentials file, when no key
    // or token is given (CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token` passes as is).
    const logins = usesKey(s.env) ? [] : await installLogins(claudeLogin(prepared.home), process.env);
    const { run, notes } = await launch(s, {
      after: () => removeLogins(logins),
      executable: this.agent.command ?? AGENT_CLIS['claude-code'].executable,
      args,
      cwd,
      env: {
        CLAUDE_CONFIG_DIR: prepared.home,
        // Nothing but model calls: no telemetry, error reports, update checks or other traffic.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
        DISABLE_AUTOUPDATER: '1',
      },
      // It would rename the project folder the transcript is filed under (see moveToProject).
      unset: ['CLAUDE_CODE_PROJECT_DIR_NAME'],
      // The prompt goes on stdin, which is then closed (`cat prompt | claude -p`): no limit on its
      // size (one argument is capped at 128 KiB on Linux) and no risk of it being read as a flag.
      input: s.prompt,
      timeoutMs,
      ...(s.unit === 'tokens'
        ? {
            meter: async () => {
              for (const line of await transcript.lines()) {
                const row = compactAssistantRow(line);
                if (row) rows.push(row);
              }
              if (transcript.path === null) return null;
              const models = Object.values(assistantTotals(rows.join('\n')).totals.models);
              tokensSeen = models.reduce(
                (n, m) => n + m.inputTokens + m.cacheReadInputTokens + m.cacheCreationInputTokens + m.outputTokens,
                0,
              );
              return { inputTokens: tokensSeen, outputTokens: 0, costUsd: null, turns: 0 };
            },
          }
        : {}),
    });
    return { run, facts: readStream(run.stdout), tokensSeen, notes };
  }
}

interface Prepared {
  home: string;
  sessionId: string;
  resume: boolean;
  /** The conversation's totals before this episode, as Claude Code will restore them. */
  baseline: Totals | null;
  /** The transcript's size before this episode (to read only what the episode appends). */
  transcriptBytes: number;
  note?: string;
}

/**
 * Gets the context folder ready: a new session when it is empty; otherwise the recorded session,
 * its transcript moved under the project folder of `cwd`. A context that cannot be resumed (no or
 * a broken session.json, a missing, empty or unreadable transcript) is cleared and the episode
 * starts a fresh conversation, with a note saying why (session.ts, openContext).
 */
async function prepareContext(contextDir: string, cwd: string, episode: string): Promise<Prepared> {
  await mkdir(contextDir, { recursive: true });
  const home = join(contextDir, HOME);
  const ctx = await openContext(contextDir, 'Claude Code', () => savedSession(contextDir, home));
  if (!ctx.carried) return startFresh(contextDir, cwd, episode, ctx.note);
  const { id, transcript, bytes } = ctx.carried;
  await moveToProject(home, id, transcript, cwd);
  const text = bytes.toString('utf8');
  // Claude Code restores the totals from the transcript's last cost record; without one it starts
  // from zero, whatever session.json says.
  return { home, sessionId: id, resume: true, baseline: readCostState(text), transcriptBytes: bytes.length };
}

/** The session the context folder names and its transcript, or why it cannot be resumed. */
async function savedSession(
  contextDir: string,
  home: string,
): Promise<{ id: string; transcript: string; bytes: Buffer } | { unusable: string }> {
  let record: ClaudeSessionRecord;
  const text = await readRegular(join(contextDir, SESSION_FILE));
  if (text === null) return { unusable: 'the context folder has no session.json' };
  try {
    record = JSON.parse(text) as ClaudeSessionRecord;
  } catch {
    return { unusable: 'the context folder has an unreadable session.json' };
  }
  if (typeof record.sessionId !== 'string' || !UUID.test(record.sessionId))
    return { unusable: `session.json names no valid session id (${String(record.sessionId)})` };
  const id = record.sessionId;
  const transcript = await findTranscript(home, id);
  if (!transcript) return { unusable: `the transcript of session ${id} is missing` };
  const bytes = await readFrom(transcript, 0);
  const problem = transcriptProblem(bytes.toString('utf8'));
  if (problem) return { unusable: `the transcript of session ${id} ${problem}` };
  return { id, transcript, bytes };
}

/** A new session in a clean config folder (`note`: why a carried one could not go on). */
async function startFresh(contextDir: string, cwd: string, episode: string, note?: string): Promise<Prepared> {
  const home = join(contextDir, HOME);
  await mkdir(home, { recursive: true });
  const sessionId = randomUUID();
  // Recorded before the run, so that a session stopped before its first result can still be resumed.
  await writeRecord(contextDir, { sessionId, cwd, totals: null, episode });
  return { home, sessionId, resume: false, baseline: null, transcriptBytes: 0, ...(note ? { note } : {}) };
}

/** Clears a context Claude Code itself could not resume and starts afresh, with the shared note. */
async function restartFresh(contextDir: string, cwd: string, episode: string, why: string): Promise<Prepared> {
  for (const entry of await readdir(contextDir)) await rm(join(contextDir, entry), { recursive: true, force: true });
  return startFresh(
    contextDir,
    cwd,
    episode,
    `could not resume the carried Claude Code conversation (${why}); started a fresh conversation`,
  );
}

/** The transcript `<id>.jsonl` in any project folder of the config folder. */
async function findTranscript(home: string, id: string): Promise<string | null> {
  const projects = join(home, 'projects');
  const dirs = await readdir(projects).catch(() => [] as string[]);
  for (const dir of dirs) {
    const file = join(projects, dir, `${id}.jsonl`);
    if (await isFile(file)) return file;
  }
  return null;
}

/**
 * Moves the session to the project folder Claude Code will look in for `cwd`: the whole project
 * folder (transcript, per-session files, auto-memory) when the new one does not exist yet,
 * otherwise the transcript and its per-session folder.
 */
async function moveToProject(home: string, id: string, transcript: string, cwd: string): Promise<void> {
  const from = join(transcript, '..');
  const to = join(home, 'projects', projectDirName(cwd));
  if (from === to) return;
  if (!(await exists(to))) {
    await rename(from, to);
    return;
  }
  for (const name of [`${id}.jsonl`, id]) {
    if (!(await exists(join(from, name)))) continue;
    await rm(join(to, name), { recursive: true, force: true });
    await rename(join(from, name), join(to, name));
  }
}

function usesKey(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.ANTHROPIC_API_KEY || env.ANTHROPIC_AUTH_TOKEN || env.CLAUDE_CODE_OAUTH_TOKEN);
}

/** Where Claude Code keeps a subscription login on Linux ($CLAUDE_CONFIG_DIR, else ~/.claude), and its secret form. */
export function claudeLogin(episodeHome: string, env = process.env): LoginFile[] {
  const home = env.CLAUDE_CONFIG_DIR || join(homedir(), '.claude');
  return [
    {
      from: join(home, '.credentials.json'),
      fromEnv: 'CLAUDE_CREDENTIALS_JSON',
      to: join(episodeHome, '.credentials.json'),
    },
  ];
}

/** The transcript's text from a byte offset on (at most MAX_AGENT_FILE_BYTES), or null when there is no transcript. */
async function readTranscriptFrom(home: string, id: string, cwd: string, offset: number): Promise<string | null> {
  const file = await transcriptPath(home, id, cwd);
  if (!file) return null;
  return (await readFrom(file, offset)).toString('utf8');
}

async function transcriptPath(home: string, id: string, cwd: string): Promise<string | null> {
  const expected = join(home, 'projects', projectDirName(cwd), `${id}.jsonl`);
  return (await isFile(expected)) ? expected : await findTranscript(home, id);
}

/** An assistant row cut down to what its usage needs (its id, model and usage), or null. */
function compactAssistantRow(line: string): string | null {
  if (!line.includes('"assistant"')) return null;
  for (const row of jsonLines(line)) {
    if (row.type !== 'assistant' || !isRecord(row.message)) return null;
    const { id, model, usage } = row.message;
    return JSON.stringify({ type: 'assistant', message: { id, model, usage } });
  }
  return null;
}

async function writeRecord(contextDir: string, record: ClaudeSessionRecord): Promise<void> {
  await writeFile(join(contextDir, SESSION_FILE), `${JSON.stringify(record, null, 2)}\n`);
}

async function isFile(path: string): Promise<boolean> {
  return lstat(path).then(
    (s) => s.isFile(),
    () => false,
  );
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
