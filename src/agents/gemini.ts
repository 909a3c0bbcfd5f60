// The `gemini` agent: Gemini CLI (@google/gemini-cli, checked with 0.61.0) in headless mode, one
// process per episode. Its facts, with sources: the CLI's docs, which ship in its package
// (bundle/docs/<page>.md) and are published at https://geminicli.com/docs/<page>, and its source,
// bundled in the package with comments naming the files of google-gemini/gemini-cli:
// - `gemini -p PROMPT -o json` runs one non-interactive session (docs/cli/headless.md);
//   `--approval-mode yolo` approves every tool call, edits and shell commands included
//   (docs/cli/cli-reference.md, "--approval-mode"; `--yolo` is its deprecated alias), and
//   `--skip-trust` trusts the workspace for this run, without which headless mode refuses an
//   untrusted folder (docs/cli/trusted-folders.md, "Headless and automated environments").
// - GEMINI_CLI_HOME is the root of its user-level state: settings, the project registry and the
//   sessions live in $GEMINI_CLI_HOME/.gemini (docs/reference/configuration.md, "Environment
//   variables"). forkflush points it at <contextDir>/home, so a fresh episode has no history and a
//   carried one exactly its own.
// - Sessions: <home>/.gemini/tmp/<slug>/chats/session-*.jsonl, where <slug> is the project's
//   short id: <home>/.gemini/projects.json maps the absolute working directory to it, checked
//   against the marker file tmp/<slug>/.project_root that names the directory (bundle source
//   packages/core/src/config/projectRegistry.ts). `--resume <id>` looks the id up in the current
//   directory's chats folder only (packages/cli/src/utils/sessionUtils.ts, SessionSelector), so to
//   resume in another folder the file is moved into a project dir registered for that folder.
//   `--session-id <uuid>` starts a new session with an id we choose (`gemini --help`;
//   packages/cli/src/gemini.tsx, resolveSessionId), so the id is known before the run, even when
//   the run is killed. The turn counter is per process (packages/cli/src/nonInteractiveCli.ts).
// - `model.maxSessionTurns` in settings.json bounds the model turns of one run; past it headless
//   mode exits with code 53 (docs/cli/session-management.md, "Session limits";
//   docs/cli/headless.md, "Exit codes"). There is no money bound: forkflush watches the session
//   file's token counts and stops an overrun itself.
// - `stats` in the result count this process only, and there is no cost (see gemini-output.ts).
// - Quiet offline: telemetry.enabled false (and GEMINI_TELEMETRY_ENABLED=false, which overrides
//   it), privacy.usageStatisticsEnabled false, general.enableAutoUpdate and
//   general.enableAutoUpdateNotification false, ide.enabled false (docs/reference/configuration.md;
//   docs/cli/telemetry.md). With GOOGLE_GEMINI_BASE_URL it sends model calls there
//   (docs/reference/configuration.md, GOOGLE_GEMINI_BASE_URL); seen under strace: no other
//   connection. general.sessionRetention.enabled false keeps old sessions from being cleaned up.

import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, realpath, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { failureLine, formatNumber } from '../core/text.js';
import { readRegular } from '../io/agent-files.js';
import type { AgentFactory, AgentOutcome, AgentSession } from './agent.js';
import { AGENT_CLIS } from './clis.js';
import {
  EXIT_TURN_LIMIT,
  type GeminiUsage,
  isResumable,
  parseResult,
  readSession,
  type SessionRecord,
  usageFromSessions,
  usageFromStats,
  writtenIds,
} from './gemini-output.js';
import { priceTokens } from './pricing.js';
import {
  defineAgent,
  hasLogin,
  type InstalledLogin,
  installLogins,
  type LoginFile,
  launch,
  MAX_AGENT_FILE_BYTES,
  openContext,
  removeLogins,
  spendOf,
  stopExit,
} from './session.js';

/** What forkflush keeps in the context folder besides the CLI's home. */
const SESSION_FILE = 'session.json';
const HOME = 'home';
/** How often the session file is read to stop a money or token overrun. */
const SPEND_POLL_MS = 1000;
/** Prompts longer than this go through stdin (an argv string is limited to 128 KiB on Linux). */
const MAX_ARGV_PROMPT = 100_000;

