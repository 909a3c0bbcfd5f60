// The session runner: one episode of any agent kind, the same way for every spec (spec.ts): the
// context (a carried one that cannot be resumed is cleared: a fresh start with a note), session.json,
// the environment and login, the watcher that stops an overrun, the ending, usage and notes.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../core/config.js';
import { type AgentFailure, couldNotStart, failureOf, recognizeFailure } from '../core/failure.js';
import { isRecord } from '../core/json.js';
import type { ExitReason } from '../core/state.js';
import { failureLine } from '../core/text.js';
import {
  believableFigures,
  overrunReason,
  type Spent,
  settleBounds,
  spendOf,
  unsureFigures,
  usageOf,
} from '../core/usage.js';
import { readRegular } from '../io/agent-reads.js';
import { awakeNow } from '../io/awake.js';
import { maskFile, maskText } from '../io/egress-mask.js';
import { anySet, hasLogin, installLogins, removeLogins } from '../io/logins.js';
import { LOG_FULL, LOG_MAX_BYTES, type RunResult } from '../io/process.js';
import { type AgentAdapter, type AgentOutcome, type AgentSession, forkflushVars } from './agent.js';
import type { AgentSpec, CliRun, Ending, Episode, Unusable } from './spec.js';

/** forkflush's record of the conversation, in the context folder. */
export const RECORD_FILE = 'session.json';

/** The agent port for a spec and the config's `agent` section. */
export function adapterOf<S>(spec: AgentSpec<S>, agent: Config['agent']): AgentAdapter {
  const missingLogin = (env: NodeJS.ProcessEnv) => loginMissing(spec, env, agent);
  return {
    kind: spec.kind,
    passEnv: spec.passEnv,
    missingLogin,
    run: async (s) => {
      const note = missingLogin(s.env);
      if (note) return { exit: 'crash', reportedSpend: 0, note, seconds: 0, failure: { kind: 'auth', quote: note } };
      return settleBounds(s, believableFigures(await runSession(spec, agent, s)), agent.max_turns);
    },
  };
}

/** Why a CLI surely cannot log in with this environment (its spec's `login`), as a message saying how; null when it can. */
export function loginMissing(
  spec: Pick<AgentSpec, 'name' | 'login'>,
  env: NodeJS.ProcessEnv,
  agent: Config['agent'],
): string | null {
  const l = spec.login;
  const logsIn =
    !l ||
    anySet([...l.keys, ...(l.other ?? [])], env) ||
    agent.args.some((a) => l.args?.test(a)) ||
    (l.files && hasLogin(l.files(''), process.env));
  return logsIn ? null : `${spec.name} has no ${l.lacks ?? 'API key and no login'}: ${l.how}`;
}

/**
 * Opens the context folder an episode starts from: empty, a fresh conversation; else what `resume` reads. An
 * unusable one is cleared, with a note, so the lineage's later episodes do not fail the same way again.
 */
export async function openContext<T>(
  contextDir: string,
  agent: string,
  resume: (entries: string[]) => Promise<T | Unusable>,
): Promise<{ carried: T | null; note?: string }> {
  const entries = await readdir(contextDir).catch(() => [] as string[]);
  if (entries.length === 0) return { carried: null };
  const found = await resume(entries);
  if (!isRecord(found) || !('unusable' in found)) return { carried: found as T };
  await clear(contextDir);
  return { carried: null, note: freshNote(agent, (found as unknown as Unusable).unusable) };
}

const freshNote = (agent: string, why: string) =>
  `could not resume the carried ${agent} conversation (${why}); started a fresh conversation`;

async function clear(dir: string): Promise<void> {
  for (const e of await readdir(dir)) await rm(join(dir, e), { recursive: true, force: true });
}

/** The record a context folder holds, or why it cannot be used. */
async function readRecord(contextDir: string, kind: string): Promise<Record<string, unknown> | Unusable> {
  const text = await readRegular(join(contextDir, RECORD_FILE));
  if (text === null) return { unusable: `${RECORD_FILE} is missing` };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { unusable: `${RECORD_FILE} is not JSON (${text.trim().slice(0, 40) || 'empty'})` };
  }
  if (!isRecord(v)) return { unusable: `${RECORD_FILE} is not an object` };
  if (v.agent !== undefined && v.agent !== kind)
    return { unusable: `${RECORD_FILE} was written for agent ${JSON.stringify(v.agent)}, not ${kind}` };
  return v;
}

