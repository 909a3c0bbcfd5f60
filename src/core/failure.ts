// How an agent failed, as its spec recognises it (from its exit code, stderr and output stream),
// and what the run does about each kind. Real agents fail in known ways: a permanent failure
// (a bad key, an exhausted plan, an unknown model, a missing CLI, a path the sandbox hides) fails
// every later episode the same way, so the run stops before it spends more; a transient one (a
// rate limit, an overloaded provider, a dropped connection) is retried within the episode's
// allowance and time; a crash of unknown cause is the agent's own result, and the run stops only
// when crashes repeat. Also here, pure, for every spec to share: the common shapes of providers'
// error text (recognizeFailure), paths an error says were not found (notFoundPaths), and the wait
// before a retry (retryWait).

import { FAILURE_QUOTE_MAX_CHARS, FAILURE_READ_MAX_LINES, NOT_STARTED_WITHIN_MS } from './bounds.js';
import { AGENT_TRIES, RETRY_FIRST_WAIT_SECONDS, RETRY_MAX_WAIT_SECONDS } from './method.js';

/** Failures that fail every later episode the same way: the run stops before the next one. */
export const PERMANENT_FAILURES = ['auth', 'quota', 'model', 'cli', 'hidden-path', 'egress'] as const;
/** Failures that pass: the episode is retried with backoff, within its allowance and time. */
export const TRANSIENT_FAILURES = ['rate-limit', 'overload', 'network'] as const;

export type PermanentFailure = (typeof PERMANENT_FAILURES)[number];
export type TransientFailure = (typeof TRANSIENT_FAILURES)[number];
/** `crash`: the agent ended in error for a reason nobody recognised. */
export type FailureKind = PermanentFailure | TransientFailure | 'crash';

export const FAILURE_KINDS = [
  ...PERMANENT_FAILURES,
  ...TRANSIENT_FAILURES,
  'crash',
] as const satisfies readonly FailureKind[];

/** What an agent's failure was, in its own words and forkflush's. */
export interface AgentFailure {
  kind: FailureKind;
  /** The agent's own line that says so (one line, as it printed it, cut to a few hundred characters). */
  quote: string;
  /** What to do about it, in forkflush's words ("set ANTHROPIC_API_KEY", "add /opt/x to sandbox.read"). */
  fix?: string;
  /** How long the provider asked to wait before the next try (a 429's retry-after), in milliseconds. */
  retryAfterMs?: number;
}

export function isPermanent(kind: FailureKind): kind is PermanentFailure {
  return (PERMANENT_FAILURES as readonly string[]).includes(kind);
}

export function isTransient(kind: FailureKind): kind is TransientFailure {
  return (TRANSIENT_FAILURES as readonly string[]).includes(kind);
}

/** What each kind is, in the words of a stop line ("the agent failed in r0.b1: its key was refused"). */
export const FAILURE_WHAT: Record<FailureKind, string> = {
  auth: 'its key or login was refused',
  quota: 'its plan or quota is used up',
  model: 'its model does not exist, or its key may not use it',
  cli: 'it could not start',
  'hidden-path': 'it needs a path the sandbox hides',
  egress: "it needs a host its sandbox's network does not allow",
  'rate-limit': "its provider's rate limit kept refusing it",
  overload: 'its provider stayed overloaded',
  network: 'it could not reach its provider',
  crash: 'it crashed',
};

/**
 * What to do about each kind, when the agent's spec says nothing better. "Resume the run" where
 * the fix lies outside the run's config (a key, a quota, the network): a run keeps the config it
 * started with, so a fix to it needs a new run.
 */
