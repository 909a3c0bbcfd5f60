// The `codex` agent: OpenAI's Codex CLI (`@openai/codex`, checked with 0.171.0), one
// `codex exec --json` session per episode.
//
// The context folder holds the conversation:
//   <contextDir>/home/          CODEX_HOME for the session: forkflush's config.toml and Codex's
//                               sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl
//   <contextDir>/session.json   forkflush's record: the thread id and its running token totals
// A fresh episode starts with an empty folder, so Codex sees no earlier session at all. A carried
// (or copied) episode resumes the thread with `codex exec resume <id>`, in the episode's workspace,
// whichever folder the thread was recorded in. Codex also keeps SQLite indexes in its home that
// name the rollout by absolute path: in a copied context they point at the ORIGINAL folder (seen
// with 0.171.0: a resume appended to the parent's rollout). So the home is cut back to config.toml
// and sessions/ before a resume and after every session; Codex rebuilds the rest from the rollout.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { readRegular } from '../io/agent-files.js';
import type { AgentFactory, AgentOutcome, AgentSession } from './agent.js';
import { AGENT_CLIS } from './clis.js';
import {
  addRolloutLine,
  type Bounds,
  emptyRollout,
  failureLine,
  overBounds,
  parseExecEvents,
  parseSessionRecord,
  type RolloutSummary,
  rolloutProblem,
  rolloutThreadId,
  sessionRecordJson,
  usageAndSpend,
} from './codex-output.js';
import {
  defineAgent,
  GrowingFile,
  hasLogin,
  installLogins,
  type LoginFile,
  launch,
  openContext,
  ownShare,
  readFrom,
  removeLogins,
  stopExit,
} from './session.js';

const HOME = 'home';
const RECORD = 'session.json';
/** What a Codex home keeps between episodes; everything else is Codex's derived state. */
const KEPT = new Set(['sessions', 'config.toml']);
const ZERO = { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };
const FIRST_LINE_MAX = 4 * 1024 * 1024;

export const codexAgent: AgentFactory = (agent) =>
  defineAgent({
    kind: 'codex',
    maxTurns: agent.max_turns,
    passEnv: ['OPENAI_*', 'CODEX_*', 'AZURE_OPENAI_*'],
    missingLogin: (env) =>
      usesKey(env) ||
      env.OPENAI_BASE_URL ||
      env.AZURE_OPENAI_API_KEY ||
      ownProvider(agent.args) ||
      hasLogin(codexLogin(''), process.env)
        ? null
        : 'Codex has no API key and no login: set OPENAI_API_KEY (or CODEX_API_KEY), or log in with `codex login` ' +
          '(a ChatGPT plan: forkflush copies ~/.codex/auth.json into each episode), or put that file in CODEX_AUTH_JSON',
    run: (s) =>
      runCodex(s, {
        executable: agent.command ?? AGENT_CLIS.codex.executable,
        model: agent.model,
        args: agent.args,
        maxTurns: agent.max_turns,
      }),
  });

interface CodexOptions {
  executable: string;
  model: string | undefined;
  args: string[];
  maxTurns: number | undefined;
}

