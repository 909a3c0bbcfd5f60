import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOG_FULL, runShell } from '../../src/io/process.js';
import { descendants } from '../../src/io/process-tree.js';

// A killed orphan may stay a zombie when PID 1 does not reap (containers): that is dead too.
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
};

describe('runShell stops', () => {
  it('kills a descendant that left the process group for a session of its own', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'forkflush-proc-'));
    // setsid puts sleep in a new session and group, out of reach of a group signal: Codex does
    // this with the commands its model runs.
    const result = await runShell("setsid sh -c 'echo $$ > stray.pid; exec sleep 30' & sleep 30", {
      cwd: dir,
      timeoutMs: 500,
      killAfterMs: 200,
    });
    expect(result.stopped).toBe('timeout');
    // The stray holds the output pipes: the run only ends early if the stray is killed.
    // (Far below the stray's 30 s, with room for a busy machine.)
    expect(result.ms).toBeLessThan(15_000);
    const stray = Number(readFileSync(join(dir, 'stray.pid'), 'utf8'));
    await new Promise((r) => setTimeout(r, 300));
    expect(alive(stray)).toBe(false);
  });

  it("a timeout past what Node's timers hold (24.8 days) does not fire at once", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'forkflush-proc-'));
    const result = await runShell('sleep 0.3; echo done', { cwd: dir, timeoutMs: 30 * 24 * 3_600_000 });
    expect(result.stopped).toBeNull();
    expect(result.stdout.trim()).toBe('done');
  });

  it('finds the whole tree below a process', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'forkflush-proc-'));
    const running = runShell("sh -c 'echo $$ > inner.pid; sleep 30' & echo $$ > outer.pid; wait", {
      cwd: dir,
      timeoutMs: 1500,
      killAfterMs: 100,
    });
    await new Promise((r) => setTimeout(r, 400));
    const outer = Number(readFileSync(join(dir, 'outer.pid'), 'utf8'));
    const inner = Number(readFileSync(join(dir, 'inner.pid'), 'utf8'));
    const tree = descendants(outer);
    expect(tree).toContain(inner);
    expect(tree.length).toBeGreaterThanOrEqual(2); // the inner shell and its sleep
    expect(descendants(inner).length).toBe(1);
    await running;
  });
});

describe('the log file', () => {
  it('stops a command whose output passes the limit, and keeps the log to it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'forkflush-proc-'));
    const logFile = join(dir, 'agent.log');
    // It would print forever: only the limit ends it.
    const r = await runShell('yes forkflush', { cwd: dir, logFile, logMaxBytes: 1_000_000, timeoutMs: 60_000 });
    expect(r.stopped).toBe(LOG_FULL);
    const log = readFileSync(logFile, 'utf8');
    expect(log.length).toBeLessThan(1_001_000);
    expect(log.startsWith('forkflush\nforkflush\n')).toBe(true);
    expect(log).toContain('[forkflush: the output passed 1000000 bytes here; the command was stopped]');
  });

  it('stops a command whose log cannot be written (a full disk), and says why', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'forkflush-proc-'));
    // /dev/full answers every write with ENOSPC, as a full disk does.
    const r = await runShell('yes forkflush', { cwd: dir, logFile: '/dev/full', timeoutMs: 60_000 });
    expect(r.stopped).toBe(LOG_FULL);
    expect(r.logProblem).toMatch(/ENOSPC/);
    expect(r.stdout.length).toBeGreaterThan(0);
  });
});

describe('runShell keeps the end of its output', () => {
  it('keeps the last maxOutput characters of each stream and says it cut them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'forkflush-proc-'));
    // 5 MB of "a" then a marker, and a short stderr that is kept whole.
    const r = await runShell("head -c 5000000 /dev/zero | tr '\\0' a; printf END; printf oops >&2", {
      cwd: dir,
      maxOutput: 1000,
    });
    expect(r.stdout).toHaveLength(1000);
    expect(r.stdout.endsWith('aaaEND')).toBe(true);
    expect(r.stderr).toBe('oops');
    expect(r.outputCut).toBe(true);
    const whole = await runShell('printf short', { cwd: dir, maxOutput: 1000 });
    expect(whole.stdout).toBe('short');
    expect(whole.outputCut).toBeUndefined();
  });
});
