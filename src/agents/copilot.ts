// The `copilot` agent: GitHub Copilot CLI (@github/copilot, pinned 1.0.102 in
// scripts/install-agent-clis.mjs), one non-interactive session per episode.
//
// The CLI facts this builds on (`copilot --help`, `copilot help environment|providers|limits` of
// 1.0.102, and the CLI's own behaviour recorded in test/fixtures/agents/copilot/):
// - `copilot --prompt=<text> --allow-all-tools` runs one prompt non-interactively and exits (a
//   prompt piped to stdin instead works the same: `--fleet` "combine with -i, -p, or piped
//   stdin"); --allow-all-tools ("required for non-interactive mode") lets it edit files and run
//   shell commands without asking.
// - COPILOT_HOME "override[s] the directory where configuration and state files are stored"; a
//   session lives in $COPILOT_HOME/session-state/<id>/ (events.jsonl + workspace.yaml with the cwd
//   it was recorded in).
// - `--session-id=<uuid>` sets the id of a new session; `--resume=<id>` resumes one; `-C <dir>`
//   changes the working directory, so a session recorded in another worktree works in this one.
// - `--usage-output-file <file>` writes cumulative session usage on exit (also on SIGTERM).
// - `--max-ai-credits <n>` caps AI credits (minimum 30, soft); only GitHub-hosted models use
//   credits. In bring-your-own-key mode (COPILOT_PROVIDER_BASE_URL) the CLI has no money or turn
//   bound at all, so forkflush watches events.jsonl and stops the session itself.
// - The CLI logs in with COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN; it only ever gets the
//   first (the worker's environment has no GitHub tokens, and they are removed here again).
import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Config } from '../core/config.js';
import type { AgentUsage } from '../core/state.js';
import {
  type AgentAdapter,
  type AgentFactory,
  type AgentOutcome,
  type AgentSession,
  forkflushVars,
  overrunReason,
  stopExit,
} from './agent.js';
import {
  addTotals,
  type CopilotTotals,
  creditsForUsd,
  episodeUsage,
  eventsFileProblem,
  NANO_AIU_PER_CREDIT,
  parseJsonLines,
  parseJsonOutput,
  parseUsageFile,
  readSavedTotals,
  subtractTotals,
  summarizeEvents,
} from './copilot-output.js';

/** What forkflush keeps in the context folder: the CLI's home and this record. */
const HOME_DIR = 'home';
const SESSION_FILE = 'session.json';
const WATCH_MS = 250;
/** Longer prompts go through stdin: one argument may not exceed 128 KiB on Linux (MAX_ARG_STRLEN). */
const MAX_PROMPT_ARG = 100_000;
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/**
 * Its own login (COPILOT_GITHUB_TOKEN) and bring-your-own-key providers (COPILOT_PROVIDER_*). Never
 * GITHUB_TOKEN or GH_TOKEN, which it would otherwise log in with: the allowlist has neither.
 */
const PASS_ENV = ['COPILOT_*'];

interface SavedSession {
  agent: 'copilot';
  sessionId: string;
  /** Cumulative usage of the session when the last episode ended. */
  totals: CopilotTotals | null;
  /** The episodes that ran in this conversation, oldest first. */
  episodes: string[];
}

export const copilotAgent: AgentFactory = (agent) => copilotAdapter(agent);

export function copilotAdapter(agent: Config['agent']): AgentAdapter {
  return { kind: 'copilot', passEnv: PASS_ENV, run: (s) => runCopilot(agent, s) };
}

