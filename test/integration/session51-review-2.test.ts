// Review of today's fixes (session 51, second look): usage figures that cannot be counted, a
// re-run's earlier attempts' charge, and Ctrl-Z's stop of forkflush's commands. Each row failed
// before its fix: core/usage.ts shareOf keeps a model whose figures are not counts, core/stop.ts
// withoutResult keeps a re-run's earlierSpent charged, and stopWithCommands spares the group keeper.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import BUNDLE_OPTIONS from '../../scripts/bundle-options.json' with { type: 'json' };
import { readCostState } from '../../src/agents/claude-code.js';
import { spent } from '../../src/core/budget.js';
import type { EpisodeResult } from '../../src/core/state.js';
import { retryStopped } from '../../src/core/stop.js';
import { spentSince, unsureFigures, usageOf } from '../../src/core/usage.js';
import { openingRound } from '../unit/helpers.js';

const temps: string[] = [];
const pids: number[] = [];
afterAll(() => {
  for (const pid of pids)
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

describe('a usage figure that cannot be counted', () => {
  // Claude Code stopped (a time limit, forkflush's budget watcher) writes a cost-state row; a provider
  // that sent its counts as strings (or below zero) leaves figures there that are not counts. Now
  // shareOf drops a model none of whose figures is above 0 (NaN > 0 is false), so the tally is {},
  // unsureFigures finds nothing and the episode is charged a measured 0. It should stay unknown.
  it('a model whose running totals are not counts stays in the share: the spend is unknown, not a certain 0', () => {
    const row = {
      type: 'cost-state',
      modelUsage: {
        'claude-x': {
          inputTokens: '01200950',
          outputTokens: '08040',
          cacheReadInputTokens: 0,
          cacheCreationInputTokens: 0,
          costUSD: 0,
        },
      },
    };
    const after = readCostState(`${JSON.stringify(row)}\n`);
    expect(after).not.toBeNull();
    const s = spentSince(null, after ?? {});
    // Not "answered": the session was stopped, so only the figures can say the spend is unknown.
    expect(unsureFigures(s.tally, false)).not.toBeNull();
    expect(usageOf(s).inputTokens).not.toBe(0);
  });
});

describe("a GitHub re-run's charge for the attempts before it (earlierSpent)", () => {
  const key = { kind: 'auth' as const, quote: 'Error: 401 invalid x-api-key' };

  // A re-run job (attempt 2) whose agent then failed on its key stops the run; `/autoresearch resume`
  // clears that result (retryStopped -> withoutResult), which keeps result.spent as interruptedSpent
  // but forgets result.earlierSpent: the run's spend drops by the attempt before it (24 here), and by
  // it too when the re-run spent nothing (`!(spent > 0)` returns the episode bare).
  it('a resume after a stop keeps charged what the attempts before a re-run may have spent', () => {
    for (const own of [0.4, 0]) {
      const failed: Partial<EpisodeResult> = { exit: 'crash', failure: key, spent: own, earlierSpent: 24 };
      const s = openingRound(5, [{ score: 5 }, failed, { score: 3 }], false);
      const retried = retryStopped(s);
      expect(retried).not.toBeNull();
      expect(spent(retried?.state ?? s), `the re-run spent ${own} itself`).toBeCloseTo(spent(s), 6);
    }
  });
});

/** A process's state letter from /proc (T: stopped), or null when it is gone. */
function stateOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}

/** The pids whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

async function until(ok: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (ok()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return ok();
}

describe('Ctrl-Z (stopWithCommands) and the group keeper', () => {
  // A forkflush stopped by Ctrl-Z and then killed (`kill -9 %1`, the OOM killer): stopWithCommands
  // SIGSTOPs every descendant, the group keeper (io/group-keeper.ts) too, so it never reads the end
  // of its pipe and the unconfined command stays stopped forever (state T), its group orphaned. The
  // keeper is no command: it should be left running, so that it stops the commands as it does for
  // a forkflush killed while running (checked first below).
  it('a forkflush killed while stopped by Ctrl-Z leaves no command of its behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ff-selfrev2-'));
    temps.push(dir);
    const { build } = await import('esbuild');
    const entry = join(dir, 'entry.ts');
    const src = join(import.meta.dirname, '..', '..', 'src', 'io', 'process.ts');
    writeFileSync(
      entry,
      `import { runProcess, stopWithCommands } from ${JSON.stringify(src)};
process.on('SIGTSTP', stopWithCommands);
void runProcess('/bin/sh', ['-c', 'echo $$ > ' + process.argv[2] + '; exec sleep 600'], { cwd: '/' });
setInterval(() => {}, 1000);
`,
    );
    await build({
      entryPoints: [entry],
      outfile: join(dir, 'entry.mjs'),
      ...BUNDLE_OPTIONS,
      logLevel: 'error',
    } as never);
    const run = async (ctrlZ: boolean) => {
      const pidFile = join(dir, `cmd-${ctrlZ}`);
      const node = spawn(process.execPath, [join(dir, 'entry.mjs'), pidFile], { stdio: 'ignore', detached: true });
      pids.push(node.pid as number);
      expect(await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', 30_000)).toBe(true);
      const cmd = Number(readFileSync(pidFile, 'utf8').trim());
      pids.push(cmd);
      if (ctrlZ) {
        process.kill(node.pid as number, 'SIGTSTP');
        expect(await until(() => stateOf(node.pid as number) === 'T' && stateOf(cmd) === 'T', 30_000)).toBe(true);
      }
      // Its keeper too, to end it after the row (it is this test's process, stopped or not).
      pids.push(...childrenOf(node.pid as number));
      process.kill(node.pid as number, 'SIGKILL');
      // The keeper's TERM, a second, then KILL: generous on a busy machine.
      const gone = await until(() => stateOf(cmd) === null || stateOf(cmd) === 'Z', 20_000);
      return { gone, state: gone ? 'gone' : stateOf(cmd) };
    };
    expect(await run(false)).toEqual({ gone: true, state: 'gone' });
    expect(await run(true)).toEqual({ gone: true, state: 'gone' });
  }, 120_000);
});