export const GENERIC_FIX: Record<FailureKind, string> = {
  auth: 'check the key or login the agent uses (the variables it needs listed in agent.env, the key not expired), then resume the run',
  quota: "raise the agent's plan or quota, or wait until it resets, then resume the run",
  model: 'correct the model (agent.model, or the model in agent.args or agent.command), then start a new run',
  cli: 'check agent.command (and agent.kind): install what it runs, or correct it and start a new run',
  'hidden-path':
    'add the folder to sandbox.read in the config, or move the file into the repository, then start a new run',
  egress:
    'if the agent needs the host, allow it in the config (sandbox: {network: {allow: [host]}}), then start a new run',
  'rate-limit': 'wait, or run fewer episodes at once (--concurrency 1), then resume the run',
  overload: 'wait until the provider is back, then resume the run',
  network: 'check the network (and a proxy) between this machine and the provider, then resume the run',
  crash:
    'run the agent by hand on the task to see why it fails; fix it, then resume the run (a fix in the config or in committed files needs a new run: a resume keeps both as the run began)',
};

/** Whether a failure's fix is outside the run's config, so that a resume can succeed where the run stopped. */
export function resumableFailure(kind: FailureKind): boolean {
  return kind !== 'model' && kind !== 'cli' && kind !== 'hidden-path' && kind !== 'egress';
}

/** A connection that dropped or never opened, by its error codes (whole words) and messages. */
export const DROPPED =
  /\b(?:ECONNRESET|ECONNREFUSED|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH|UND_ERR_CONNECT_TIMEOUT)\b|socket hang up|fetch failed|connection (?:reset|refused|error)|getaddrinfo|network error/i;

// Common shapes of a provider's or a CLI's error text, most severe first: a line that names a
// permanent failure wins over one that names a transient one (OpenAI's "exceeded your current
// quota" comes with a 429). Each is matched on one line at a time.
const SHAPES: { kind: Exclude<FailureKind, 'crash' | 'cli' | 'hidden-path'>; re: RegExp }[] = [
  {
    kind: 'auth',
    re: /invalid[ _-]?x-api-key|invalid[ _-]api[ _-]key|incorrect api key|api key not valid|invalid_api_key|authentication_error|authentication failed|invalid authentication|invalid bearer token|does not have permission to use|oauth token has expired|not logged in|please run \/login|permission_error|\bunauthori[sz]ed\b|(?:status|error|code|http)\W{0,3}(?:code\W{0,3})?40[13]\b|\b40[13]\W{0,3}(?:unauthori[sz]ed|forbidden)/i,
  },
  {
    kind: 'quota',
    re: /insufficient_quota|exceeded your current quota|quota (?:exceeded|exhausted)|credit balance is too low|out of credits|usage limit (?:reached|exceeded)|hit your usage limit|billing (?:hard )?limit|plan limit/i,
  },
  {
    kind: 'model',
    re: /model_not_found|(?:unknown|invalid|unsupported) model\b|\bmodel\b[^\n]{0,80}\b(?:not found|does not exist|is not supported|not available|unknown)|not_found_error[^\n]{0,80}\bmodel\b/i,
  },
  {
    kind: 'rate-limit',
    re: /rate[ _-]?limit|too many requests|resource_exhausted|(?:status|error|code|http)\W{0,3}(?:code\W{0,3})?429\b|\b429\W{0,3}(?:too many|rate)/i,
  },
  {
    kind: 'overload',
    re: /overloaded|service unavailable|bad gateway|internal server error|server is busy|(?:status|error|code|http)\W{0,3}(?:code\W{0,3})?(?:500|502|503|504|529)\b|\b(?:502|503|529)\W{0,3}(?:service|bad|overloaded)/i,
  },
  { kind: 'network', re: DROPPED },
];

/**
 * The failure an agent's error text names, by the common shapes of providers' and CLIs' errors
 * (401/403 and a refused key, an exhausted quota, an unknown model, 429 and its retry-after,
 * 529/503 and overload, a reset or unresolved connection), or null when it names none of them.
 * For the command agent, and for any agent whose spec recognised nothing; pure, so each spec can
 * call it on its CLI's stderr. A path not found is `notFoundPaths`' (the caller knows what is hidden).
 */
export function recognizeFailure(text: string): AgentFailure | null {
  const lines = text
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .slice(-FAILURE_READ_MAX_LINES)
    .map((l) => l.trim())
    .filter(Boolean);
  for (const { kind, re } of SHAPES) {
    const line = lines.find((l) => re.test(l));
    if (line === undefined) continue;
    const wait = retryAfterMs(lines);
    return {
      kind,
      quote: quoteLine(line),
      fix: GENERIC_FIX[kind],
      ...(wait !== null && isTransient(kind) ? { retryAfterMs: wait } : {}),
    };
  }
  return null;
}