export const geminiAgent: AgentFactory = (agent) => {
  const executable = agent.command ?? AGENT_CLIS.gemini.executable;
  return defineAgent({
    kind: 'gemini',
    maxTurns: agent.max_turns,
    // Its key and endpoint (GEMINI_*), and Vertex AI's project, location and credentials (GOOGLE_*).
    passEnv: ['GEMINI_*', 'GOOGLE_*'],
    missingLogin: (env) =>
      usesKey(env) || hasLogin(geminiLogin(''), process.env)
        ? null
        : 'Gemini CLI has no API key and no login: set GEMINI_API_KEY, or log in with Google in `gemini` ' +
          '(forkflush copies ~/.gemini/oauth_creds.json into each episode), or put that file in GEMINI_OAUTH_CREDS, ' +
          'or use Vertex AI (GOOGLE_GENAI_USE_VERTEXAI=true)',
    run: (s) => runGemini(s, executable, agent.model, agent.args ?? [], agent.max_turns),
  });
};

async function runGemini(
  s: AgentSession,
  executable: string,
  model: string | undefined,
  extraArgs: string[],
  maxTurns: number | undefined,
): Promise<AgentOutcome> {
  const started = performance.now();
  const home = join(s.contextDir, HOME);
  const geminiDir = join(home, '.gemini');
  const notes: string[] = [];

  // Fresh or carried: what the context folder holds decides.
  const workdir = await realpath(s.workdir);
  const ctx = await openContext(s.contextDir, 'Gemini CLI', () => prepareResume(s.contextDir, geminiDir, workdir));
  if (ctx.note) notes.push(ctx.note);
  const sessionId = ctx.carried?.sessionId ?? randomUUID();
  const resume = ctx.carried !== null;
  const before = ctx.carried?.before ?? new Set<string>();
  // A Google login (Login with Google): its OAuth files, when no key and no Vertex AI is set.
  let logins: InstalledLogin[] = [];
  try {
    if (!usesKey(s.env)) logins = await installLogins(geminiLogin(geminiDir), process.env);
    await prepareHome(s, geminiDir, maxTurns, sessionId, logins.length > 0);
  } catch (e) {
    const note = `could not prepare the Gemini CLI home in ${home}: ${(e as Error).message}`;
    return { exit: 'crash', reportedSpend: 0, note, seconds: (performance.now() - started) / 1000 };
  }

  const viaStdin = Buffer.byteLength(s.prompt) > MAX_ARGV_PROMPT;
  const args = [
    ...(model ? ['--model', model] : []),
    ...(resume ? ['--resume', sessionId] : ['--session-id', sessionId]),
    '--skip-trust',
    '--approval-mode',
    'yolo',
    '--output-format',
    'json',
    ...extraArgs,
    // Headless mode puts stdin before the -p text: a long prompt goes there, with a blank -p.
    '--prompt',
    viaStdin ? ' ' : s.prompt,
  ];
  // No money or token bound in the CLI: what the session file says was spent, as the watcher reads it.
  const watched = s.unit === 'tokens' || s.unit === 'usd';
  const {
    run: r,
    overrun,
    notes: watchNotes,
  } = await launch(s, {
    executable,
    args,
    env: { GEMINI_CLI_HOME: home, GEMINI_TELEMETRY_ENABLED: 'false' },
    after: () => removeLogins(logins),
    input: viaStdin ? s.prompt : '',
    pollMs: SPEND_POLL_MS,
    ...(watched
      ? {
          meter: async () => {
            const u = usageFromSessions(await sessionRecords(geminiDir, sessionId), before);
            return { inputTokens: u.inputTokens, outputTokens: u.outputTokens, costUsd: price(u).costUsd, turns: 0 };
          },
        }
      : {}),
  });
  notes.push(...watchNotes);
  const seconds = r.ms / 1000;
  await writeSessionFile(s.contextDir, sessionId).catch(() => {});

  const result = parseResult(r.stdout) ?? parseResult(r.stderr);
  const exit =
    stopExit(r, s.deadlineIsBudget) ??
    (r.spawnError ? 'crash' : r.exitCode === EXIT_TURN_LIMIT ? 'budget' : r.exitCode === 0 ? 'finished' : 'crash');
  if (r.stopped === 'budget' && overrun)
    notes.push(`stopped: it spent more than its ${formatNumber(s.allowance, 6)} ${s.unit}`);
  if (r.stopped === null && r.exitCode === EXIT_TURN_LIMIT) notes.push(`stopped at agent.max_turns (${maxTurns})`);
  if (exit === 'crash' && r.stopped === null) {
    const why = r.spawnError ?? result?.error?.message ?? failureLine(r.stderr);
    notes.push(`gemini exited with ${r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`}${why ? `: ${why}` : ''}`);
  }
  if (r.spawnError) {
    // It never started: nothing was spent.
    return { exit, reportedSpend: 0, note: notes.join('; '), seconds };
  }

  let usage: GeminiUsage | null = result?.stats !== undefined ? usageFromStats(result.stats) : null;
  if (!usage) {
    // No result (killed, or a fatal error): what the session file recorded. The CLI creates it
    // before its first model call, so without one nothing was spent.
    const sessions = await sessionRecords(geminiDir, sessionId);
    usage = usageFromSessions(sessions, before);
    notes.push(
      sessions.length > 0
        ? "usage read from the session file: the agent loop's model calls only, without the CLI's helper calls"
        : 'gemini recorded no conversation: it stopped before its first model call',
    );
  }
  const priced = price(usage);
  const own = { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, costUsd: priced.costUsd };
  return {
    exit,
    reportedSpend: spendOf(s, own),
    usage: {
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      costUsd: priced.costUsd,
      turns: usage.turns,
      pricedFrom: priced.pricedFrom,
    },
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
    seconds,
  };
}

function usesKey(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.GEMINI_API_KEY || env.GOOGLE_API_KEY || env.GOOGLE_GENAI_USE_VERTEXAI === 'true');
}

/**
 * Where Login with Google leaves its OAuth files ($GEMINI_CLI_HOME, else ~, then .gemini/), and
 * the secret form of the credentials. The CLI reads them there unless told to keep them encrypted.
 */
export function geminiLogin(episodeGeminiDir: string, env = process.env): LoginFile[] {
  const dir = join(env.GEMINI_CLI_HOME || homedir(), '.gemini');
  return [
    {
      from: join(dir, 'oauth_creds.json'),
      fromEnv: 'GEMINI_OAUTH_CREDS',
      to: join(episodeGeminiDir, 'oauth_creds.json'),
    },
    { from: join(dir, 'google_accounts.json'), to: join(episodeGeminiDir, 'google_accounts.json') },
  ];
}

/** Readies <contextDir>/home for this run: the settings, and the session id recorded before the CLI starts. */
async function prepareHome(
  s: AgentSession,
  geminiDir: string,
  maxTurns: number | undefined,
  sessionId: string,
  loggedIn: boolean,
) {
  await mkdir(geminiDir, { recursive: true });
  const auth = loggedIn
    ? 'oauth-personal'
    : s.env.GOOGLE_GENAI_USE_VERTEXAI === 'true'
      ? 'vertex-ai'
      : 'gemini-api-key';
  await writeFile(join(geminiDir, 'settings.json'), `${JSON.stringify(settings(auth, maxTurns), null, 2)}\n`);
  // A lock left by a killed run would make the next one wait for it to go stale.
  await rm(join(geminiDir, 'projects.json.lock'), { recursive: true, force: true });
  await writeSessionFile(s.contextDir, sessionId);
}

/** The settings file forkflush owns in the CLI's home (rewritten before every run). */
function settings(selectedType: string, maxTurns: number | undefined): Record<string, unknown> {
  return {
    // With GOOGLE_GEMINI_BASE_URL set the CLI would guess the "gateway" auth type, which headless
    // mode rejects; the API key, Vertex AI or the copied login is what forkflush runs it with.
    security: { auth: { selectedType } },
    model: { maxSessionTurns: maxTurns ?? -1 },
    general: {
      enableAutoUpdate: false,
      enableAutoUpdateNotification: false,
      sessionRetention: { enabled: false },
    },
    telemetry: { enabled: false, logPrompts: false },
    privacy: { usageStatisticsEnabled: false },
    ide: { enabled: false },
  };
}

/** A conversation to resume: its id, and the ids of the messages written before this episode. */
type Carried = { sessionId: string; before: Set<string> };

/**
 * Finds the conversation the context folder holds and moves it where `--resume` looks for it
 * when the CLI runs in `workdir`; or says why it cannot be resumed (an unknown or unreadable
 * session, or one that never got a prompt because the CLI was stopped while starting).
 */
async function prepareResume(
  contextDir: string,
  geminiDir: string,
  workdir: string,
): Promise<Carried | { unusable: string }> {
  let recorded: unknown;
  try {
    recorded = JSON.parse((await readRegular(join(contextDir, SESSION_FILE))) ?? '');
  } catch {
    return { unusable: `the context folder has no readable ${SESSION_FILE}` };
  }
  const sessionId = (recorded as { sessionId?: unknown } | null)?.sessionId;
  if (typeof sessionId !== 'string' || !/^[A-Za-z0-9_-]+$/.test(sessionId)) {
    return { unusable: `${SESSION_FILE} names no valid session id` };
  }
  const files = await sessionFiles(geminiDir, sessionId);
  if (files.length === 0)
    return { unusable: `session ${sessionId} is not in the context folder (no session file under home/.gemini/tmp)` };
  // Resuming across a minute boundary leaves a stub file with the same id: keep the real one.
  const best = files.reduce((a, b) => (b.record.messages.length > a.record.messages.length ? b : a));
  if (best.record.sessionId !== sessionId) return { unusable: `the session file of ${sessionId} is unreadable` };
  if (!isResumable(best.record.messages)) return { unusable: `conversation ${sessionId} held no prompt yet` };
  const before = writtenIds(files.map((f) => f.record));
  const chats = join(geminiDir, 'tmp', await projectSlug(geminiDir, workdir), 'chats');
  await mkdir(chats, { recursive: true });
  for (const f of files) {
    if (f === best) {
      if (dirname(f.path) !== chats) await rename(f.path, join(chats, basename(f.path)));
    } else if (!isResumable(f.record.messages)) {
      await rm(f.path, { force: true });
    }
  }
  return { sessionId, before };
}

/**
 * The project slug the CLI will use for `workdir` in this home: the one projects.json maps it to
 * when its markers agree, else a new one, registered and marked the way the CLI does it.
 */
async function projectSlug(geminiDir: string, workdir: string): Promise<string> {
  const registryPath = join(geminiDir, 'projects.json');
  let projects: Record<string, string> = {};
  try {
    const parsed = JSON.parse(await readFile(registryPath, 'utf8')) as { projects?: unknown };
    if (parsed.projects && typeof parsed.projects === 'object') projects = parsed.projects as Record<string, string>;
  } catch {}
  const bases = [join(geminiDir, 'tmp'), join(geminiDir, 'history')];
  const owner = async (base: string, slug: string) =>
    (await readFile(join(base, slug, '.project_root'), 'utf8').catch(() => undefined))?.trim();
  const known = projects[workdir];
  if (known && /^[a-z0-9-]+$/.test(known)) {
    const owners = await Promise.all(bases.map((b) => owner(b, known)));
    if (owners.every((o) => o === undefined || o === workdir)) return known;
  }
  const taken = new Set(Object.values(projects));
  const base = `ff-${slugify(basename(workdir))}`;
  let slug = base;
  for (let n = 1; ; n++) {
    if (!taken.has(slug) && !bases.some((b) => existsSync(join(b, slug)))) break;
    slug = `${base}-${n}`;
  }
  await mkdir(join(bases[0] as string, slug), { recursive: true });
  await writeFile(join(bases[0] as string, slug, '.project_root'), workdir);
  projects[workdir] = slug;
  const tmp = `${registryPath}.${randomUUID()}.tmp`;
  await writeFile(tmp, JSON.stringify({ projects }, null, 2));
  await rename(tmp, registryPath);
  return slug;
}

function slugify(text: string): string {
  return (
    text
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '-')
      .replace(/-+/g, '-')
      .replace(/^-|-$/g, '') || 'project'
  );
}

/** Every session file of `sessionId` in the home, read. */
async function sessionFiles(geminiDir: string, sessionId: string): Promise<{ path: string; record: SessionRecord }[]> {
  const tmp = join(geminiDir, 'tmp');
  const slugs = await readdir(tmp).catch(() => [] as string[]);
  const found: { path: string; record: SessionRecord }[] = [];
  for (const slug of slugs) {
    const chats = join(tmp, slug, 'chats');
    const names = await readdir(chats).catch(() => [] as string[]);
    for (const name of names) {
      // session-<time>-<first 8 characters of the id>.jsonl (chatRecordingService.ts)
      if (!name.startsWith('session-') || !name.endsWith(`-${sessionId.slice(0, 8)}.jsonl`)) continue;
      const path = join(chats, name);
      const text = await readRegular(path, MAX_AGENT_FILE_BYTES);
      if (text === null) continue;
      const record = readSession(text);
      if (record.sessionId === sessionId || record.sessionId === null) found.push({ path, record });
    }
  }
  return found;
}

async function sessionRecords(geminiDir: string, sessionId: string): Promise<SessionRecord[]> {
  return (await sessionFiles(geminiDir, sessionId)).map((f) => f.record).filter((r) => r.sessionId === sessionId);
}

async function writeSessionFile(contextDir: string, sessionId: string): Promise<void> {
  const record = { agent: 'gemini', sessionId, updated: new Date().toISOString() };
  await writeFile(join(contextDir, SESSION_FILE), `${JSON.stringify(record, null, 2)}\n`);
}

/** Dollars at forkflush's prices, model by model (the CLI reports no cost). */
function price(usage: GeminiUsage): { costUsd: number; pricedFrom: string } {
  let costUsd = 0;
  const from = new Set<string>();
  for (const m of usage.perModel) {
    const p = priceTokens(m.model, { input: m.inputTokens, cachedInput: m.cachedInputTokens, output: m.outputTokens });
    costUsd += p.costUsd;
    from.add(p.pricedFrom);
  }
  return { costUsd, pricedFrom: from.size > 0 ? [...from].join('; ') : 'no model calls' };
}
