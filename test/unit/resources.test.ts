// Whose failure a judge's grading that ran out of something was (core/resources.ts): words earn
// one more try; only the machine measured short, on the second try, blames the machine and voids
// the round. A branch that prints the words on purpose, or hits its own limits, keeps its failure.
import { describe, expect, it } from 'vitest';
import {
  type JudgeAttempt,
  type MachineReadings,
  machineShort,
  NO_READINGS,
  resourceSigns,
  retryJudge,
  settleJudge,
} from '../../src/core/resources.js';

const GB = 1024 ** 3;
const roomy: MachineReadings = {
  tasksPeak: 900,
  taskCapacity: 32768,
  oomKills: 0,
  memAvailableMin: 12 * GB,
  memTotal: 24 * GB,
  diskFreeMin: 50 * GB,
  inodesFreeMin: 1_000_000,
  filesPeak: 20_000,
  fileCapacity: 2_466_290,
};

const eagain = 'sh: 1: Cannot fork\ngrade.sh: fork: retry: Resource temporarily unavailable';

function attempt(o: Partial<JudgeAttempt> = {}): JudgeAttempt {
  return {
    score: null,
    reason: 'the grader exited with code 2: grade.sh: fork: retry: Resource temporarily unavailable',
    ranAndFailed: true,
    signs: ['processes'],
    short: [],
    ...o,
  };
}

describe('what the machine ran short of', () => {
  it('nothing on a machine with room, or where nothing could be read', () => {
    expect(machineShort(roomy)).toEqual([]);
    expect(machineShort(NO_READINGS)).toEqual([]);
  });

  it('processes when fewer than 1% of its tasks (at least 64) were free at the peak', () => {
    expect(machineShort({ ...roomy, tasksPeak: 32768 - 63 })).toEqual(['processes']);
    expect(machineShort({ ...roomy, tasksPeak: 32768 - 400 })).toEqual([]);
    expect(machineShort({ ...roomy, taskCapacity: 4_194_304, tasksPeak: 4_194_304 - 40_000 })).toEqual(['processes']);
  });

  it('memory after an OOM kill, or under 1% available; disk when nearly full', () => {
    expect(machineShort({ ...roomy, oomKills: 1 })).toEqual(['memory']);
    expect(machineShort({ ...roomy, memAvailableMin: 0.2 * GB })).toEqual(['memory']);
    expect(machineShort({ ...roomy, diskFreeMin: 10 * 1024 * 1024 })).toEqual(['disk']);
    expect(machineShort({ ...roomy, inodesFreeMin: 12 })).toEqual(['disk']);
  });

  it("files when the machine's open-file table had under 1% (at least 1024) free", () => {
    expect(machineShort({ ...roomy, filesPeak: 2_466_290 - 1000 })).toEqual(['files']);
    expect(machineShort({ ...roomy, filesPeak: 2_466_290 - 30_000 })).toEqual([]);
    expect(machineShort({ ...roomy, fileCapacity: 65_536, filesPeak: 64_600 })).toEqual(['files']);
  });
});

describe("what a failed grader's output points at", () => {
  it('processes, memory and disk by the words shells, runtimes and the kernel use', () => {
    expect(resourceSigns(eagain, null)).toEqual(['processes']);
    expect(resourceSigns("RuntimeError: can't start new thread", null)).toEqual(['processes']);
    expect(resourceSigns('java.lang.OutOfMemoryError: unable to create native thread', null)).toEqual([
      'processes',
      'memory',
    ]);
    expect(
      resourceSigns('FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory', null),
    ).toEqual(['memory']);
    expect(resourceSigns('MemoryError', null)).toEqual(['memory']);
    expect(resourceSigns('grade.sh: line 3:  4242 Killed   ./solve', null)).toEqual(['memory']);
    expect(resourceSigns('the test killed its worker', null)).toEqual([]);
    expect(resourceSigns('Killed', null)).toEqual(['memory']);
    expect(resourceSigns('cp: error writing out.bin: No space left on device', null)).toEqual(['disk']);
    expect(resourceSigns('AssertionError: 3 != 4', null)).toEqual([]);
  });

  it("files by the kernel's words for the machine's table (ENFILE), never a process's own limit (EMFILE)", () => {
    expect(resourceSigns('OSError: [Errno 23] Too many open files in system', null)).toEqual(['files']);
    expect(resourceSigns('Error: ENFILE: file table overflow, open', null)).toEqual(['files']);
    expect(resourceSigns('OSError: [Errno 24] Too many open files', null)).toEqual([]);
  });

  it("memory when the grader was killed by SIGKILL (the OOM killer's signal)", () => {
    expect(resourceSigns('', 'SIGKILL')).toEqual(['memory']);
    expect(resourceSigns('', 'SIGSEGV')).toEqual([]);
  });
});

