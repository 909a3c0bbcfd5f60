#!/usr/bin/env node
// The `forkflush` executable. The first Ctrl-C or SIGTERM stops the run gracefully (agents are
// stopped, finished episodes are kept, the episode in flight runs again on resume); a second one
// exits at once. Either way the process ends within STOP_WITHIN_MS, whatever it was waiting for.
// A reader that closes the pipe (`forkflush status | head -1`) ends the output quietly.
import { exitWithin, stopAllCommands } from '../io/process.js';
import { main } from './main.js';

/**
 * How long a stopped forkflush takes at most to exit, in milliseconds: every step of an episode
 * listens to the stop and ends in a few seconds (an agent gets 2 s to stop before it is killed);
 * past this, whatever did not listen is killed with everything else forkflush started, and the run
 * is left as last saved (the state is written whole after every step), to resume.
 */
const STOP_WITHIN_MS = 10_000;

const stop = new AbortController();
const onSignal = (signal: NodeJS.Signals) => {
  if (stop.signal.aborted) {
    stopAllCommands();
    process.exit(130);
  }
  const again = signal === 'SIGINT' ? 'Ctrl-C again' : 'a second SIGTERM';
  process.stderr.write(`\nforkflush: stopping (${again} to quit at once)...\n`);
  stop.abort('interrupted');
  exitWithin(STOP_WITHIN_MS, 130, (line) => process.stderr.write(`${line}; resume the run to go on\n`));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
}

main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  now: () => new Date(),
  signal: stop.signal,
  env: process.env,
}).then((code) => {
  process.exitCode = code;
});
