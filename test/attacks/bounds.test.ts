// Hostile agents that try to outlive their episode or stretch it past agent.timeout.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import {
  cleanupAttackTemps,
  describeSandboxed,
  fingerprint,
  makeAttackRepo,
  processesWith,
  runLocal,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeSandboxed('escaping the episode in time (local run)', () => {
  it('daemons left by setsid, setsid -f, a double fork, nohup, a SIGTERM-proof one and a nested namespace all die with the episode', async () => {
    const marker = unique('ff-daemons');
    const repo = makeAttackRepo({ agent: `sh {fx}/daemons.sh {logs} ${marker}` });
    const { result } = await runLocal(repo);
    expect(result.score).toBe(4);
    const kinds = readFileSync(join(repo.logs, 'kinds'), 'utf8').trim().split(' ');
    // They were all up while the agent ran...
    for (const k of kinds) expect(existsSync(join(repo.logs, `beat-${k}`)), k).toBe(true);
    // ...and none is after the run: no process carries the marker, no heartbeat goes on.
    expect(processesWith(marker)).toEqual([]);
    const beats = () => kinds.map((k) => fingerprint(join(repo.logs, `beat-${k}`)));
    const after = beats();
    await sleep(700);
    expect(beats()).toEqual(after);
  });

  it('an agent that exits leaving a detached child holding its stdout ends at once, not at agent.timeout', async () => {
    const marker = unique('ff-holder');
    // A timeout far above what the agent takes (well under a second), so a busy machine cannot
    // blur "at once" and "at agent.timeout".
    const repo = makeAttackRepo({ agent: `sh {fx}/stdout-holder.sh exit ${marker}`, agentTimeout: 40 });
    const { result } = await runLocal(repo);
    expect(result.exit).toBe('finished');
    expect(result.agentSeconds).toBeLessThan(20);
    expect(result.score).toBe(4);
    expect(processesWith(marker)).toEqual([]);
  });

  it('an agent that sleeps forever (and ignores SIGTERM) with a stdout holder is stopped at agent.timeout', async () => {
    const marker = unique('ff-holder');
    const repo = makeAttackRepo({ agent: `sh {fx}/stdout-holder.sh hang ${marker}`, agentTimeout: 5 });
    const { result, ms } = await runLocal(repo);
    expect(result.exit).toBe('timeout');
    expect(result.agentSeconds).toBeGreaterThanOrEqual(5);
    expect(result.agentSeconds).toBeLessThan(8.5);
    // The whole run (setup, grading) only bounded against a hang: the promise is agentSeconds.
    expect(ms).toBeLessThan(60_000);
    expect(result.score).toBe(4);
    expect(processesWith(marker)).toEqual([]);
  });
});