/** One episode of a spec's CLI: the context, the run within its bounds, what it spent and how it ended. */
export async function runSession<S>(
  spec: AgentSpec<S>,
  agent: Config['agent'],
  s: AgentSession,
): Promise<AgentOutcome> {
  // Awake time, as the session's limit counts it: a frozen machine's stretch is not the agent's time.
  const started = awakeNow();
  const executable = agent.command ?? spec.cli?.executable ?? '';
  const e: Episode = { ...s, agent, executable, home: join(s.contextDir, 'home') };
  const notes: string[] = [];
  let saved: S | null = null;
  const resume = spec.resume;
  if (resume) {
    await mkdir(s.contextDir, { recursive: true });
    const ctx = await openContext(s.contextDir, spec.name, async () => {
      const record = await readRecord(s.contextDir, spec.kind);
      if ('unusable' in record) return record as Unusable;
      const key = spec.session?.key ?? 'sessionId';
      const id = record[key];
      if (spec.session && (typeof id !== 'string' || !spec.session.id.test(id)))
        return { unusable: `${RECORD_FILE} names no valid ${key} (${JSON.stringify(id) ?? 'none'})` };
      return resume(e, record, typeof id === 'string' ? id : '');
    });
    saved = ctx.carried;
    if (ctx.note) notes.push(ctx.note);
  }
  let t = await attempt(spec, e, saved, s.deadlineMs);
  if (t.ending.restart && resume) {
    // The CLI found no conversation to resume: it has not called the model yet.
    await clear(s.contextDir);
    notes.push(freshNote(spec.name, t.ending.restart));
    t = await attempt(spec, e, null, Math.max(1, s.deadlineMs - (awakeNow() - started)));
  }
  const { run: r, cli, ending, spent } = t;
  notes.push(...t.notes);

  const exit: ExitReason =
    stopExit(r, s.deadlineIsBudget) ?? ending.exit ?? (r.spawnError || r.exitCode !== 0 ? 'crash' : 'finished');
  if (r.stopped === 'budget' && t.overrun) notes.push(`stopped by forkflush: the session ${t.overrun}`);
  if (ending.note) notes.push(ending.note);
  let failure: AgentFailure | null = null;
  if (exit === 'crash' && r.stopped === null && (r.spawnError || r.exitCode !== 0 || r.signal || ending.why)) {
    const why = (ending.why ?? failureLine(r.stderr)).replace(/\s+/g, ' ').trim().slice(0, 300);
    // What the spec read first; else the provider's words in the CLI's output, by their common shapes.
    failure =
      failureOf(spec, { ...r, quote: r.spawnError ?? why, status: ending.status }) ??
      recognizeFailure(r.stderr.trim() ? r.stderr : r.stdout);
    notes.push(
      r.spawnError
        ? `${spec.name} could not start: ${r.spawnError}`
        : `${spec.name} exited with ${r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`}${why ? `: ${why}` : ''}`,
    );
  }

  const measured = s.unit === 'tokens' || s.unit === 'usd';
  const outcome: AgentOutcome = { exit, reportedSpend: null, seconds: (awakeNow() - started) / 1000 };
  const said = spec.finalMessage(r.stdout)?.trim();
  if (spent) notes.push(...(spent.notes ?? []));
  if (spent?.spend !== undefined) outcome.reportedSpend = spent.spend;
  else if (spent) {
    // A session that ended well with the model's last words: the model answered.
    const doubt = unsureFigures(spent.tally, exit === 'finished' && Boolean(said));
    if (doubt) notes.push(doubt);
    outcome.usage = usageOf(spent);
    outcome.reportedSpend = spent.unsure || doubt ? null : spendOf(s, outcome.usage);
    if ((spent.unsure || doubt) && measured) notes.push('the spend is unknown');
  } else if (!(r.stopped === null && couldNotStart(r))) {
    const why = cli.noUsage?.();
    if (why) notes.push(why);
  }
  const record = await cli.record?.(r);
  if (record) await writeRecord(s.contextDir, spec.kind, record);
  await cli.after?.();
  if (notes.length > 0) outcome.note = notes.join('; ');
  if (failure) outcome.failure = failure;
  const words = exit === 'finished' || exit === 'budget' ? said?.split('\n').at(-1) : null;
  if (words) outcome.lastWords = words.trim().slice(0, 200);
  return s.keys && s.keys.length > 0 ? withoutKeys(outcome, s.logFile, s.keys) : outcome;
}

/**
 * The outcome and the log with the proxy's keys masked: an upstream can echo one past the proxy's
 * mask (split over a stream's events, which the CLI joins), and these reach the journal, the commit
 * and the job's artifact.
 */
async function withoutKeys(o: AgentOutcome, logFile: string, keys: string[]): Promise<AgentOutcome> {
  await maskFile(logFile, keys);
  const hide = (text: string) => maskText(text, keys);
  return {
    ...o,
    ...(o.note !== undefined ? { note: hide(o.note) } : {}),
    ...(o.lastWords !== undefined ? { lastWords: hide(o.lastWords) } : {}),
    ...(o.failure ? { failure: { ...o.failure, quote: hide(o.failure.quote) } } : {}),
  };
}

async function writeRecord(contextDir: string, kind: string, record: Record<string, unknown>): Promise<void> {
  await writeFile(join(contextDir, RECORD_FILE), `${JSON.stringify({ agent: kind, ...record }, null, 2)}\n`);
}

interface Attempt {
  run: RunResult;
  cli: CliRun;
  spent: Spent | null;
  ending: Ending;
  overrun: string | null;
  notes: string[];
}

/** Runs the CLI once in the session's sandbox, watching its bounds. */
async function attempt<S>(spec: AgentSpec<S>, e: Episode, saved: S | null, timeoutMs: number): Promise<Attempt> {
  const cli = await spec.start(e, saved);
  const before = await cli.record?.();
  // Recorded before the run, so that a session stopped before its first answer can still be resumed.
  if (before) await writeRecord(e.contextDir, spec.kind, before);
  const stop = new AbortController();
  const notes: string[] = [];
  let overrun: string | null = null;
  let failed = false;
  let busy = false;
  const watched = cli.spent && cli.watch !== false ? cli.spent : null;
  const check = async () => {
    if (busy || stop.signal.aborted) return;
    busy = true;
    try {
      const spent = watched ? await watched() : null;
      const usage = spent && spent.spend === undefined ? usageOf(spent) : null;
      const why =
        spent?.spend !== undefined
          ? overrunReason(e, { inputTokens: spent.spend, outputTokens: 0, costUsd: spent.spend }, 0, undefined)
          : usage
            ? overrunReason(e, usage, usage.turns ?? 0, e.agent.max_turns)
            : undefined;
      const limit = why ?? (await cli.bounds?.()) ?? undefined;
      if (limit) {
        overrun = limit;
        stop.abort('budget');
      }
    } catch (err) {
      // A watcher that cannot read is said, once; the bounds are checked again when the session ends.
      if (!failed) notes.push(`the usage watcher failed (${(err as Error).message}); bounds were checked at the end`);
      failed = true;
    } finally {
      busy = false;
    }
  };
  const timer = watched || cli.bounds ? setInterval(() => void check(), cli.pollMs ?? 250) : undefined;
  const env: NodeJS.ProcessEnv = { ...e.env, ...forkflushVars(e), ...cli.env };
  for (const name of cli.unset ?? []) delete env[name];
  // Its login files, when no key is set (copied for the run only).
  const login = spec.login;
  const files = cli.logins ?? (login?.files && !anySet(login.keys, e.env) ? login.files(e.home) : []);
  const logins = await installLogins(files, process.env);
  try {
    const run = await e.spawn(cli.executable ?? e.executable, cli.args, {
      cwd: cli.cwd ?? e.workdir,
      env,
      ...(cli.input !== undefined ? { input: cli.input } : {}),
      timeoutMs,
      signal: AbortSignal.any([e.signal, stop.signal]),
      logFile: e.logFile,
      maxOutput: 4_000_000,
    });
    if (run.stopped === LOG_FULL)
      notes.push(
        run.logProblem
          ? `stopped: its log could not be written (${run.logProblem})`
          : `stopped: its output passed ${LOG_MAX_BYTES / 1024 / 1024} MB (the log keeps the first ${LOG_MAX_BYTES / 1024 / 1024} MB)`,
      );
    if (timer) clearInterval(timer);
    // What it spent first: a spec's ending may read what that read (the rest of its log).
    const spent = cli.spent ? await cli.spent(run).catch(() => null) : null;
    return { run, cli, spent, ending: cli.ending?.(run) ?? {}, overrun, notes };
  } finally {
    if (timer) clearInterval(timer);
    await removeLogins(logins);
  }
}

/** How a session forkflush stopped ended (its deadline, its budget, else a crash); null: it ended on its own. */
export function stopExit(r: { stopped: string | null }, deadlineIsBudget: boolean): ExitReason | null {
  if (r.stopped === null) return null;
  if (r.stopped === 'timeout') return deadlineIsBudget ? 'budget' : 'timeout';
  return r.stopped === 'budget' ? 'budget' : 'crash';
}
