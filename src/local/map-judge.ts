// One call of the map's judge: a spec of a snapshot, or a triplet answer. The judge is an agent of
// any kind, run through the agent port (AgentAdapter.run) in the episode's sandbox: a fresh context,
// a box of its own (home, /tmp, prompt, usage file), its cwd read-only (a checkout of the snapshot
// for a spec, of the initial workspace for a triplet), the environment an agent gets (no forge
// credential) plus FORKFLUSH_MAP_STEP and, for a triplet, FORKFLUSH_TRIPLET_FILE (README, "Idea
// maps"). Its answer is its stdout (a command judge) or its final message (an agent CLI).
import { chmod, mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AgentAdapter } from '../agents/agent.js';
import { finalMessage } from '../agents/specs.js';
import { SMOKE_TIMEOUT_SECONDS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { couldNotStart } from '../core/failure.js';
import type { MapUnit } from '../core/map/config.js';
import { readTripletAnswer } from '../core/map/prompts.js';
import { MAP_SPEC_MAX_CHARS } from '../core/method.js';
import { cutText, failureLine, plainText } from '../core/text.js';
import { removeTree } from '../io/agent-files.js';
import type { RunResult, Spawner } from '../io/process.js';
import { NO_ACCOUNT } from '../io/sandbox.js';
import { agentConfinement, type Isolation, sessionSpawner } from '../worker/boundary.js';
import { startEgress } from '../worker/egress.js';
import { allowedEnv } from '../worker/env.js';

export type MapStep = 'spec' | 'triplet';

/** What every call of one map shares. */
export interface JudgeSetup {
  adapter: AgentAdapter;
  /** The judge's own agent keys (map.judge, or the task's agent). */
  judge: Config['agent'];
  /** The task's config, for the sandbox's extra paths (sandbox.read, sandbox.write). */
  config: Config;
  isolation: Isolation;
  /** The environment the judge's allowlist is taken from. */
  env: NodeJS.ProcessEnv;
  /** Where each call gets its folder (removed when it ends). */
  work: string;
  /** Where the logs of failed calls are kept. */
  failedLogs: string;
  /** forkflush's places the judge must never see (repositories, run folders). */
  hidden: string[];
  unit: MapUnit;
  signal: AbortSignal;
}

export interface JudgeCall {
  step: MapStep;
  /** `forkflush run --smoke`'s one call of the task's agent (cli/smoke.ts): no map step, and it is "the agent". */
  smoke?: boolean;
  /** A name for the call's folder and log, unique in the map (e.g. spec-<commit>). */
  name: string;
  prompt: string;
  /** The judge's working directory: made read-only by `prepare` (a spec) or already (a triplet). */
  cwd: string;
  /** Fills cwd before the call (a spec's checkout). */
  prepare?: (cwd: string) => Promise<void>;
  /** The triplet file's text. */
  triplet?: string;
  seed: number;
}

export type JudgeReply =
  | { ok: true; text: string; spent: number; note?: string }
  | { ok: false; error: string; spent: number; notStarted: boolean; log: string | null };

export class JudgeInterrupted extends Error {
  override name = 'JudgeInterrupted';
}

export async function askJudge(s: JudgeSetup, call: JudgeCall, allowance: number): Promise<JudgeReply> {
  const dir = join(s.work, call.name);
  if (await stat(dir).catch(() => null)) await removeTree(dir);
  const box = join(dir, 'box');
  const context = join(dir, 'context');
  for (const d of [join(box, 'home'), join(box, 'tmp'), context]) await mkdir(d, { recursive: true });
  try {
    if (call.prepare) {
      await call.prepare(call.cwd);
      // The smoke test's checkout is a copy of its own, writable as an episode's workspace is.
      if (!call.smoke) await readOnly(call.cwd);
    }
    const reply = await run(s, call, allowance, dir, box, context);
    if (!reply.ok) reply.log = await keepLog(s, call, join(dir, 'judge.log'));
    return reply;
  } finally {
    // One rm in this process, usually; a tree the judge locked against itself takes removeTree's.
    await rm(dir, { recursive: true, force: true }).catch(() => removeTree(dir).catch(() => {}));
  }
}

async function run(
  s: JudgeSetup,
  call: JudgeCall,
  allowance: number,
  dir: string,
  box: string,
  context: string,
): Promise<JudgeReply> {
  const promptFile = join(box, 'prompt.md');
  await writeFile(promptFile, call.prompt);
  const tripletFile = call.triplet === undefined ? null : join(box, 'triplet.json');
  if (tripletFile && call.triplet !== undefined) await writeFile(tripletFile, call.triplet);
  // The judge grades nothing: $FORKFLUSH_GRADE says so.
  const noGrader = join(box, 'no-grader');
  const noGraderSays = call.smoke
    ? 'forkflush smoke: the smoke test has no grader'
    : 'forkflush map: the judge has no grader';
  await writeFile(noGrader, `#!/bin/sh\necho '${noGraderSays}' >&2\nexit 2\n`, { mode: 0o755 });
  const sandbox = s.isolation.sandbox;
  const env: NodeJS.ProcessEnv = {
    ...allowedEnv(s.env, [...s.adapter.passEnv, ...s.judge.env]),
    HOME: join(box, 'home'),
    TMPDIR: sandbox ? '/tmp' : join(box, 'tmp'),
    ...(call.smoke ? {} : { FORKFLUSH_MAP_STEP: call.step }),
    ...(tripletFile ? { FORKFLUSH_TRIPLET_FILE: tripletFile } : {}),
  };
  const places = { workspace: call.cwd, context, box, objects: [], private: s.hidden };
  const agent = agentConfinement(places, s.config, s.env);
  // Its way out, as an agent's: forkflush's proxy, which holds its keys (worker/egress.ts).
  const egress = await startEgress({
    config: { agent: s.judge, setup: s.config.setup, sandbox: s.config.sandbox },
    env,
    machine: s.env,
    sandboxed: sandbox !== null,
  });
  // An account of its own for this call (its processes count against no other sandbox's limit).
  const account = sandbox?.account() ?? NO_ACCOUNT;
  try {
    // The judge writes its context and its box only; its cwd is bound read-only (the smoke test's: writable).
    const confinement = {
      ...agent,
      writable: call.smoke ? [call.cwd, context, box] : [context, box],
      readable: call.smoke ? agent.readable : [...agent.readable, call.cwd],
      shared: [...(agent.shared ?? []), ...(egress.bind ? [egress.bind] : [])],
      account,
    };
    const confined = sessionSpawner(sandbox, confinement, { context, box }, undefined, egress.wrap);
    return await judged(s, call, allowance, { box, context, promptFile, noGrader, env: egress.env, confined, dir });
  } finally {
    account.release();
    await egress.close();
  }
}

/** The judge's run, behind its proxy: its answer, or why there is none. */
async function judged(
  s: JudgeSetup,
  call: JudgeCall,
  allowance: number,
  o: {
    box: string;
    context: string;
    promptFile: string;
    noGrader: string;
    env: NodeJS.ProcessEnv;
    confined: Spawner;
    dir: string;
  },
): Promise<JudgeReply> {
  const { box, context, promptFile, noGrader, env, confined, dir } = o;
  const sandbox = s.isolation.sandbox;
  const logFile = join(dir, 'judge.log');
  let main: RunResult | null = null;
  let notStarted = false;
  const spawn: Spawner = async (file, args, options) => {
    const r = await confined(file, args, options);
    // The CLI's own run writes the session's log; other processes an adapter starts do not.
    if (options.logFile === logFile) main = r;
    if (r.stopped === null && couldNotStart(r)) notStarted = true;
    return r;
  };
  const timeoutMs = s.judge.timeout * 1000;
  const budgetMs = s.unit === 'minutes' ? allowance * 60_000 : Number.POSITIVE_INFINITY;
  const outcome = await s.adapter.run({
    workdir: call.cwd,
    prompt: call.prompt,
    promptFile,
    contextDir: context,
    usageFile: join(box, 'usage.json'),
    logFile,
    gradeCommand: noGrader,
    allowance,
    unit: s.unit,
    seed: call.seed,
    episodeId: `map-${call.step}`,
    deadlineMs: Math.min(budgetMs, timeoutMs),
    deadlineIsBudget: budgetMs <= timeoutMs,
    env,
    signal: s.signal,
    spawn,
    confined: sandbox !== null,
  });
  if (s.signal.aborted) throw new JudgeInterrupted(`the map's ${call.step} call was interrupted`);
  const spent = s.unit === 'minutes' ? outcome.seconds / 60 : (outcome.reportedSpend ?? (notStarted ? 0 : allowance));
  const r = main as RunResult | null;
  const who = call.smoke ? 'the agent' : 'the judge';
  const fail = (error: string) => ({ ok: false as const, error: `${who} ${error}`, spent, notStarted, log: null });
  if (notStarted || !r) {
    const why = r ? (r.spawnError ?? failureLine(r.stderr || r.stdout)) : outcome.note;
    return { ...fail(`could not start${why ? `: ${why}` : ''}`), notStarted: true };
  }
  if (outcome.exit !== 'finished')
    return fail(exitProblem(outcome.exit, r, outcome.note, allowance, s.unit, call.smoke === true));
  if (r.outputCut) return fail('printed more than forkflush keeps of its output; its answer was cut');
  const text = finalMessage(s.judge.kind, r.stdout);
  if (text === null) return fail('gave no final message');
  return call.step === 'spec'
    ? specReply(text, spent, call.smoke === true)
    : tripletReply(text, spent, s.judge.kind === 'command');
}

function specReply(text: string, spent: number, smoke: boolean): JudgeReply {
  // Its whole stdout, as plain text: what the judge printed reaches other prompts and files.
  const spec = plainText(text);
  if (spec.trim() === '') {
    const error = smoke ? 'the agent answered nothing (its final message is empty)' : 'the judge printed an empty spec';
    return { ok: false, error, spent, notStarted: false, log: null };
  }
  if (spec.length <= MAP_SPEC_MAX_CHARS) return { ok: true, text: spec, spent };
  return {
    ok: true,
    text: cutText(spec, MAP_SPEC_MAX_CHARS, `… (cut: the spec had ${spec.length} characters)`),
    spent,
    note: `a spec of ${spec.length} characters was cut to ${MAP_SPEC_MAX_CHARS}`,
  };
}

function tripletReply(text: string, spent: number, strict: boolean): JudgeReply {
  const read = readTripletAnswer(text, strict);
  if ('problem' in read) return { ok: false, error: read.problem, spent, notStarted: false, log: null };
  return { ok: true, text: read.answer, spent };
}

function exitProblem(
  exit: string,
  r: RunResult,
  note: string | undefined,
  allowance: number,
  unit: string,
  smoke: boolean,
): string {
  if (exit === 'budget') return `passed its allowance of ${allowance.toPrecision(4)} ${unit} and was stopped`;
  const limit = smoke
    ? `the smoke test's time (agent.timeout, at most ${SMOKE_TIMEOUT_SECONDS} s)`
    : 'map.judge.timeout (its agent.timeout)';
  if (exit === 'timeout')
    return `ran past ${limit} and was stopped${note ? ` (${note})` : ''}: its log says where it waited`;
  const line = failureLine(r.stderr || r.stdout);
  const how = r.signal ? `was killed by ${r.signal}` : `exited with code ${r.exitCode}`;
  return `${how}${line ? `: ${line}` : note ? `: ${note}` : ''}`;
}

/** Keeps a failed call's log (its folder goes); the path, or null when it left none. */
async function keepLog(s: JudgeSetup, call: JudgeCall, log: string): Promise<string | null> {
  const size = await stat(log).then(
    (x) => x.size,
    () => -1,
  );
  if (size < 0) return null;
  await mkdir(s.failedLogs, { recursive: true });
  const kept = join(s.failedLogs, `${call.name}.log`);
  await rename(log, kept).catch(() => {});
  return kept;
}

/** Every file and folder under `dir` read-only (the sandbox also binds it so; this holds without it). */
export async function readOnly(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) await readOnly(path);
    else if (e.isFile()) await chmod(path, 0o444);
  }
  await chmod(dir, 0o555);
}
