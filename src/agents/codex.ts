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
import { mkdir, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type AgentAdapter, type AgentFactory, type AgentOutcome, type AgentSession, forkflushVars } from './agent.js';
import {
  addRolloutLine,
  type Bounds,
  emptyRollout,
  episodeTokens,
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
import { stopExit } from './session.js';

const HOME = 'home';
const RECORD = 'session.json';
/** What a Codex home keeps between episodes; everything else is Codex's derived state. */
const KEPT = new Set(['sessions', 'config.toml']);
const POLL_MS = 250;
const ZERO = { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };
const FIRST_LINE_MAX = 4 * 1024 * 1024;

export const codexAgent: AgentFactory = (agent) => {
  const adapter: AgentAdapter = {
    kind: 'codex',
    passEnv: ['OPENAI_*', 'CODEX_*', 'AZURE_OPENAI_*'],
    run: (s) =>
      runCodex(s, {
        executable: agent.command ?? 'codex',
        model: agent.model,
        args: agent.args,
        maxTurns: agent.max_turns,
      }),
  };
  return adapter;
};

interface CodexOptions {
  executable: string;
  model: string | undefined;
  args: string[];
  maxTurns: number | undefined;
}

async function runCodex(s: AgentSession, o: CodexOptions): Promise<AgentOutcome> {
  const home = join(s.contextDir, HOME);
  const context = await prepareContext(s.contextDir, home);
  await writeFile(join(home, 'config.toml'), configToml(s.env));

  // The rollout, read as Codex writes it: what the thread had used before (the baseline for
  // this episode's share of the running totals), and then what it uses as it goes.
  const tail = new RolloutTail(join(home, 'sessions'), context.rollout);
  const before = structuredClone(await tail.poll());

  const bounds: Bounds = { unit: s.unit, allowance: s.allowance, maxTurns: o.maxTurns, model: o.model ?? null };
  const watched = s.unit === 'tokens' || s.unit === 'usd' || o.maxTurns !== undefined;
  const overrun = new AbortController();
  let overrunWhy: string | null = null;
  let polling = false;
  const poll = watched
    ? setInterval(async () => {
        if (polling || overrun.signal.aborted) return;
        polling = true;
        try {
          const why = overBounds(bounds, before, await tail.poll());
          if (why) {
            overrunWhy = why;
            overrun.abort('budget');
          }
        } catch {
          // A rollout being written can be read again at the next tick.
        } finally {
          polling = false;
        }
      }, POLL_MS)
    : undefined;

  const r = await s.spawn(o.executable, codexArgs(s, o, context.threadId), {
    cwd: s.workdir,
    env: codexEnv(s, home),
    // `-` makes Codex read the prompt from stdin (no argv size limit, not shown by `ps`).
    input: s.prompt,
    timeoutMs: s.deadlineMs,
    signal: AbortSignal.any([s.signal, overrun.signal]),
    logFile: s.logFile,
    maxOutput: 2_000_000,
  });
  if (poll) clearInterval(poll);

  const after = await tail.poll().catch(() => tail.summary);
  const events = parseExecEvents(r.stdout);
  const exit = stopExit(r, s.deadlineIsBudget) ?? (r.spawnError || r.exitCode !== 0 ? 'crash' : 'finished');

  // The thread's running totals: turn.completed on stdout, or the rollout when the session was
  // stopped before its turn completed. A rollout without any is a thread no answer reached yet.
  const totals = events.usage ?? after.totals ?? (tail.file ? (before.resumeTotals ?? ZERO) : null);
  const threadId = after.threadId ?? events.threadId;
  const model = o.model ?? after.model ?? before.model;
  if (threadId && tail.file) {
    await writeFile(
      join(s.contextDir, RECORD),
      sessionRecordJson({ agent: 'codex', threadId, totals, modelCalls: after.modelCalls, model }),
    );
    await pruneHome(home);
  } else if (!context.threadId) {
    // No conversation was recorded: leave the context empty, so the next episode starts clean.
    await rm(home, { recursive: true, force: true });
  }

  const notes: string[] = [];
  if (context.note) notes.push(context.note);
  if (overrunWhy) notes.push(`stopped by forkflush: the session ${overrunWhy}`);
  if (exit === 'crash' && r.stopped === null) {
    const how = r.spawnError ?? (r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`);
    const why = failureLine(events, r.stderr);
    notes.push(`codex exited with ${how}${why ? `: ${why}` : ''}`);
  }

  const tokens = totals ? episodeTokens(before.resumeTotals, totals) : null;
  const seconds = r.ms / 1000;
  if (!tokens) {
    const charged = s.unit === 'tokens' || s.unit === 'usd' ? '; charged its whole allowance' : '';
    notes.push(
      totals
        ? `Codex's token totals went down (${before.resumeTotals?.inputTokens} -> ${totals.inputTokens} in): usage unknown${charged}`
        : `Codex recorded no session: usage unknown${charged}`,
    );
    return { exit, reportedSpend: null, seconds, note: notes.join('; ') };
  }
  if (r.stopped !== null)
    notes.push('usage as Codex recorded it up to the stop (an answer cut off by it is not counted)');
  const turns = tail.file ? after.modelCalls - before.modelCalls : null;
  const { usage, reportedSpend } = usageAndSpend(tokens, turns, model, s.unit);
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

function codexEnv(s: AgentSession, home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...s.env,
    CODEX_HOME: home,
    ...forkflushVars(s),
  };
  // Codex's own OpenAI provider sends no key from OPENAI_API_KEY (seen with 0.171.0); `codex exec`
  // takes an API key from CODEX_API_KEY (docs/exec.md, "Authentication").
  if (!s.env.OPENAI_BASE_URL && !s.env.CODEX_API_KEY && s.env.OPENAI_API_KEY) env.CODEX_API_KEY = s.env.OPENAI_API_KEY;
  return env;
}

/**
 * config.toml for the episode's CODEX_HOME. With OPENAI_BASE_URL set (a gateway, or the test's
 * mock), a provider of our own that speaks the Responses API there with the key in
 * OPENAI_API_KEY: Codex 0.171.0 ignores OPENAI_BASE_URL in the environment. Keys:
 * model_provider, model_providers.<id>.{name, base_url, wire_api, env_key}
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
      'env_key = "OPENAI_API_KEY"',
    );
  }
  return `${lines.join('\n')}\n`;
}

interface PreparedContext {
  /** The thread to resume, or null for a fresh conversation. */
  threadId: string | null;
  rollout: string | null;
  note?: string;
}

