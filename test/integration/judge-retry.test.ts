// The judge's grading that fails for want of a resource, through the worker: graded once more,
// then the machine's readings (simulated here: the test hands the episode its own watch) decide
// whether the failure was the machine's (the result says so, and its round is void) or the
// branch's own. The grader fails with EAGAIN's words until a flag file appears, which the watch
// can put there between the two tries.
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agentFor } from '../../src/agents/specs.js';
import { applyOpen, reconcile } from '../../src/core/reconcile.js';
import { type MachineReadings, machineShort, NO_READINGS } from '../../src/core/resources.js';
import type { EpisodeResult } from '../../src/core/state.js';
import { type WatchMachine, watchMachine } from '../../src/io/machine.js';
import { startRun } from '../../src/local/start.js';
import { runEpisode } from '../../src/worker/episode.js';
import type { SharedMachine } from '../../src/worker/episode-input.js';
import { gradeAsJudge, type JudgeGrading } from '../../src/worker/grade.js';
import { makeTaskRepo } from './task-repo.js';

/** Outside /tmp (every sandbox has its own /tmp) and readable by the judge: / is, read-only. */
const flags = mkdtempSync('/var/tmp/forkflush-judge-retry-');
chmodSync(flags, 0o755);
afterAll(() => rmSync(flags, { recursive: true, force: true }));

const STARVED_GRADER = [
  '# The score, once the flag exists; before, what a shell says when it cannot fork.',
  'if [ -f "$1" ]; then cat value.txt; exit 0; fi',
  'echo "grade.sh: fork: retry: Resource temporarily unavailable" >&2',
  'exit 2',
  '',
].join('\n');

const AGENT = 'echo 7 > value.txt\necho \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"\n';

const roomy: MachineReadings = {
  ...NO_READINGS,
  tasksPeak: 900,
  taskCapacity: 32768,
  oomKills: 0,
  memAvailableMin: 12e9,
  memTotal: 24e9,
};
const noPids: MachineReadings = { ...roomy, tasksPeak: 32768 - 10 };

/** A watch that reports `readings[i]` for its i-th use, and can act when a use ends. */
function fakeWatch(
  readings: MachineReadings[],
  onStop: (i: number) => void = () => {},
): WatchMachine & { uses: number } {
  const w = Object.assign(
    () => {
      const i = w.uses++;
      return {
        stop: () => {
          onStop(i);
          return readings[Math.min(i, readings.length - 1)] as MachineReadings;
        },
      };
    },
    { uses: 0 },
  );
  return w;
}

/** One episode whose agent writes 7, judged with `grader` under `watch` (a shortage paused for `pauseMs`). */
async function judged(
  grader: string,
  watch: WatchMachine,
  pauseMs = 0,
  sharedMachine?: SharedMachine,
): Promise<EpisodeResult> {
  const flag = join(flags, `flag-${Math.random().toString(36).slice(2)}`);
  const repo = makeTaskRepo({
    agentCommand: 'sh agent.sh',
    grader: `sh starved.sh ${flag}`,
    files: { 'starved.sh': grader, 'agent.sh': AGENT },
    extra: 'strategy: single-run',
    budget: 'total: 6\n  unit: tokens\n  episode: 6',
  });
  const run = await startRun({ dir: repo.dir, seed: 1, now: new Date('2026-11-30T10:00:00Z') });
  const [open] = reconcile(run.state);
  if (open?.type !== 'open') throw new Error('the run opens no round');
  const state = applyOpen(run.state, open.round);
  const episode = open.round.episodes[0];
  if (!episode) throw new Error('no episode');
  const prepared = await run.forge.prepareEpisode(state, episode);
  currentFlag = flag;
  return runEpisode({
    runId: state.id,
    config: state.config,
    episode,
    phase: 'solo',
    own: prepared.own,
    places: prepared.places,
    checkoutIndex: prepared.checkoutIndex,
    scratchDir: prepared.scratchDir,
    prompt: 'Make value.txt large.',
    agent: agentFor(state.config),
    isolation: run.isolation,
    judgeMachine: { watch, pauseMs },
    ...(sharedMachine ? { sharedMachine } : {}),
  });
}
let currentFlag = '';

