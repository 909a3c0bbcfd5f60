// The session core: what every CLI adapter needs once, so that their policies agree where the
// method cares. An adapter keeps only what is its CLI's own: the command line, where the CLI keeps
// its conversation and how to resume it, and a parser of its output.
//   - the context: empty is fresh; a carried one the adapter cannot resume is cleared, and the
//     episode starts fresh with a note (openContext);
//   - the environment: the session's allowlist, forkflush's contract variables, the CLI's own;
//   - the bounds: a watcher polls the adapter's meter and stops an overrun; a meter that fails is
//     a note, never silence; and whatever the timing, an episode whose final usage is past its
//     allowance is an overrun (settleBounds);
//   - running totals become this episode's usage by one rule, never under-reporting (ownShare);
//   - files the agent could write are read safely, as they grow (GrowingFile).
// (Over 400 lines because it is the one place these policies live: split, they would be read apart.)
import { constants, existsSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ExitReason } from '../core/state.js';
import { formatNumber } from '../core/text.js';
import { LOG_FULL, LOG_MAX_BYTES, type RunOptions, type RunResult } from '../io/process.js';
import { type AgentAdapter, type AgentOutcome, type AgentSession, forkflushVars } from './agent.js';

// ---------------------------------------------------------------------------------------------
// Reading what CLIs print and write

/** The JSON objects of JSONL text; lines that are not JSON objects are skipped. */
export function* jsonLines(text: string): Generator<Record<string, unknown>> {
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      const v: unknown = JSON.parse(t);
      if (isRecord(v)) yield v;
    } catch {
      // A torn or foreign line.
    }
  }
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A count as a CLI reports it: a finite non-negative number, else 0. */
export function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

/** A reported figure: a finite non-negative number, else null (absent or nonsense). */
export function figure(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;
}

/** The most forkflush reads of one file an agent could write: a sparse file of any size costs the agent nothing. */
export const MAX_AGENT_FILE_BYTES = 64 * 1024 * 1024;
/** What one read of a growing file takes, and the longest line it keeps (a longer one is dropped). */
const CHUNK_BYTES = 8 * 1024 * 1024;
const MAX_LINE_BYTES = 16 * 1024 * 1024;

/**
 * A file an agent's CLI appends to (a transcript, a rollout, an events log), read as it grows:
 * each read returns the whole lines added since the last one, at most a chunk at a time, so
 * memory stays small however large the agent makes the file. It is opened without following a
 * link and without blocking, and must be a regular file: the agent can write the folder it is in.
 */
export class GrowingFile {
  private rest = Buffer.alloc(0);
  /** Lines too long to keep (dropped, not parsed). */
  dropped = 0;
  private skipping = false;
  private reading: Promise<unknown> = Promise.resolve();
  /** The file, once known. */
  path: string | null;

  constructor(
    /** The file, or a finder for a file not known yet (a session the CLI names itself). */
    private readonly locate: string | (() => Promise<string | null>),
    /** Where reading starts (what an earlier episode left is not this one's). */
    public offset = 0,
  ) {
    this.path = typeof locate === 'string' ? locate : null;
  }

  /** The whole lines added since the last read, a chunk at most (reads never overlap). */
  lines(): Promise<string[]> {
    const next = this.reading.then(() => this.read());
    this.reading = next.catch(() => {});
    return next;
  }

  /** Every whole line up to the end of the file as it is now, a chunk at a time. */
  async *remaining(): AsyncGenerator<string> {
    for (;;) {
      const before = this.offset;
      for (const line of await this.lines()) yield line;
      if (this.offset === before) return;
    }
  }

  private async read(): Promise<string[]> {
    if (this.path === null && typeof this.locate !== 'string') this.path = await this.locate();
    if (this.path === null) return [];
    const chunk = await readFrom(this.path, this.offset, CHUNK_BYTES);
    if (chunk.length === 0) return [];
    this.offset += chunk.length;
    let data = Buffer.concat([this.rest, chunk]);
    if (this.skipping) {
      // The rest of a line too long to keep.
      const nl = data.indexOf(0x0a);
      if (nl === -1) {
        this.rest = Buffer.alloc(0);
        return [];
      }
      this.skipping = false;
      data = data.subarray(nl + 1);
    }
    const end = data.lastIndexOf(0x0a);
    // A line still being written waits for the next read, unless it is too long to keep.
    this.rest = end === -1 ? data : data.subarray(end + 1);
    if (this.rest.length > MAX_LINE_BYTES) {
      this.rest = Buffer.alloc(0);
      this.skipping = true;
      this.dropped++;
    }
    return end === -1 ? [] : data.subarray(0, end).toString('utf8').split('\n');
  }
}