/**
 * Makes the context folder ready: empty means fresh; otherwise session.json must name a thread
 * whose rollout is in home/sessions. A context that is not usable is replaced by a fresh start,
 * with a note: the episode still does its work, and a flush is a step the method itself takes.
 */
async function prepareContext(contextDir: string, home: string): Promise<PreparedContext> {
  const entries = await readdir(contextDir).catch(() => []);
  if (entries.length === 0) {
    await mkdir(home, { recursive: true });
    return { threadId: null, rollout: null };
  }
  const problem = await (async (): Promise<{ threadId: string; rollout: string } | string> => {
    const text = await readFile(join(contextDir, RECORD), 'utf8').catch(() => null);
    if (text === null) return `it has no ${RECORD}`;
    const rec = parseSessionRecord(text);
    if ('problem' in rec) return rec.problem;
    const rollout = (await rolloutFiles(join(home, 'sessions'))).find(
      (f) => rolloutThreadId(f.split('/').at(-1) as string) === rec.threadId,
    );
    if (!rollout) return `the session file of thread ${rec.threadId} is missing`;
    const why = rolloutProblem(await firstLine(rollout), rec.threadId);
    return why ?? { threadId: rec.threadId, rollout };
  })();
  if (typeof problem !== 'string') {
    await pruneHome(home);
    return { threadId: problem.threadId, rollout: problem.rollout };
  }
  await rm(home, { recursive: true, force: true });
  await rm(join(contextDir, RECORD), { force: true });
  await mkdir(home, { recursive: true });
  return {
    threadId: null,
    rollout: null,
    note: `the context folder held no usable Codex session (${problem}): this episode started a fresh conversation`,
  };
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
  const h = await open(file, 'r');
  try {
    const buf = Buffer.alloc(FIRST_LINE_MAX);
    const { bytesRead } = await h.read(buf, 0, buf.length, 0);
    const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
    if (nl === -1 && bytesRead === buf.length) return undefined;
    return buf.subarray(0, nl === -1 ? bytesRead : nl).toString('utf8');
  } finally {
    await h.close();
  }
}

/**
 * Reads a rollout as it grows, line by line, from where the last read stopped. Until the file is
 * known (a fresh session creates it), it is looked for under the sessions folder.
 */
class RolloutTail {
  readonly summary: RolloutSummary = emptyRollout();
  private offset = 0;
  private rest: Buffer = Buffer.alloc(0);

  private reading: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly sessionsDir: string,
    public file: string | null,
  ) {}

  /** Reads what was added since the last read; reads never overlap (the offset is shared). */
  poll(): Promise<RolloutSummary> {
    const next = this.reading.then(() => this.read());
    this.reading = next.catch(() => {});
    return next;
  }

  private async read(): Promise<RolloutSummary> {
    if (!this.file) {
      const files = await rolloutFiles(this.sessionsDir);
      if (files.length === 0) return this.summary;
      this.file = files.at(-1) as string;
    }
    const size = (await stat(this.file)).size;
    if (size <= this.offset) return this.summary;
    const h = await open(this.file, 'r');
    try {
      const chunk = Buffer.alloc(size - this.offset);
      const { bytesRead } = await h.read(chunk, 0, chunk.length, this.offset);
      this.offset += bytesRead;
      const data = Buffer.concat([this.rest, chunk.subarray(0, bytesRead)]);
      const end = data.lastIndexOf(0x0a);
      // Only whole lines are read; a line still being written waits for the next poll.
      this.rest = end === -1 ? data : data.subarray(end + 1);
      if (end !== -1)
        for (const line of data.subarray(0, end).toString('utf8').split('\n')) addRolloutLine(this.summary, line);
    } finally {
      await h.close();
    }
    return this.summary;
  }
}
