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
  env?: NodeJS.ProcessEnv;
}
