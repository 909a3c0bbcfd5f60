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
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Config } from '../core/config.js';
import type { AgentUsage } from '../core/state.js';
import { failureLine } from '../core/text.js';
import { readRegular } from '../io/agent-files.js';
import type { AgentAdapter, AgentFactory, AgentOutcome, AgentSession } from './agent.js';
import { AGENT_CLIS } from './clis.js';
import {
  addTotals,
  type CopilotTotals,
  creditsForUsd,
  episodeUsage,
  eventsFileProblem,
  NANO_AIU_PER_CREDIT,
  parseJsonOutput,
  parseUsageFile,
  readSavedTotals,
  subtractTotals,
  summarizeEvents,
} from './copilot-output.js';
import {
  defineAgent,
  GrowingFile,
  jsonLines,
  launch,
  MAX_AGENT_FILE_BYTES,
  openContext,
  readFrom,
  sizeOf,
  spendOf,
  stopExit,
} from './session.js';

/** What forkflush keeps in the context folder: the CLI's home and this record. */
const HOME_DIR = 'home';
const SESSION_FILE = 'session.json';
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
  return defineAgent({
    kind: 'copilot',
    maxTurns: agent.max_turns,
    passEnv: PASS_ENV,
    missingLogin: (env) =>
      env.COPILOT_GITHUB_TOKEN || env.COPILOT_PROVIDER_BASE_URL
        ? null
        : 'Copilot CLI has no login: set COPILOT_GITHUB_TOKEN (a fine-grained personal access token with the ' +
          '"Copilot Requests" permission), or COPILOT_PROVIDER_BASE_URL for a model provider of your own. ' +
          "GH_TOKEN and GITHUB_TOKEN never reach an agent (they are forge credentials), nor does `copilot login`'s own",
    run: (s) => runCopilot(agent, s),
  });
}