describe("a judge's grading that fails for want of a resource", () => {
  it('is tried once more, and when the machine was short both times, the result says so (its round is void)', async () => {
    const watch = fakeWatch([noPids, noPids]);
    const r = await judged(STARVED_GRADER, watch);
    expect(watch.uses).toBe(2);
    expect(r.score).toBeNull();
    expect(r.machineShort).toBe('processes');
    expect(r.reason).toMatch(
      /^the machine ran out of processes while the judge graded this branch, twice \(the grader exited with code 2: grade\.sh: fork: retry: Resource temporarily unavailable\): the round is void$/,
    );
    expect(r.note).toMatch(/graded twice: the first grading failed too/);
  });

  it('keeps its second score when the second try works', async () => {
    const watch = fakeWatch([noPids, roomy], (i) => {
      if (i === 0) writeFileSync(currentFlag, '');
    });
    const r = await judged(STARVED_GRADER, watch);
    expect(existsSync(currentFlag)).toBe(true);
    expect(watch.uses).toBe(2);
    expect(r.score).toBe(7);
    expect(r).not.toHaveProperty('machineShort');
    expect(r.note).toMatch(
      /graded twice: the judge's first grading failed \(.*Resource temporarily unavailable; the machine was short of processes\)/,
    );
  });

  it("is the branch's own failure when the machine had room, whatever the grader printed", async () => {
    const watch = fakeWatch([roomy]);
    const r = await judged(STARVED_GRADER, watch);
    expect(watch.uses).toBe(2);
    expect(r.score).toBeNull();
    expect(r).not.toHaveProperty('machineShort');
    expect(r.reason).toMatch(
      /Resource temporarily unavailable \(for want of processes, within this branch's own limits: the machine had room\)$/,
    );
  });

  it('gives a machine found short a pause before the second try, and one with room none', async () => {
    /** A watch that also records when each use starts and stops. */
    const timed = (readings: MachineReadings[], times: number[]): WatchMachine => {
      const inner = fakeWatch(readings, () => times.push(Date.now()));
      return (paths) => {
        times.push(Date.now());
        return inner(paths);
      };
    };
    const times: number[] = [];
    await judged(STARVED_GRADER, timed([noPids, noPids], times), 1500);
    // The first try's start and stop, then the second's.
    expect(times).toHaveLength(4);
    expect((times[2] as number) - (times[1] as number)).toBeGreaterThanOrEqual(1500);
    const roomyTimes: number[] = [];
    const r = await judged(STARVED_GRADER, timed([roomy], roomyTimes), 60_000);
    expect(roomyTimes).toHaveLength(4);
    expect(r.score).toBeNull();
  }, 120_000);

  it('is not tried again when it failed for another reason', async () => {
    const watch = fakeWatch([roomy]);
    const r = await judged('echo "AssertionError: 3 != 4" >&2\nexit 1\n', watch);
    expect(watch.uses).toBe(1);
    expect(r.score).toBeNull();
    expect(r.reason).toBe('the grader exited with code 1: AssertionError: 3 != 4');
  });
});

describe('a judge forkflush could not start', () => {
  const unstarted: JudgeGrading = {
    score: null,
    reason: 'the grader could not start: spawn /bin/sh EAGAIN',
    startError: 'spawn /bin/sh EAGAIN',
    seconds: 0,
    exitCode: null,
    signal: null,
    stdout: '',
    stderr: '',
  };

  it("is tried once more, and twice unstarted for want of processes is the machine's failure, even unseen by the watch", async () => {
    let tries = 0;
    const g = await gradeAsJudge(
      async () => {
        tries++;
        return unstarted;
      },
      [flags],
      { watch: fakeWatch([roomy]), pauseMs: 0 },
    );
    expect(tries).toBe(2);
    expect(g.score).toBeNull();
    expect(g.machineShort).toBe('processes');
    expect(g.reason).toMatch(/^the machine ran out of processes while the judge graded this branch, twice/);
  });

  it('cuts the pause of a machine found short when the run is stopped', async () => {
    const stop = new AbortController();
    let tries = 0;
    const started = Date.now();
    setTimeout(() => stop.abort('SIGTERM'), 200);
    await gradeAsJudge(
      async () => {
        tries++;
        return unstarted;
      },
      [flags],
      { watch: fakeWatch([noPids]), pauseMs: 60_000 },
      stop.signal,
    );
    expect(tries).toBe(2);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('keeps the score of a second try that started', async () => {
    const attempts = [unstarted, { ...unstarted, score: 4, startError: undefined, reason: undefined, exitCode: 0 }];
    const g = await gradeAsJudge(async () => attempts.shift() as JudgeGrading, [flags], {
      watch: fakeWatch([roomy]),
      pauseMs: 0,
    });
    expect(g.score).toBe(4);
    expect(g).not.toHaveProperty('machineShort');
  });
});

describe('the watch on the machine', () => {
  it.skipIf(process.platform !== 'linux')(
    "reads this machine's tasks, OOM kills, memory, disk and open files, and finds it not short",
    async () => {
      const w = watchMachine([flags]);
      await new Promise((resolve) => setTimeout(resolve, 450));
      const r = w.stop();
      const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
      const threadsMax = Number(readFileSync('/proc/sys/kernel/threads-max', 'utf8'));
      expect(r.taskCapacity).toBe(Math.min(pidMax, threadsMax));
      expect(r.tasksPeak).toBeGreaterThan(10);
      expect(r.oomKills).toBeGreaterThanOrEqual(0);
      expect(r.memTotal).toBeGreaterThan(0);
      expect(r.memAvailableMin).toBeGreaterThan(0);
      expect(r.diskFreeMin).toBeGreaterThan(0);
      const fileMax = Number(readFileSync('/proc/sys/fs/file-nr', 'utf8').trim().split(/\s+/)[2]);
      expect(r.fileCapacity).toBe(fileMax);
      expect(r.filesPeak).toBeGreaterThan(0);
      expect(machineShort(r)).toEqual([]);
    },
  );
});

describe('a judge whose grader timed out', () => {
  /** Hangs past grader.timeout (5 s) until the flag exists, then gives the score. */
  const SLOW_GRADER = 'if [ -f "$1" ]; then cat value.txt; exit 0; fi\nsleep 30\n';
  /** The run's other episodes as the judge sees them: `others` says whether one ran beside it. */
  const machine = (others: boolean, calls: string[]): SharedMachine => ({
    othersSince: () => () => others,
    alone: async (fn) => {
      calls.push('alone');
      writeFileSync(currentFlag, '');
      return fn();
    },
  });

  it('beside other branches, is graded once more alone, and that score stands', async () => {
    const calls: string[] = [];
    const r = await judged(SLOW_GRADER, fakeWatch([roomy]), 0, machine(true, calls));
    expect(calls).toEqual(['alone']);
    expect(r.score).toBe(7);
    expect(r.note).toMatch(
      /graded again with no other branch running: the first grading \(the grader timed out after 5 s\) ran beside others/,
    );
  }, 30_000);

  it('with no other branch running, is not graded again: the time-out is its own', async () => {
    const calls: string[] = [];
    const r = await judged(SLOW_GRADER, fakeWatch([roomy]), 0, machine(false, calls));
    expect(calls).toEqual([]);
    expect(r.score).toBeNull();
    expect(r.reason).toBe('the grader timed out after 5 s');
  }, 30_000);
});