/** Provider statuses, as every CLI passes them on: what failed, and whether it passes. */
const STATUS: [RegExp, FailureKind][] = [
  [/^40[13]$/, 'auth'],
  [/^402$/, 'quota'],
  [/^404$/, 'model'],
  [/^429$/, 'rate-limit'],
  [/^(50[0234]|529)$/, 'overload'],
];

/** Where a CLI comes from (an agent spec's `cli`). */
export interface InstallFacts {
  package: string;
  installer: 'npm' | 'pip';
}

/** How a user installs a CLI. */
export function installCommand(cli: InstallFacts): string {
  return `${cli.installer === 'npm' ? 'npm i -g' : 'pip install'} ${cli.package}`;
}

/** What a crashed session's fix names of its agent kind (an agent spec's facts). */
export interface FailingAgent {
  name: string;
  cli?: (InstallFacts & { secret: { name: string; note: string } }) | undefined;
}

/** A crashed session: its exit, and the line that says why (`status`: the provider's, where the CLI states it apart). */
export interface Crash {
  exitCode: number | null;
  spawnError?: string | undefined;
  ms: number;
  quote: string;
  status?: number | null | undefined;
}

/** A command that never ran: it could not be spawned, or exited 126/127 at once. */
export function couldNotStart(r: { spawnError?: string | undefined; exitCode: number | null; ms: number }): boolean {
  return r.spawnError !== undefined || ((r.exitCode === 126 || r.exitCode === 127) && r.ms < NOT_STARTED_WITHIN_MS);
}

/**
 * Why a crashed session failed, from the provider's status (or the one its line quotes: "API Error:
 * 401", "(HTTP 503)"), a dropped connection, a CLI that could not start, or a command agent's sysexits
 * code (75 EX_TEMPFAIL passes, 77 EX_NOPERM is its login). Null: a crash nobody recognised (the
 * runner then tries the common shapes of its output, recognizeFailure).
 */
export function failureOf(agent: FailingAgent, c: Crash): AgentFailure | null {
  const { quote } = c;
  const code = String(
    c.status ?? /(?:\b(?:status|HTTP|API Error|Error code):?\s*|"code":\s*)(\d{3})\b/i.exec(quote)?.[1] ?? '',
  );
  // A dropped connection first: forkflush's proxy answers one with a 502 that quotes it.
  let kind: FailureKind | null = DROPPED.test(quote) ? 'network' : (STATUS.find(([re]) => re.test(code))?.[1] ?? null);
  if (kind === 'rate-limit' && /quota|billing|credit/i.test(quote)) kind = 'quota';
  if (!kind && couldNotStart(c)) kind = 'cli';
  if (!kind && !agent.cli && c.exitCode === 75) kind = 'overload';
  if (!kind && !agent.cli && c.exitCode === 77) kind = 'auth';
  if (!kind) return null;
  const secret = agent.cli?.secret;
  const fix: Partial<Record<FailureKind, string>> = {
    auth: secret
      ? `set ${secret.name} (${secret.note}) to a key or login that works`
      : 'give the agent a key that works (agent.env)',
    quota: GENERIC_FIX.quota,
    model: 'set agent.model to a model the provider has',
    cli: agent.cli
      ? `install ${agent.name} (${installCommand(agent.cli)}), or point agent.command at it`
      : 'correct agent.command',
  };
  const wait = isTransient(kind) ? retryAfterMs([quote]) : null;
  return {
    kind,
    quote: quoteLine(quote || agent.name),
    ...(fix[kind] ? { fix: fix[kind] } : {}),
    ...(wait !== null ? { retryAfterMs: wait } : {}),
  };
}

