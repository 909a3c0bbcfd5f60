import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { descendants, runShell } from '../../src/io/process.js';

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
    expect(result.ms).toBeLessThan(5000);
    const stray = Number(readFileSync(join(dir, 'stray.pid'), 'utf8'));
    await new Promise((r) => setTimeout(r, 300));
    expect(alive(stray)).toBe(false);
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
