#!/usr/bin/env node
// The `forkflush` executable. The first Ctrl-C stops the run gracefully (agents are stopped,
// finished episodes are kept); a second one exits at once. A reader that closes the pipe
// (`forkflush status | head -1`) ends the output quietly.
import { main } from './main.js';

const stop = new AbortController();
process.on('SIGINT', () => {
  if (stop.signal.aborted) process.exit(130);
  process.stderr.write('\nforkflush: stopping (Ctrl-C again to quit at once)...\n');
  stop.abort('interrupted');
});
process.on('SIGTERM', () => stop.abort('interrupted'));
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
