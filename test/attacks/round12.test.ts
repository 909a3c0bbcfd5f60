// Round 12: a hostile command agent against the newest mechanisms (the awake clock, the egress
// proxy's key mask, Ctrl-Z, the result trailers). Only Ctrl-Z gave way; its row failed before its
// fix, and its comment says what went wrong then.
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sleep, startCli, stateOf, until } from '../integration/cli-child.js';
import { cleanupAttackTemps, currentCli, describeSandboxed, makeAttackRepo, processesWith, unique } from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
}, 120_000);

const size = (f: string) => (existsSync(f) ? statSync(f).size : 0);

describeSandboxed('round 12: Ctrl-Z (stopWithCommands)', () => {
  // Before: stopWithCommands SIGSTOPped what it listed, pass by pass, and stopped again only pids it
  // had not seen: an agent whose loop forks a short checker every few ms had one, forked after the
  // listing, find the worker stopped and `kill -CONT -1` the sandbox. "the agent wrote 250 bytes of
  // ticks in 5 s while forkflush was stopped (its processes: T T S S S S T)". Now passes go on until
  // every one is stopped.
  it('no process of the agent runs on while forkflush is stopped by Ctrl-Z', async () => {
    const mark = unique('hop');
    const repo = makeAttackRepo({
      agent: `sh agent.sh {logs} ${mark}`,
      agentTimeout: 120,
      grader: 'cat value.txt',
      files: {
        'agent.sh': [
          'perl worker.pl "$1/ticks" "$2" &',
          'W=$!',
          'i=0; while [ $i -lt 300 ]; do sleep 1000 & i=$((i+1)); done',
          'perl reviver.pl $W "$2" "$1/reviver" &',
          'wait',
          '',
        ].join('\n'),
        'worker.pl':
          'for (1 .. 600) { open(my $o, ">>", $ARGV[0]); print $o "tick\\n"; close $o; select(undef, undef, undef, 0.1); }\n',
        // Starts a short-lived checker after another: one forked after the stop listed the processes
        // finds the worker stopped, and continues every process it may signal.
        'reviver.pl': [
          'open(my $up, ">", "$ARGV[2].up"); close $up;',
          'for (1 .. 200000) {',
          '  my $pid = fork();',
          '  if ($pid == 0) {',
          '    open(my $f, "<", "/proc/$ARGV[0]/stat") or exit 1;',
          '    my @stat = split / /, scalar <$f>;',
          '    kill "CONT", -1 if $stat[2] eq "T";',
          '    exit 0;',
          '  }',
          '  waitpid($pid, 0);',
          '  select(undef, undef, undef, 0.002);',
          '}',
          '',
        ].join('\n'),
      },
    });
    const ticks = join(repo.logs, 'ticks');
    const cli = await startCli(['run', repo.dir], repo.dir);
    const pid = cli.child.pid as number;
    try {
      // The reviver looping, and the worker ticking.
      const ready = () => / started \(/.test(cli.out()) && existsSync(join(repo.logs, 'reviver.up')) && size(ticks) > 0;
      expect(await until(ready, 120_000, 20)).toBe(true);
      process.kill(pid, 'SIGTSTP');
      expect(await until(() => stateOf(pid) === 'T', 20_000)).toBe(true);
      // forkflush is stopped: nothing of its agent should run (no tick) until it is continued.
      await sleep(2000);
      const before = size(ticks);
      await sleep(5000);
      const after = size(ticks);
      const states = processesWith(mark).map((p) => stateOf(p));
      expect(stateOf(pid)).toBe('T');
      expect(
        after - before,
        `the agent wrote ${after - before} bytes of ticks in 5 s while forkflush was stopped (its processes: ${states.join(' ')})`,
      ).toBe(0);
    } finally {
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGTERM');
      await cli.ended;
    }
  }, 300_000);
});