describe('one more try', () => {
  it('for a grading that ran and failed with words of a resource, or while the machine was short', () => {
    expect(retryJudge(attempt())).toBe(true);
    expect(retryJudge(attempt({ signs: [], short: ['memory'] }))).toBe(true);
  });

  it('never for a score, a plain failure, a timeout or output without a score', () => {
    expect(retryJudge(attempt({ score: 7 }))).toBe(false);
    expect(retryJudge(attempt({ signs: [] }))).toBe(false);
    expect(retryJudge(attempt({ ranAndFailed: false, short: ['processes'] }))).toBe(false);
  });
});

describe('the verdict after two tries', () => {
  it("takes the second try's score, and says the first failed", () => {
    const v = settleJudge(attempt({ short: ['processes'] }), attempt({ score: 9, signs: [], reason: undefined }));
    expect(v).toEqual({
      score: 9,
      note: expect.stringMatching(
        /^graded twice: the judge's first grading failed \(.*Resource temporarily.*; the machine was short of processes\)$/,
      ),
    });
    expect(v.machineShort).toBeUndefined();
  });

  it('blames the machine (the round is void) when it was measured short while the second try failed', () => {
    const v = settleJudge(attempt({ short: ['processes'] }), attempt({ short: ['processes'] }));
    expect(v.score).toBeNull();
    expect(v.machineShort).toBe('processes');
    expect(v.reason).toMatch(
      /^the machine ran out of processes while the judge graded this branch, twice \(.*\): the round is void$/,
    );
    // Killed by the OOM killer twice, with an OOM kill seen each time.
    const oom = attempt({ signs: ['memory'], short: ['memory'], reason: 'the grader was killed by SIGKILL' });
    expect(settleJudge(oom, oom).machineShort).toBe('memory');
    // The machine's open-file table full twice (a sibling opened all it could).
    const files = attempt({ signs: ['files'], short: ['files'], reason: 'the grader exited with code 1' });
    expect(settleJudge(files, files)).toMatchObject({
      machineShort: 'files',
      reason: expect.stringMatching(/^the machine ran out of open files while the judge graded this branch, twice/),
    });
  });

  it("keeps a failure the machine had room for as the branch's own, whatever the output says", () => {
    // The graded code printed the words on purpose, or forked up to its own limit: no void.
    const v = settleJudge(attempt(), attempt());
    expect(v.machineShort).toBeUndefined();
    expect(v.score).toBeNull();
    expect(v.reason).toMatch(
      /Resource temporarily unavailable \(for want of processes, within this branch's own limits: the machine had room\)$/,
    );
    expect(v.note).toMatch(/^graded twice: the first grading failed too/);
  });

  it('blames the machine only for what the failures point at, and only when the second try failed by running', () => {
    // Short of disk while the grader failed for processes, with nothing about disk in either: its own.
    expect(settleJudge(attempt(), attempt({ short: ['disk'] })).machineShort).toBeUndefined();
    // Short again, but the second try timed out: a timeout is not a want of resources here.
    const timedOut = attempt({
      ranAndFailed: false,
      signs: [],
      short: ['processes'],
      reason: 'the grader timed out after 5 s',
    });
    expect(settleJudge(attempt({ short: ['processes'] }), timedOut).machineShort).toBeUndefined();
  });

  it('blames the machine when forkflush itself could not start the grader for want of a resource, twice', () => {
    // spawn EAGAIN: the graded code never ran, so the words are the kernel's answer to forkflush,
    // even where the watch, a few samples a second, missed the moment.
    const unstarted = attempt({ startFailed: true, reason: 'the grader could not start: spawn /bin/sh EAGAIN' });
    expect(settleJudge(unstarted, unstarted).machineShort).toBe('processes');
    // A start that failed for no resource is no one's shortage.
    const other = attempt({ startFailed: true, signs: [], reason: 'the grader could not start: spawn /bin/sh ENOENT' });
    expect(settleJudge(unstarted, other).machineShort).toBeUndefined();
  });
});
