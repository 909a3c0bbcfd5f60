// How an agent failed, as its spec recognises it (from its exit code, stderr and output stream),
// and what the run does about each kind. Real agents fail in known ways: a permanent failure
// (a bad key, an exhausted plan, an unknown model, a missing CLI, a path the sandbox hides) fails
// every later episode the same way, so the run stops before it spends more; a transient one (a
// rate limit, an overloaded provider, a dropped connection) is retried within the episode's
// allowance and time; a crash of unknown cause is the agent's own result, and the run stops only
// when crashes repeat.

/** Failures that fail every later episode the same way: the run stops before the next one. */
export const PERMANENT_FAILURES = ['auth', 'quota', 'model', 'cli', 'hidden-path'] as const;
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
