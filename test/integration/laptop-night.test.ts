import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  cleanupAttackTemps,
  currentCli,
  describeSandboxed,
  makeAttackRepo,
  newestRunState,
  processesWith,
  unique,
} from '../attacks/helpers.js';
import { type Cli, descendants, signal, sleep, startCli, until } from './cli-child.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
}, 120_000);

// Past the most a stretch of awake time counts (AWAKE_STEP_MAX_MS, 10 s), with room for the grader's work.
const GRADER_TIMEOUT_S = 15;

/** A single-run task: the agent writes 7, the grader (marked by `mark`) prints it after `pause` s. */
function task(mark: string, pause: number) {
  return makeAttackRepo({
    agent: `sh -c 'echo 7 > value.txt; echo "{\\"spent\\": 6}" > "$FORKFLUSH_USAGE_FILE"'`,
    grader: `sh grade.sh ${mark}`,
    graderTimeout: GRADER_TIMEOUT_S,
    files: { 'grade.sh': `sleep ${pause}\ncat value.txt\n: "$1"\n` },
  });
}

/** Resolves once the judge's grader of the first episode runs (not the initial grading's). */
async function judgeRunning(cli: Cli, mark: string): Promise<void> {
  expect(await until(() => / started \(/.test(cli.out()), 90_000)).toBe(true);
  expect(await until(() => processesWith(mark).length > 0, 90_000, 5)).toBe(true);
}

describeSandboxed('a laptop left running overnight, forkflush stopped while a judge grades', () => {
  // Ctrl-Z in forkflush's terminal stops forkflush alone (its commands lead groups of their own):
  // the judge's grader goes on, prints 7 and exits 0 in half a second. Failed before its fix: after
  // `fg`, once the stop outlasted grader.timeout, the episode got "no score: the grader timed out
  // after 6 s" and the run ended "No episode beat the initial workspace" (exit 1): the limit's timer
  // ran before the child's exit was read. Limits now count awake time (io/awake.ts).
  it('keeps the score of a grader that printed it and exited while forkflush was stopped (Ctrl-Z, then fg)', async () => {
    const mark = unique('grader');
    const repo = task(mark, 0.5);
    const cli = await startCli(['run', repo.dir], repo.dir);
    await judgeRunning(cli, mark);
    const stoppedAt = Date.now();
    process.kill(cli.child.pid as number, 'SIGSTOP');
    expect(await until(() => processesWith(mark).length === 0, 30_000)).toBe(true);
    // Past grader.timeout since the grader started, as a night-long stop is.
    await sleep(Math.max(0, GRADER_TIMEOUT_S * 1000 + 3000 - (Date.now() - stoppedAt)));
    process.kill(cli.child.pid as number, 'SIGCONT');
    const end = await cli.ended;
    const result = newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.result;
    expect(result?.reason).toBeUndefined();
    expect(result?.score).toBe(7);
    expect(end.code).toBe(0);
  }, 180_000);

  // The whole tree frozen (forkflush, bwrap, the grader: a paused VM or container, whose monotonic
  // clock moves on) for longer than grader.timeout, one second into a grader that needs one
  // second: thawed, it prints 7 at once. Failed before its fix: "no score: the grader timed out
  // after 6 s" (graderSeconds ~ the freeze). Time the whole machine was frozen is no time the grader
  // used: a grader that ran within grader.timeout of awake time keeps its score.
  it('keeps the score of a grader whose time ran out only while the whole machine was frozen', async () => {
    const mark = unique('grader');
    const repo = task(mark, 1);
    const cli = await startCli(['run', repo.dir], repo.dir);
    await judgeRunning(cli, mark);
    const pid = cli.child.pid as number;
    const tree = [pid, ...descendants(pid)];
    signal(tree, 'SIGSTOP');
    signal(descendants(pid), 'SIGSTOP');
    await sleep(GRADER_TIMEOUT_S * 1000 + 3000);
    // Thawed together, the commands first (as a VM's processes all go on at once).
    signal([...descendants(pid), ...tree.slice(1)], 'SIGCONT');
    process.kill(pid, 'SIGCONT');
    const end = await cli.ended;
    const result = newestRunState(repo.dir)?.rounds[0]?.episodes[0]?.result;
    expect(result?.reason).toBeUndefined();
    expect(result?.score).toBe(7);
    expect(end.code).toBe(0);
  }, 180_000);
});
