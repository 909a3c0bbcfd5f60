import { existsSync, renameSync } from 'node:fs';
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
import { type Cli, descendants, signal, sleep, startCli, stateOf, until } from './cli-child.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
}, 120_000);

/** The whole process tree of the CLI frozen for `ms` (a paused VM), then thawed, the commands first. */
async function freezeTree(cli: Cli, ms: number): Promise<void> {
  const pid = cli.child.pid as number;
  const tree = [pid, ...descendants(pid)];
  signal(tree, 'SIGSTOP');
  signal(descendants(pid), 'SIGSTOP');
  await sleep(ms);
  signal([...descendants(pid), ...tree.slice(1)], 'SIGCONT');
  process.kill(pid, 'SIGCONT');
}

const episodeResult = (dir: string) => newestRunState(dir)?.rounds[0]?.episodes[0]?.result;

describeSandboxed('a laptop left running overnight, frozen at other moments', () => {
  // Two setup commands, setup.timeout 20; the whole tree frozen 25 s in the first one (1 s of work) while
  // it prepares the judge's checkout (a stop counts as 10 s at most: io/awake.ts; 9 s are left for a
  // busy machine). Before: "in the judge's checkout, setup timed out after 20 s
  // (setup.timeout), before `true`", no score, the run ends with nothing: worker/setup.ts runSetup
  // counts the time left with performance.now(). Setup that used 1 s of awake time is not timed out.
  it('keeps the score when the machine was frozen during the judge setup for longer than setup.timeout', async () => {
    const mark = unique('setup');
    const repo = makeAttackRepo({
      agent: `sh -c 'echo 7 > value.txt; echo "{\\"spent\\": 6}" > "$FORKFLUSH_USAGE_FILE"'`,
      grader: 'cat value.txt',
      files: { 'setup.sh': `v=$(cat value.txt)\nsh -c "sleep 1; : stage$v-$1"\n` },
      extra: `setup:\n  commands: ["sh setup.sh ${mark}", "true"]\n  timeout: 20\n`,
    });
    const cli = await startCli(['run', repo.dir], repo.dir);
    // The judge's checkout holds the agent's 7: its setup is the one marked stage7.
    expect(await until(() => processesWith(`stage7-${mark}`).length > 0, 120_000, 5)).toBe(true);
    await freezeTree(cli, 25_000);
    const end = await cli.ended;
    const result = episodeResult(repo.dir);
    expect(result?.reason).toBeUndefined();
    expect(result?.score).toBe(7);
    expect(end.code).toBe(0);
  }, 240_000);

  // A try that fails with a rate limit after 2 s, the machine frozen 30 s in it (agent.timeout 70).
  // Now: "gave up on the rate-limit failure: too little of the episode's time is left for another try",
  // the run stops (a resume cannot run it again), and the 2 s crash is charged "crashed after 32.3 s of
  // its 70 s". worker/agent-tries.ts runTries measures the time left with performance.now().
  it('tries a rate-limited agent again when the machine was frozen during its first try', async () => {
    const mark = unique('agent');
    const repo = makeAttackRepo({
      agent: `sh agent.sh {logs} ${mark}`,
      agentTimeout: 70,
      grader: 'cat value.txt',
      files: {
        'agent.sh':
          'if [ -e "$1/tried" ]; then echo 7 > value.txt; echo \'{"spent": 6}\' > "$FORKFLUSH_USAGE_FILE"; exit 0; fi\n' +
          'touch "$1/tried"; sleep 2; echo "Error: 429 Too Many Requests" >&2; exit 1\n',
      },
    });
    const cli = await startCli(['run', repo.dir], repo.dir);
    expect(await until(() => / started \(/.test(cli.out()) && processesWith(mark).length > 0, 120_000, 5)).toBe(true);
    await freezeTree(cli, 30_000);
    const end = await cli.ended;
    const result = episodeResult(repo.dir);
    expect(end.out).not.toMatch(/too little of the episode's time/);
    expect(result?.score).toBe(7);
    expect(end.code).toBe(0);
  }, 300_000);

  // A minutes budget, 0.35 an episode (21 s: the 2 s of work and a stop counted as 10 s at most leave
  // 9 s for a busy machine); an agent that works 2 s, the machine frozen 25 s meanwhile.
  // Before: charged 0.456 minutes, more than its allowance, although its (awake-time) limit let it go on:
  // core/charge.ts charges the tries' seconds, which agents/runner.ts measures with performance.now().
  // The charge and the limit must count the same time: no more than the allowance here.
  it('charges a minutes budget the time the agent ran, not the time the whole machine was frozen', async () => {
    const mark = unique('agent');
    const repo = makeAttackRepo({
      agent: `sh agent.sh ${mark}`,
      grader: 'cat value.txt',
      budget: 'total: 0.7\n  unit: minutes\n  episode: 0.35',
      files: { 'agent.sh': 'sleep 2; echo 7 > value.txt\n' },
    });
    const cli = await startCli(['run', repo.dir], repo.dir);
    expect(await until(() => / started \(/.test(cli.out()) && processesWith(mark).length > 0, 120_000, 5)).toBe(true);
    await freezeTree(cli, 25_000);
    const end = await cli.ended;
    const result = episodeResult(repo.dir);
    expect(result?.score).toBe(7);
    expect(result?.spent).toBeLessThanOrEqual(0.35);
    expect(end.code).toBe(0);
  }, 300_000);

  // Ctrl-Z: SIGTSTP to forkflush, whose agent leads a process group of its own, out of the
  // terminal's reach. Failed before its fix: with agent.timeout 20 and a 26 s stop, the agent went on
  // unwatched (its usage unread) and, once forkflush continued, ran 18 more seconds (44 s in all).
  // Now forkflush stops its commands with it and continues them with it (io/process.ts
  // stopWithCommands): the agent's limit counts only the time it could run.
  it('stops its agent with it on Ctrl-Z (SIGTSTP), and the agent keeps to agent.timeout of its running time', async () => {
    const mark = unique('agent');
    const repo = makeAttackRepo({
      agent: `sh agent.sh ${mark}`,
      agentTimeout: 20,
      grader: 'cat value.txt',
      files: { 'agent.sh': 'sleep 90; echo 7 > value.txt\n' },
    });
    const cli = await startCli(['run', repo.dir], repo.dir);
    expect(await until(() => / started \(/.test(cli.out()) && processesWith(mark).length > 0, 120_000, 5)).toBe(true);
    const pid = cli.child.pid as number;
    const started = Date.now();
    process.kill(pid, 'SIGTSTP');
    const stopped = () => [pid, ...processesWith(mark)].every((p) => stateOf(p) === 'T');
    expect(
      await until(stopped, 10_000),
      JSON.stringify([pid, ...processesWith(mark)].map((p) => [p, stateOf(p)])),
    ).toBe(true);
    const stoppedAt = Date.now();
    await sleep(26_000);
    expect(processesWith(mark).length).toBeGreaterThan(0);
    expect(stopped()).toBe(true);
    const continuedAt = Date.now();
    process.kill(pid, 'SIGCONT');
    await until(() => processesWith(mark).length === 0, 90_000, 50);
    const ran = (Date.now() - started - (continuedAt - stoppedAt)) / 1000;
    await cli.ended;
    // About its 20 s of running (a few seconds of it before the stop), not past it by the stop.
    expect(ran).toBeLessThan(20 + 8);
  }, 300_000);

  // forkflush stopped (SIGSTOP) while its agent runs, the repository folder renamed meanwhile, then
  // continued. Failed before its fix: it failed ("git read-tree ... not a git repository") and, failing,
  // wrote state.json and git/info/attributes at the OLD path, making `<old>/.forkflush/<run>/` anew;
  // `resume <new place>` then failed on git and pointed at the stub. Now it writes nothing where the
  // repository was (worker/cleanroom.ts asIs makes no parents) and says the folder is gone.
  it('writes nothing at the old place when the repository was moved while forkflush was stopped', async () => {
    const mark = unique('agent');
    const repo = makeAttackRepo({
      agent: `sh agent.sh ${mark}`,
      grader: 'cat value.txt',
      files: { 'agent.sh': 'sleep 3; echo 5 > value.txt\n' },
    });
    const cli = await startCli(['run', repo.dir], repo.dir);
    expect(await until(() => / started \(/.test(cli.out()) && processesWith(mark).length > 0, 120_000, 5)).toBe(true);
    const pid = cli.child.pid as number;
    process.kill(pid, 'SIGSTOP');
    const moved = `${repo.dir}-moved`;
    renameSync(repo.dir, moved);
    await sleep(4000);
    process.kill(pid, 'SIGCONT');
    const end = await cli.ended;
    expect(end.code).not.toBe(0);
    expect(end.out).toContain('is gone: the repository was moved or deleted while the run went on');
    expect(existsSync(repo.dir)).toBe(false);
    const again = await startCli(['resume', moved], moved);
    const resumed = await again.ended;
    expect(resumed.out).toMatch(/moved/);
  }, 300_000);
});
