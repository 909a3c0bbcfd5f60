// The CLI in-process, with its streams captured and its clock fixed.
import { PassThrough } from 'node:stream';
import { type Io, main } from '../../src/cli/main.js';

export interface CliResult {
  code: number;
  out: string;
  err: string;
}

const FIXED = new Date('2026-11-30T10:00:00Z');

function stream(add: (s: string) => void, isTTY: boolean): NodeJS.WriteStream {
  return {
    write: (s: string) => {
      add(s);
      return true;
    },
    isTTY,
    columns: 100,
  } as unknown as NodeJS.WriteStream;
}

/**
 * Runs `forkflush ARGV`. With `answers`, stdin is a terminal that types the next answer each time
 * a question (a line ending in "?: " or "]: ") is printed.
 */
export async function cliWith(
  argv: string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    tty?: boolean;
    answers?: string[];
    now?: Date;
    signal?: AbortSignal;
    sleep?: Io['sleep'];
  } = {},
): Promise<CliResult> {
  let out = '';
  let err = '';
  const answers = [...(opts.answers ?? [])];
  const input = opts.answers ? new PassThrough() : null;
  if (input) Object.assign(input, { isTTY: true });
  const io: Io = {
    stdout: stream((s) => {
      out += s;
      if (input && /[?\]]: $/.test(s) && answers.length > 0) setImmediate(() => input.write(`${answers.shift()}\n`));
    }, opts.tty ?? false),
    stderr: stream((s) => (err += s), false),
    now: () => opts.now ?? FIXED,
    ...(input ? { stdin: input as unknown as NodeJS.ReadStream } : {}),
    env: opts.env ?? plainEnv(),
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.sleep ? { sleep: opts.sleep } : {}),
  };
  const code = await main(argv, io);
  return { code, out, err };
}

/** The environment without colour settings, so that output does not depend on the machine's. */
export function plainEnv(): NodeJS.ProcessEnv {
  const { NO_COLOR: _n, FORCE_COLOR: _f, ...env } = process.env;
  return env;
}

export const cli = (...argv: string[]): Promise<CliResult> => cliWith(argv);

/** Runs the CLI and stops it (Ctrl-C) once `runs` runs of a compare or probe have finished. */
export async function interruptAfter(argv: string[], runs: number): Promise<CliResult> {
  const stop = new AbortController();
  let out = '';
  let err = '';
  let finished = 0;
  const io: Io = {
    stdout: stream((s) => {
      out += s;
      finished += (s.match(/\) finished: /g) ?? []).length;
      if (finished >= runs) stop.abort();
    }, false),
    stderr: stream((s) => {
      err += s;
    }, false),
    stdin: new PassThrough() as unknown as NodeJS.ReadStream,
    now: () => FIXED,
    signal: stop.signal,
    env: plainEnv(),
  };
  const code = await main(argv, io);
  return { code, out, err };
}

/** The lines of stderr that are forkflush's own (not the progress). */
export const said = (err: string): string[] => err.split('\n').filter((l) => l.startsWith('forkflush: '));
