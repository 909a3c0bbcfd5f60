// The real CLI as a child process a test stops, freezes and continues (test/integration/laptop-night*.test.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { currentCli } from '../attacks/helpers.js';

export { descendants } from '../../src/io/process-tree.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `ok()` or the deadline; whether it held. */
export async function until(ok: () => boolean, ms: number, every = 20): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (ok()) return true;
    await sleep(every);
  }
  return ok();
}

export interface Cli {
  child: ChildProcess;
  out: () => string;
  ended: Promise<{ code: number | null; out: string }>;
}

/** `forkflush ARGS` as a child process leading a group of its own, as a shell's job does. */
export async function startCli(args: string[], cwd: string): Promise<Cli> {
  const cli = await currentCli();
  const child = spawn(process.execPath, [cli, ...args], {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8', TMPDIR: process.env.TMPDIR },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (out += d));
  const ended = new Promise<{ code: number | null; out: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, out })),
  );
  return { child, out: () => out, ended };
}

export const signal = (pids: number[], sig: NodeJS.Signals) => {
  for (const p of pids) {
    try {
      process.kill(p, sig);
    } catch {}
  }
};

/** A process's state letter from /proc (T: stopped), or '' once it is gone. */
export function stateOf(pid: number): string {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return st.slice(st.lastIndexOf(')') + 2, st.lastIndexOf(')') + 3);
  } catch {
    return '';
  }
}