async function runCopilot(agent: Config['agent'], s: AgentSession): Promise<AgentOutcome> {
  const notes: string[] = [];
  await mkdir(s.contextDir, { recursive: true });
  const ctx = await openContext(s.contextDir, 'Copilot', (entries) => savedSession(s.contextDir, entries));
  if (ctx.note) notes.push(ctx.note);
  const saved = ctx.carried;
  const home = join(s.contextDir, HOME_DIR);
  await mkdir(home, { recursive: true });
  const sessionId = saved?.sessionId ?? randomUUID();
  const eventsFile = join(home, 'session-state', sessionId, 'events.jsonl');
  const startOffset = saved ? await sizeOf(eventsFile) : 0;
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
    saved ? `--resume=${sessionId}` : `--session-id=${sessionId}`,
    ...(agent.model ? ['--model', agent.model] : []),
    ...(credits !== undefined ? ['--max-ai-credits', String(credits)] : []),
    ...agent.args,
  ];

  // Bounds the CLI does not enforce (turns always; tokens and dollars in bring-your-own-key mode,
  // and a finer dollar bound than 30 credits): the session's events, read as they are appended.
  const events = new GrowingFile(eventsFile, startOffset);
  const seen: Record<string, unknown>[] = [];
  const {
    run: r,
    overrun,
    notes: watchNotes,
  } = await launch(s, {
    executable: agent.command ?? AGENT_CLIS.copilot.executable,
    args,
    env: { COPILOT_HOME: home },
    ...(viaStdin ? { input: s.prompt } : {}),
    maxTurns: agent.max_turns,
    meter: async () => {
      for (const line of await events.lines()) seen.push(...jsonLines(line));
      const { turns, totals } = summarizeEvents(seen);
      const u = episodeUsage(totals);
      return { ...u, turns };
    },
  });
  notes.push(...watchNotes);

  // This episode's usage: the CLI's cumulative figures less what the conversation had before.
  const previous = saved?.totals ?? null;
  let delta: CopilotTotals | null = null;
  let cumulative: CopilotTotals | null = null;
  const usageText = await readRegular(usageOut, 4_000_000);
  if (usageText !== null) {
    try {
      cumulative = parseUsageFile(usageText);
      const own = subtractTotals(cumulative, previous);
      delta = own.delta;
      if (own.note) notes.push(own.note);
    } catch (e) {
      notes.push(`${(e as Error).message}; usage counted from the session's events`);
    }
  }
  const eventsExist = (await sizeOf(eventsFile)) > 0;
  if (!delta && eventsExist) {
    const all = [...jsonLines((await readFrom(eventsFile, startOffset)).toString('utf8'))];
    delta = summarizeEvents(all).totals;
    cumulative = addTotals(previous, delta);
    if (usageText === null) notes.push("Copilot wrote no usage file; usage counted from the session's events");
  }

  const facts = parseJsonOutput(r.stdout);
  const creditsHit = credits !== undefined && delta !== null && delta.nanoAiu / NANO_AIU_PER_CREDIT >= credits;
  const exit =
    stopExit(r, s.deadlineIsBudget) ??
    (creditsHit ? 'budget' : r.spawnError || r.exitCode !== 0 ? 'crash' : 'finished');
  if (r.stopped === 'budget' && overrun) notes.push(`stopped because ${overrun}`);
  if (creditsHit && r.stopped === null) notes.push(`stopped by --max-ai-credits ${credits}`);
  if (exit === 'crash' && r.stopped === null) {
    const why = r.spawnError ?? facts.errors.at(-1) ?? (failureLine(r.stderr) || `exit code ${r.exitCode}`);
    notes.push(`copilot exited with ${r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`}: ${why.slice(0, 300)}`);
  }

  if (eventsExist) {
    const record: SavedSession = {
      agent: 'copilot',
      sessionId,
      totals: cumulative,
      episodes: [...(saved?.episodes ?? []), s.episodeId],
    };
    await writeFile(join(s.contextDir, SESSION_FILE), `${JSON.stringify(record, null, 2)}\n`);
  }

  let usage: AgentUsage | undefined;
  let reportedSpend: number | null = null;
  if (delta) {
    usage = episodeUsage(delta);
    reportedSpend = spendOf(s, usage);
  } else if (!eventsExist) {
    // The CLI writes events.jsonl when the session starts, before any model call: none, no spend.
    usage = { inputTokens: 0, outputTokens: 0, costUsd: 0, turns: 0 };
    reportedSpend = spendOf(s, usage);
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

/** The session the context folder holds, or why it cannot be resumed (unknown session, corrupt events). */
async function savedSession(contextDir: string, entries: string[]): Promise<SavedSession | { unusable: string }> {
  if (!entries.includes(SESSION_FILE)) return { unusable: `${SESSION_FILE} is missing` };
  let raw: unknown;
  try {
    raw = JSON.parse((await readRegular(join(contextDir, SESSION_FILE))) ?? '');
  } catch {
    return { unusable: `${SESSION_FILE} is not JSON` };
  }
  const v = raw as Partial<SavedSession> | null;
  if (!v || typeof v.sessionId !== 'string' || !SESSION_ID.test(v.sessionId))
    return { unusable: `${SESSION_FILE} names no session id` };
  const events = await readRegular(
    join(contextDir, HOME_DIR, 'session-state', v.sessionId, 'events.jsonl'),
    MAX_AGENT_FILE_BYTES,
  );
  if (events === null) return { unusable: `session ${v.sessionId} is unknown: its events.jsonl is missing` };
  const bad = eventsFileProblem(events, v.sessionId);
  if (bad) return { unusable: `session ${v.sessionId} is corrupt: ${bad}` };
  return {
    agent: 'copilot',
    sessionId: v.sessionId,
    totals: readSavedTotals(v.totals),
    episodes: Array.isArray(v.episodes) ? v.episodes.filter((e): e is string => typeof e === 'string') : [],
  };
}