/** What a file holds from `offset` on; nothing when it is not a regular file. */
export async function readFrom(path: string, offset: number, max = MAX_AGENT_FILE_BYTES): Promise<Buffer> {
  const h = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (!h) return Buffer.alloc(0);
  try {
    const s = await h.stat();
    if (!s.isFile() || s.size <= offset) return Buffer.alloc(0);
    const buf = Buffer.alloc(Math.min(s.size - offset, max));
    const { bytesRead } = await h.read(buf, 0, buf.length, offset);
    return buf.subarray(0, bytesRead);
  } finally {
    await h.close();
  }
}

/** A regular file's size (0 when there is none). */
export async function sizeOf(path: string): Promise<number> {
  const h = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (!h) return 0;
  try {
    const s = await h.stat();
    return s.isFile() ? s.size : 0;
  } finally {
    await h.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The context

/**
 * Opens the context folder an episode starts from. Empty: a fresh conversation. Otherwise
 * `resume` reads the conversation the previous episode left, or says why it cannot be resumed.
 * An unusable context is cleared and the episode starts fresh, with a note: the episode still
 * does its work and its record says it started fresh, and the lineage's later episodes carry a
 * sound conversation on instead of failing the same way again and again (docs/architecture.md).
 */
export async function openContext<T>(
  contextDir: string,
  agent: string,
  resume: (entries: string[]) => Promise<T | { unusable: string }>,
): Promise<{ carried: T | null; note?: string }> {
  const entries = await readdir(contextDir).catch(() => [] as string[]);
  if (entries.length === 0) return { carried: null };
  const found = await resume(entries);
  if (!isRecord(found) || !('unusable' in found)) return { carried: found as T };
  for (const e of entries) await rm(join(contextDir, e), { recursive: true, force: true });
  return {
    carried: null,
    note: `could not resume the carried ${agent} conversation (${(found as { unusable: string }).unusable}); started a fresh conversation`,
  };
}

// ---------------------------------------------------------------------------------------------
// Subscription logins

/** A credential file a CLI's login left in the user's own home, and where the episode's CLI looks for it. */
export interface LoginFile {
  /** In the user's CLI home (outside every sandbox; forkflush reads it, the agent never sees it there). */
  from: string;
  /** Or its content, from a variable (a repository secret on a runner). */
  fromEnv?: string;
  /** In the episode's CLI home. */
  to: string;
}

/** A login file copied into an episode's CLI home. */
export interface InstalledLogin {
  to: string;
}

/**
 * Copies (never moves or links) the credential files of the user's login into the episode's CLI
 * home, mode 0600. Only those files: no history, sessions or memories, so a fresh episode still
 * has none. Returns what was copied, to be removed when the session ends: it must not travel on
 * with the context (which a forge keeps). A variable with the content wins over the file.
 */
export async function installLogins(files: LoginFile[], env: NodeJS.ProcessEnv): Promise<InstalledLogin[]> {
  const installed: InstalledLogin[] = [];
  for (const f of files) {
    const fromEnv = f.fromEnv ? env[f.fromEnv]?.trim() : undefined;
    // The user's own file may be a symlink (a dotfiles manager's): it is outside every sandbox.
    const fromFile = fromEnv ? null : await readFile(f.from, 'utf8').catch(() => null);
    const text = fromEnv || fromFile;
    if (!text) continue;
    await mkdir(dirname(f.to), { recursive: true });
    await rm(f.to, { force: true });
    await writeFile(f.to, text, { mode: 0o600, flag: 'wx' });
    installed.push({ to: f.to });
  }
  return installed;
}

/**
 * Removes the copied login files after the session, whatever happened in it. Nothing of them goes
 * back to the user's files: the agent could write them, and a file of the right shape could hold
 * another account's login. A CLI that refreshed its tokens in the episode may have rotated the
 * user's refresh token (README, "Keys and logins").
 */
export async function removeLogins(installed: InstalledLogin[]): Promise<void> {
  for (const login of installed) await rm(login.to, { force: true });
}

// ---------------------------------------------------------------------------------------------
// Running the CLI within its bounds

/** What a session has used so far: this episode's own share. */
export interface Reading {
  inputTokens: number;
  outputTokens: number;
  costUsd: number | null;
  turns: number;
}

export interface Launch {
  executable: string;
  args: string[];
  /** The CLI's own variables, over the session's environment and forkflush's contract. */
  env: Record<string, string>;
  /** Variables of the session's environment the CLI must not get. */
  unset?: string[];
  input?: string;
  cwd?: string;
  /** Stop the session this much earlier than the session's deadline (a retry's remaining time). */
  timeoutMs?: number;
  /** Read while the CLI runs, to stop an overrun; absent: the CLI bounds itself. */
  meter?: () => Promise<Reading | null>;
  /** Or, for bounds of the CLI's own kind: why the session must stop now, or null. */
  bounds?: () => Promise<string | null>;
  maxTurns?: number | undefined;
  pollMs?: number;
  maxOutput?: number;
  /** Run when the CLI's process has ended, whatever happened (removing copied login files, say). */
  after?: () => Promise<void>;
}

export interface Launched {
  run: RunResult;
  /** Why forkflush stopped the session for its bounds, if it did. */
  overrun: string | null;
  notes: string[];
}

/** Runs the CLI in the session's sandbox, watching its bounds. */
export async function launch(s: AgentSession, l: Launch): Promise<Launched> {
  const stop = new AbortController();
  const notes: string[] = [];
  let overrun: string | null = null;
  let failed = false;
  let busy = false;
  const check = async () => {
    if (busy || stop.signal.aborted) return;
    busy = true;
    try {
      const reading = l.meter ? await l.meter() : null;
      const why = reading ? overrunReason(s, reading, reading.turns, l.maxTurns) : ((await l.bounds?.()) ?? undefined);
      if (why) {
        overrun = why;
        stop.abort('budget');
      }
    } catch (e) {
      // A meter that cannot read is said, once; the bounds are checked again when the session ends.
      if (!failed) notes.push(`the usage watcher failed (${(e as Error).message}); bounds were checked at the end`);
      failed = true;
    } finally {
      busy = false;
    }
  };
  const timer = l.meter || l.bounds ? setInterval(() => void check(), l.pollMs ?? 250) : undefined;
  const env: NodeJS.ProcessEnv = { ...s.env, ...forkflushVars(s), ...l.env };
  for (const name of l.unset ?? []) delete env[name];
  const options: RunOptions = {
    cwd: l.cwd ?? s.workdir,
    env,
    ...(l.input !== undefined ? { input: l.input } : {}),
    timeoutMs: l.timeoutMs ?? s.deadlineMs,
    signal: AbortSignal.any([s.signal, stop.signal]),
    logFile: s.logFile,
    maxOutput: l.maxOutput ?? 4_000_000,
  };
  try {
    const run = await s.spawn(l.executable, l.args, options);
    if (run.stopped === LOG_FULL)
      notes.push(
        run.logProblem
          ? `stopped: its log could not be written (${run.logProblem})`
          : `stopped: its output passed ${LOG_MAX_BYTES / 1024 / 1024} MB (the log keeps the first ${LOG_MAX_BYTES / 1024 / 1024} MB)`,
      );
    return { run, overrun, notes };
  } finally {
    if (timer) clearInterval(timer);
    await l.after?.();
  }
}

/**
 * How a session that forkflush stopped ended: its deadline (a time budget, or a timeout), its
 * budget, or 'crash' for any other stop; null when the process ended on its own.
 */
export function stopExit(r: { stopped: string | null }, deadlineIsBudget: boolean): ExitReason | null {
  if (r.stopped === null) return null;
  if (r.stopped === 'timeout') return deadlineIsBudget ? 'budget' : 'timeout';
  return r.stopped === 'budget' ? 'budget' : 'crash';
}

/** Why a session has gone past its bounds (turns, tokens, dollars), or undefined while it has not. */
export function overrunReason(
  s: AgentSession,
  usage: { inputTokens: number; outputTokens: number; costUsd: number | null },
  turns: number,
  maxTurns: number | undefined,
): string | undefined {
  if (maxTurns !== undefined && turns > maxTurns) return `it passed agent.max_turns (${maxTurns})`;
  if (s.unit === 'tokens' && usage.inputTokens + usage.outputTokens > s.allowance) {
    return `its tokens passed the allowance of ${formatNumber(s.allowance, 6)}`;
  }
  if (s.unit === 'usd' && (usage.costUsd ?? 0) > s.allowance)
    return `its cost passed the allowance of $${formatNumber(s.allowance, 6)}`;
  return undefined;
}

/**
 * The bounds, checked once more on the final usage: an overrun the watcher's poll did not catch
 * (the session ended between two polls, or the CLI bounds itself loosely) is an overrun all the same.
 */
export function settleBounds(s: AgentSession, o: AgentOutcome, maxTurns?: number): AgentOutcome {
  if (o.exit !== 'finished') return o;
  const measured = s.unit === 'tokens' || s.unit === 'usd';
  const turns = o.usage?.turns ?? null;
  const why =
    measured && o.reportedSpend !== null && o.reportedSpend > s.allowance
      ? `it spent ${Number(o.reportedSpend.toPrecision(6))} of its ${formatNumber(s.allowance, 6)} ${s.unit}`
      : maxTurns !== undefined && turns !== null && turns > maxTurns
        ? `it took ${turns} turns, past agent.max_turns (${maxTurns})`
        : null;
  if (!why) return o;
  const note = `an overrun: ${why} (found when the session ended)`;
  return { ...o, exit: 'budget', note: o.note ? `${o.note}; ${note}` : note };
}

/**
 * An adapter: its run, with what every adapter gets: an episode whose CLI surely cannot log in ends
 * before it starts (with how to log in), and the final bounds check.
 */
export function defineAgent(a: {
  kind: string;
  passEnv: readonly string[];
  /** agent.max_turns, for the final check. */
  maxTurns: number | undefined;
  missingLogin?: (env: NodeJS.ProcessEnv) => string | null;
  run: (s: AgentSession) => Promise<AgentOutcome>;
}): AgentAdapter {
  const missingLogin = a.missingLogin ?? (() => null);
  return {
    kind: a.kind,
    passEnv: a.passEnv,
    missingLogin,
    run: async (s) => {
      const missing = missingLogin(s.env);
      if (missing) return { exit: 'crash', reportedSpend: 0, note: missing, seconds: 0 };
      return settleBounds(s, await a.run(s), a.maxTurns);
    },
  };
}

/** Whether a login's credential file is there, or its content is in its variable. */
export function hasLogin(files: LoginFile[], env: NodeJS.ProcessEnv): boolean {
  return files.some((f) => (f.fromEnv && env[f.fromEnv]?.trim()) || existsSync(f.from));
}

// ---------------------------------------------------------------------------------------------
// Usage

/**
 * This episode's share of running totals (a conversation's, across resumes): after minus before,
 * figure by figure. A total that went down means the CLI counted afresh; what the episode can be
 * proven to have used is then at least the total after it, which is charged, with a note. Never
 * less than can be proven: a budget must not be under-reported.
 */
export function ownShare<T extends { [K in keyof T]: number }>(
  before: T | null,
  after: T,
): { share: T; note?: string } {
  const share = { ...after };
  const down: string[] = [];
  for (const key of Object.keys(after) as (keyof T)[]) {
    const b = before?.[key] ?? 0;
    const a = after[key] as number;
    if (a >= b) share[key] = (a - b) as T[keyof T];
    else down.push(String(key));
  }
  return down.length > 0
    ? {
        share,
        note: `the running totals went down (${down.join(', ')}): the CLI counted afresh, so the totals after the episode are charged as its own`,
      }
    : { share };
}

/** The spend in the budget's unit from an episode's usage (null for units the adapter does not measure). */
export function spendOf(s: AgentSession, u: { inputTokens: number; outputTokens: number; costUsd: number | null }) {
  if (s.unit === 'tokens') return u.inputTokens + u.outputTokens;
  if (s.unit === 'usd') return u.costUsd;
  return null;
}
