#!/usr/bin/env node
import { CLI_STOP_WITHIN_MS } from '../core/bounds.js';
// The `forkflush` executable. The first Ctrl-C or SIGTERM stops the run gracefully (agents are
// stopped, finished episodes are kept, the episode in flight runs again on resume); a second one
// exits at once. Either way the process ends within CLI_STOP_WITHIN_MS, whatever it was waiting for.
// SIGHUP (a closed terminal, a dropped ssh session) stops it the same way. A reader that closes the
// pipe (`forkflush run . | head -1`, a killed `tee`) ends the output, never the work: a run goes on
// to its end and its exit code. Ctrl-Z stops its commands with it (`fg` continues them too).
import { exitWithin, stopAllCommands, stopWithCommands } from '../io/process.js';
import { main } from './main.js';

const stop = new AbortController();
const onSignal = (signal: NodeJS.Signals) => {
  if (stop.signal.aborted) {
    stopAllCommands();
    process.exit(130);
  }
  const again = signal === 'SIGINT' ? 'Ctrl-C again' : `a second ${signal}`;
  process.stderr.write(`\nforkflush: stopping (${again} to quit at once)...\n`);
  stop.abort('interrupted');
  exitWithin(CLI_STOP_WITHIN_MS, 130, (line) => process.stderr.write(`${line}; resume the run to go on\n`));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
process.on('SIGHUP', onSignal);
process.on('SIGTSTP', stopWithCommands);
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    stream.write = (() => true) as typeof stream.write;
  });
}

// Under root each sandbox is an account of its own, which reads what forkflush makes for it (the
// round's objects, forkflush's own git's) as "others" do: a hardened shell's umask (027, 077) left
// the agents' git unable to read a commit. Private places are private by their own modes (0700).
if (process.getuid?.() === 0) process.umask(process.umask(0o022) & 0o022);

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