async function runCodex(s: AgentSession, o: CodexOptions): Promise<AgentOutcome> {
  const home = join(s.contextDir, HOME);
  const notes: string[] = [];
  const ctx = await openContext(s.contextDir, 'Codex', () => savedThread(s.contextDir, home));
  if (ctx.note) notes.push(ctx.note);
  const threadId = ctx.carried?.threadId ?? null;
  if (ctx.carried) await pruneHome(home);
  await mkdir(home, { recursive: true });
  await writeFile(join(home, 'config.toml'), configToml(s.env));
  // A ChatGPT login (`codex login`): its auth.json, when no key is given.
  const logins = usesKey(s.env) ? [] : await installLogins(codexLogin(home), process.env);

  // The rollout, read as Codex writes it: what the thread had used before (the baseline for
  // this episode's share of the running totals), and then what it uses as it goes.
  const tail = new RolloutTail(join(home, 'sessions'), ctx.carried?.rollout ?? null);
  const before = structuredClone(await tail.poll());

  const bounds: Bounds = { unit: s.unit, allowance: s.allowance, maxTurns: o.maxTurns, model: o.model ?? null };
  const watched = s.unit === 'tokens' || s.unit === 'usd' || o.maxTurns !== undefined;
  const {
    run: r,
    overrun,
    notes: watchNotes,
  } = await launch(s, {
    after: () => removeLogins(logins),
    executable: o.executable,
    args: codexArgs(s, o, threadId),
    env: codexEnv(s, home),
    // `-` makes Codex read the prompt from stdin (no argv size limit, not shown by `ps`).
    input: s.prompt,
    maxOutput: 2_000_000,
    // Codex's bounds are read from its rollout (a turn cap counts model calls within a turn).
    ...(watched ? { bounds: async () => overBounds(bounds, before, await tail.poll()) } : {}),
  });
  notes.push(...watchNotes);

  const after = await tail.poll().catch(() => tail.summary);
  const events = parseExecEvents(r.stdout);
  const exit = stopExit(r, s.deadlineIsBudget) ?? (r.spawnError || r.exitCode !== 0 ? 'crash' : 'finished');

  // The thread's running totals: turn.completed on stdout, or the rollout when the session was
  // stopped before its turn completed. A rollout without any is a thread no answer reached yet.
  const totals = events.usage ?? after.totals ?? (tail.file ? (before.resumeTotals ?? ZERO) : null);
  const thread = after.threadId ?? events.threadId;
  const model = o.model ?? after.model ?? before.model;
  if (thread && tail.file) {
    await writeFile(
      join(s.contextDir, RECORD),
      sessionRecordJson({ agent: 'codex', threadId: thread, totals, modelCalls: after.modelCalls, model }),
    );
    await pruneHome(home);
  } else if (!threadId) {
    // No conversation was recorded: leave the context empty, so the next episode starts clean.
    await rm(home, { recursive: true, force: true });
  }

  if (r.stopped === 'budget' && overrun) notes.push(`stopped by forkflush: the session ${overrun}`);
  if (exit === 'crash' && r.stopped === null) {
    const how = r.spawnError ?? (r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`);
    const why = failureLine(events, r.stderr);
    notes.push(`codex exited with ${how}${why ? `: ${why}` : ''}`);
  }

  const seconds = r.ms / 1000;
  if (!totals) {
    const charged = s.unit === 'tokens' || s.unit === 'usd' ? '; charged its whole allowance' : '';
    notes.push(`Codex recorded no session: usage unknown${charged}`);
    return { exit, reportedSpend: null, seconds, note: notes.join('; ') };
  }
  const own = ownShare(before.resumeTotals, totals);
  if (own.note) notes.push(own.note);
  if (r.stopped !== null)
    notes.push('usage as Codex recorded it up to the stop (an answer cut off by it is not counted)');
  const turns = tail.file ? after.modelCalls - before.modelCalls : null;
  const { usage, reportedSpend } = usageAndSpend(own.share, turns, model, s.unit);
  if (s.unit === 'usd')
    notes.push('Codex reports tokens, not dollars: priced with forkflush prices and checked after each model response');
  return { exit, reportedSpend, usage, seconds, ...(notes.length > 0 ? { note: notes.join('; ') } : {}) };
}

/**
 * The command line. Options go before `resume`: they are `codex exec`'s, and a resumed session
 * takes them again ("Only the conversation context is preserved; you must still provide flags",
 * openai/codex docs/exec.md, "Resuming non-interactive sessions").
 */
function codexArgs(s: AgentSession, o: CodexOptions, threadId: string | null): string[] {
  return [
    'exec',
    // JSONL events on stdout (docs/exec.md, "JSON output mode").
    '--json',
    // The workspace is a forkflush checkout that forkflush commits after every episode.
    '--skip-git-repo-check',
    '-C',
    s.workdir,
    // Edits and commands in the workspace without asking. In forkflush's sandbox Codex's own is
    // off: it is nested inside a stronger one (a PID namespace, hidden home and records), and
    // it cannot start there (Codex runs bubblewrap itself, and fails where bwrap is installed).
    // Without forkflush's sandbox, Codex's own confines writes to the workspace.
    ...(s.confined
      ? ['--sandbox', 'danger-full-access']
      : [
          '--sandbox',
          'workspace-write',
          // Codex's sandbox blocks all sockets by default; "$FORKFLUSH_GRADE" asks forkflush over a
          // Unix socket to run the grader (sandbox_workspace_write.network_access,
          // developers.openai.com/codex/config-reference).
          '-c',
          'sandbox_workspace_write.network_access=true',
        ]),
    // Never stop to ask for approval (exec's default; stated so a user config cannot change it).
    '-c',
    'approval_policy="never"',
    ...(o.model ? ['-m', o.model] : []),
    ...o.args,
    ...(threadId ? ['resume', threadId] : []),
    '-',
  ];
}

/** Whether the session gives Codex a key (then no login is copied). */
function usesKey(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.OPENAI_API_KEY || env.CODEX_API_KEY);
}

/** Whether agent.args choose a provider of their own (`--oss`, a profile, `-c model_provider=…`): its login is its own. */
function ownProvider(args: readonly string[]): boolean {
  return args.some((a) => a === '--oss' || a === '-p' || a.startsWith('--profile') || a.includes('model_provider'));
}

/** Where `codex login` leaves a ChatGPT login ($CODEX_HOME, else ~/.codex), and its secret form. */
export function codexLogin(episodeHome: string, env = process.env): LoginFile[] {
  const home = env.CODEX_HOME || join(homedir(), '.codex');
  return [{ from: join(home, 'auth.json'), fromEnv: 'CODEX_AUTH_JSON', to: join(episodeHome, 'auth.json') }];
}

/** Codex's variables, over the session's environment. */
function codexEnv(s: AgentSession, home: string): Record<string, string> {
  const env: Record<string, string> = { CODEX_HOME: home };
  // Codex's own OpenAI provider sends no key from OPENAI_API_KEY (seen with 0.171.0); `codex exec`
  // takes an API key from CODEX_API_KEY (docs/exec.md, "Authentication").
  if (!s.env.OPENAI_BASE_URL && !s.env.CODEX_API_KEY && s.env.OPENAI_API_KEY) env.CODEX_API_KEY = s.env.OPENAI_API_KEY;
  return env;
}

/**
 * config.toml for the episode's CODEX_HOME. With OPENAI_BASE_URL set (a gateway, or the test's
 * mock), a provider of our own that speaks the Responses API there with the key in
 * OPENAI_API_KEY, or without a key with the ChatGPT login (requires_openai_auth: Codex then sends
 * the login's access token there): Codex 0.171.0 ignores OPENAI_BASE_URL in the environment. Keys:
 * model_provider, model_providers.<id>.{name, base_url, wire_api, env_key, requires_openai_auth}
 * (developers.openai.com/codex/config-reference).
 */
export function configToml(env: NodeJS.ProcessEnv): string {
  const lines = ['# Written by forkflush for each episode (CODEX_HOME is the episode context folder).'];
  const base = env.OPENAI_BASE_URL?.trim();
  if (base) {
    lines.push(
      'model_provider = "forkflush"',
      '',
      '[model_providers.forkflush]',
      'name = "OpenAI Responses API at OPENAI_BASE_URL"',
      `base_url = ${JSON.stringify(base)}`,
      'wire_api = "responses"',
      env.OPENAI_API_KEY ? 'env_key = "OPENAI_API_KEY"' : 'requires_openai_auth = true',
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * The thread the context folder holds: session.json must name a thread whose rollout is in
 * home/sessions; or why it cannot be resumed.
 */
async function savedThread(
  contextDir: string,
  home: string,
): Promise<{ threadId: string; rollout: string } | { unusable: string }> {
  const text = await readRegular(join(contextDir, RECORD));
  if (text === null) return { unusable: `it has no ${RECORD}` };
  const rec = parseSessionRecord(text);
  if ('problem' in rec) return { unusable: rec.problem };
  const rollout = (await rolloutFiles(join(home, 'sessions'))).find(
    (f) => rolloutThreadId(f.split('/').at(-1) as string) === rec.threadId,
  );
  if (!rollout) return { unusable: `the session file of thread ${rec.threadId} is missing` };
  const why = rolloutProblem(await firstLine(rollout), rec.threadId);
  return why ? { unusable: why } : { threadId: rec.threadId, rollout };
}

/** Removes Codex's derived state (SQLite indexes, caches, locks), keeping config.toml and sessions/. */
async function pruneHome(home: string): Promise<void> {
  const entries = await readdir(home).catch(() => []);
  await Promise.all(
    entries.filter((e) => !KEPT.has(e)).map((e) => rm(join(home, e), { recursive: true, force: true })),
  );
}

/** Every rollout-*.jsonl under the sessions folder. */
async function rolloutFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true }).catch(() => [] as string[]);
  return entries
    .filter((e) => /(^|\/)rollout-[^/]*\.jsonl$/.test(e))
    .map((e) => join(dir, e))
    .sort();
}

/** The first line of a file (session_meta holds the whole base instructions: tens of kB). */
async function firstLine(file: string): Promise<string | undefined> {
  const buf = await readFrom(file, 0, FIRST_LINE_MAX);
  const nl = buf.indexOf(0x0a);
  if (nl === -1 && buf.length === FIRST_LINE_MAX) return undefined;
  return buf.subarray(0, nl === -1 ? buf.length : nl).toString('utf8');
}

/**
 * Reads a rollout as it grows, line by line, from where the last read stopped. Until the file is
 * known (a fresh session creates it), it is looked for under the sessions folder.
 */
class RolloutTail {
  readonly summary: RolloutSummary = emptyRollout();
  private readonly file_: GrowingFile;

  constructor(sessionsDir: string, file: string | null) {
    this.file_ = new GrowingFile(file ?? (async () => (await rolloutFiles(sessionsDir)).at(-1) ?? null));
  }

  get file(): string | null {
    return this.file_.path;
  }

  async poll(): Promise<RolloutSummary> {
    for (const line of await this.file_.lines()) addRolloutLine(this.summary, line);
    return this.summary;
  }
}