/** One line of an agent's output, as a failure quotes it: no control characters, cut. */
export function quoteLine(line: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what is removed
  const clean = line.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ').trim();
  return clean.length > FAILURE_QUOTE_MAX_CHARS ? `${clean.slice(0, FAILURE_QUOTE_MAX_CHARS - 1)}…` : clean;
}

/** How long a provider asked to wait, in milliseconds: retry-after (seconds), "try again in 20s", retryDelay. */
export function retryAfterMs(lines: string[]): number | null {
  const units: Record<string, number> = {
    ms: 1,
    s: 1000,
    sec: 1000,
    second: 1000,
    seconds: 1000,
    m: 60_000,
    min: 60_000,
    minute: 60_000,
    minutes: 60_000,
  };
  for (const line of [...lines].reverse()) {
    const header =
      /retry[-_ ]after(?:[-_ ]ms)?["']?\s*[:=]?\s*["']?(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?)?\b/i.exec(
        line,
      );
    if (header) {
      const ms = /after[-_ ]ms/i.test(header[0]) ? 1 : (units[(header[2] ?? 's').toLowerCase()] ?? 1000);
      return Math.round(Number(header[1]) * ms);
    }
    const again = /(?:try again|retry) in (\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?)\b/i.exec(line);
    if (again) return Math.round(Number(again[1]) * (units[(again[2] as string).toLowerCase()] ?? 1000));
    const delay = /retryDelay["']?\s*:\s*["'](\d+(?:\.\d+)?)s["']/i.exec(line);
    if (delay) return Math.round(Number(delay[1]) * 1000);
  }
  return null;
}

/**
 * Paths and programs an agent's error text says were not found: a shell's "x: not found", node's
 * "Cannot find module '/x'", python's "can't open file '/x'", bwrap's and setpriv's failed exec,
 * ENOENT with a path. The caller decides which of them the sandbox hides (it exists outside).
 */
export function notFoundPaths(text: string): string[] {
  const found = new Set<string>();
  const patterns = [
    /(?:^|:\s)([^\s:'"]+): (?:command )?not found\b/gm,
    /Cannot find module '([^']+)'/g,
    /can't open file '([^']+)'/g,
    /\bcannot open ([^\s:]+):? No such file/gi,
    /\bCan't open ([^\s:]+)/g,
    /(?:execvp|failed to execute|exec) ([^\s:]+): No such file or directory/g,
    /ENOENT[^'\n]*'([^']+)'/g,
    /^(?:[^\s:]+: (?:line )?\d+: )?([^\s:]+): No such file or directory$/gm,
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) if (m[1]) found.add(m[1]);
  return [...found].filter((p) => p.length < 4096 && !/^\d+$/.test(p));
}

/**
 * How long to wait before the next try of an episode whose try `failedTries` (1, 2, ...) failed
 * in a way that passes, in milliseconds; or why not to try again. Backoff: RETRY_FIRST_WAIT_SECONDS,
 * three times that, ..., at most RETRY_MAX_WAIT_SECONDS, and never less than the provider's
 * retry-after; a little jitter from the episode's seed keeps K branches refused at once from
 * retrying at once (the same seed, the same wait). The caller checks the wait fits the episode's time.
 */
export function retryWait(
  failedTries: number,
  failure: AgentFailure,
  seed: number,
): { waitMs: number } | { giveUp: string } {
  if (failedTries >= AGENT_TRIES) return { giveUp: `${failedTries} tries failed (at most ${AGENT_TRIES})` };
  const max = RETRY_MAX_WAIT_SECONDS * 1000;
  if (failure.retryAfterMs !== undefined && failure.retryAfterMs > max)
    return {
      giveUp: `the provider asked to wait ${Math.round(failure.retryAfterMs / 1000)} s, more than ${RETRY_MAX_WAIT_SECONDS} s`,
    };
  const backoff = RETRY_FIRST_WAIT_SECONDS * 1000 * 3 ** (failedTries - 1);
  const jitter = 1 + (((Math.abs(seed) * 7919 + failedTries * 104729) % 1000) / 1000) * 0.2;
  return { waitMs: Math.min(max, Math.max(failure.retryAfterMs ?? 0, Math.round(backoff * jitter))) };
}