async function runCopilot(agent: Config['agent'], s: AgentSession): Promise<AgentOutcome> {
  const notes: string[] = [];
  await mkdir(s.contextDir, { recursive: true });
  const ctx = await openContext(s.contextDir);
  if (ctx.note) notes.push(ctx.note);
  const home = join(s.contextDir, HOME_DIR);
  await mkdir(home, { recursive: true });
  const sessionId = ctx.saved?.sessionId ?? randomUUID();
  const eventsFile = join(home, 'session-state', sessionId, 'events.jsonl');
  const startOffset = ctx.saved ? await sizeOf(eventsFile) : 0;
  const usageOut = join(dirname(s.usageFile), 'copilot-usage.json');
  await rm(usageOut, { force: true });

  const byok = Boolean(s.env.COPILOT_PROVIDER_BASE_URL);
  const credits = !byok && s.unit === 'usd' ? creditsForUsd(s.allowance) : undefined;
  // `--prompt=` (not `-p <text>`) so that a prompt starting with "-" is not taken for an option.
  const viaStdin = Buffer.byteLength(s.prompt) > MAX_PROMPT_ARG;
  const args = [
    ...(viaStdin ? [] : [`--prompt=${s.prompt}`]),
    '--allow-all-tools',
    '--no-ask-user',
    '--no-auto-update',
    '--output-format',
    'json',
    '--usage-output-file',
    usageOut,
    // The CLI's own logs go with the episode's other logs, not into the context carried onward.
    '--log-dir',
    join(dirname(s.logFile), 'copilot-logs'),
    '-C',
    s.workdir,
    ctx.saved ? `--resume=${sessionId}` : `--session-id=${sessionId}`,
    ...(agent.model ? ['--model', agent.model] : []),
    ...(credits !== undefined ? ['--max-ai-credits', String(credits)] : []),
    ...agent.args,
  ];

  // Bounds the CLI does not enforce (turns always; tokens and dollars in bring-your-own-key mode,
  // and a finer dollar bound than 30 credits): watch the session's events and stop the session.
  const overrun = new AbortController();
  let overrunWhy: string | undefined;
  const watcher = new EventsWatcher(eventsFile, startOffset);
  let checking = false;
  const check = async () => {
    if (checking) return;
    checking = true;
    let events: Record<string, unknown>[];
    try {
      events = await watcher.poll();
    } finally {
      checking = false;
    }
    const { turns, totals } = summarizeEvents(events);
    const usage = episodeUsage(totals);
    const why = overrunReason(s, usage, turns, agent.max_turns);
    if (why && !overrun.signal.aborted) {
      overrunWhy = why;
      overrun.abort('budget');
    }
  };
  const timer = setInterval(() => void check().catch(() => {}), WATCH_MS);

  const r = await s.spawn(agent.command ?? 'copilot', args, {
    cwd: s.workdir,
    env: copilotEnv(s, home),
    ...(viaStdin ? { input: s.prompt } : {}),
    timeoutMs: s.deadlineMs,
    signal: AbortSignal.any([s.signal, overrun.signal]),
    logFile: s.logFile,
  });
  clearInterval(timer);

  // This episode's usage: the CLI's cumulative figures less what the conversation had before.
  const previous = ctx.saved?.totals ?? null;
  let delta: CopilotTotals | null = null;
  let cumulative: CopilotTotals | null = null;
  const usageText = await readFile(usageOut, 'utf8').catch(() => undefined);
  if (usageText !== undefined) {
    try {
      cumulative = parseUsageFile(usageText);
      delta = subtractTotals(cumulative, previous);
    } catch (e) {
      notes.push(`${(e as Error).message}; usage counted from the session's events`);
    }
  }
  const eventsExist = (await sizeOf(eventsFile)) > 0;
  if (!delta && eventsExist) {
    const events = parseJsonLines(`${(await readFrom(eventsFile, startOffset)).toString('utf8')}\n`).events;
    delta = summarizeEvents(events).totals;
    cumulative = addTotals(previous, delta);
    if (usageText === undefined) notes.push("Copilot wrote no usage file; usage counted from the session's events");
  }

  const facts = parseJsonOutput(r.stdout);
  const creditsHit = credits !== undefined && delta !== null && delta.nanoAiu / NANO_AIU_PER_CREDIT >= credits;
  const exit =
    stopExit(r, s.deadlineIsBudget) ??
    (creditsHit ? 'budget' : r.spawnError || r.exitCode !== 0 ? 'crash' : 'finished');
  if (r.stopped === 'budget' && overrunWhy) notes.push(`stopped because ${overrunWhy}`);
  if (creditsHit && r.stopped === null) notes.push(`stopped by --max-ai-credits ${credits}`);
  if (exit === 'crash' && r.stopped === null) {
    const why = r.spawnError ?? facts.errors.at(-1) ?? lastLine(r.stderr) ?? `exit code ${r.exitCode}`;
    notes.push(`copilot exited with ${r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`}: ${why.slice(0, 300)}`);
  }

  if (eventsExist) {
    const saved: SavedSession = {
      agent: 'copilot',
      sessionId,
      totals: cumulative,
      episodes: [...(ctx.saved?.episodes ?? []), s.episodeId],
    };
    await writeFile(join(s.contextDir, SESSION_FILE), `${JSON.stringify(saved, null, 2)}\n`);
  }

  let usage: AgentUsage | undefined;
  let reportedSpend: number | null = null;
  if (delta) {
    usage = episodeUsage(delta);
    reportedSpend =
      s.unit === 'tokens' ? usage.inputTokens + usage.outputTokens : s.unit === 'usd' ? usage.costUsd : null;
  } else if (!eventsExist) {
    // The CLI writes events.jsonl when the session starts, before any model call: none, no spend.
    usage = { inputTokens: 0, outputTokens: 0, costUsd: 0, turns: 0 };
    reportedSpend = s.unit === 'tokens' || s.unit === 'usd' ? 0 : null;
    notes.push('Copilot started no session, so it made no model call');
  } else {
    notes.push('the usage of this episode could not be read');
  }
  return {
    exit,
    reportedSpend,
    ...(usage ? { usage } : {}),
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
    seconds: r.ms / 1000,
  };
}

/** The environment: the worker's, forkflush's variables (as for command agents), the CLI's home. */
function copilotEnv(s: AgentSession, home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...s.env,
    ...forkflushVars(s),
    COPILOT_HOME: home,
  };
  return env;
}

interface OpenedContext {
  /** The conversation to resume; null for a fresh one. */
  saved: SavedSession | null;
  note?: string;
}

/**
 * Reads the context folder: empty means fresh; otherwise it must hold the session this adapter
 * recorded. A context that cannot be resumed (unknown session, corrupt events) is cleared and the
 * episode starts a fresh conversation, with a note saying why: the episode still does useful work,
 * its record says it started fresh, and the lineage's later carries continue from a sound
 * conversation instead of failing the same way again and again.
 */
async function openContext(contextDir: string): Promise<OpenedContext> {
  const entries = await readdir(contextDir);
  if (entries.length === 0) return { saved: null };
  const problem = await contextProblem(contextDir, entries);
  if (problem.saved) return { saved: problem.saved };
  for (const e of entries) await rm(join(contextDir, e), { recursive: true, force: true });
  return {
    saved: null,
    note: `could not resume the carried Copilot session (${problem.why}); started a fresh conversation`,
  };
}

async function contextProblem(
  contextDir: string,
  entries: string[],
): Promise<{ saved: SavedSession; why?: undefined } | { saved?: undefined; why: string }> {
  if (!entries.includes(SESSION_FILE)) return { why: `${SESSION_FILE} is missing` };
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(contextDir, SESSION_FILE), 'utf8'));
  } catch {
    return { why: `${SESSION_FILE} is not JSON` };
  }
  const v = raw as Partial<SavedSession> | null;
  if (!v || typeof v.sessionId !== 'string' || !SESSION_ID.test(v.sessionId))
    return { why: `${SESSION_FILE} names no session id` };
  const events = join(contextDir, HOME_DIR, 'session-state', v.sessionId, 'events.jsonl');
  let text: string;
  try {
    text = await readFile(events, 'utf8');
  } catch {
    return { why: `session ${v.sessionId} is unknown: its events.jsonl is missing` };
  }
  const bad = eventsFileProblem(text, v.sessionId);
  if (bad) return { why: `session ${v.sessionId} is corrupt: ${bad}` };
  return {
    saved: {
      agent: 'copilot',
      sessionId: v.sessionId,
      totals: readSavedTotals(v.totals),
      episodes: Array.isArray(v.episodes) ? v.episodes.filter((e): e is string => typeof e === 'string') : [],
    },
  };
}

/** Reads what an append-only JSONL file gained since the last poll (whole lines only). */
class EventsWatcher {
  private rest = Buffer.alloc(0);
  private readonly seen: Record<string, unknown>[] = [];
  constructor(
    private readonly file: string,
    private offset: number,
  ) {}

  /** All events appended since the start, so far. */
  async poll(): Promise<Record<string, unknown>[]> {
    const chunk = await readFrom(this.file, this.offset);
    if (chunk.length > 0) {
      this.offset += chunk.length;
      const all = Buffer.concat([this.rest, chunk]);
      const end = all.lastIndexOf(0x0a);
      this.rest = end < 0 ? all : all.subarray(end + 1);
      if (end >= 0) this.seen.push(...parseJsonLines(all.subarray(0, end + 1).toString('utf8')).events);
    }
    return this.seen;
  }
}

async function readFrom(file: string, offset: number): Promise<Buffer> {
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  try {
    fh = await open(file, 'r');
    const { size } = await fh.stat();
    if (size <= offset) return Buffer.alloc(0);
    const buf = Buffer.alloc(size - offset);
    const { bytesRead } = await fh.read(buf, 0, buf.length, offset);
    return buf.subarray(0, bytesRead);
  } catch {
    return Buffer.alloc(0);
  } finally {
    await fh?.close();
  }
}

async function sizeOf(file: string): Promise<number> {
  return stat(file).then(
    (st) => st.size,
    () => 0,
  );
}

function lastLine(stderr: string): string | undefined {
  return stderr.trim().split('\n').at(-1)?.trim() || undefined;
}
