// What a command of the CLI reads and writes: the process's streams, clock, signal and environment
// (tests pass their own).

export interface Io {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  /** For questions (forkflush init); a terminal when isTTY. */
  stdin?: NodeJS.ReadStream;
  now: () => Date;
  /** Set when the user asks to stop (Ctrl-C). */
  signal?: AbortSignal;
  /** A wait that ends early when the signal aborts (tests: none); retries' and an outage's waits. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  env?: NodeJS.ProcessEnv;
}
