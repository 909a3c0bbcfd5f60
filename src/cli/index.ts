#!/usr/bin/env node
// The `forkflush` executable. The first Ctrl-C stops the run gracefully (agents are stopped,
// finished episodes are kept); a second one exits at once.
import { main } from './main.js';

const stop = new AbortController();
process.on('SIGINT', () => {
  if (stop.signal.aborted) process.exit(130);
  process.stderr.write('\nforkflush: stopping (Ctrl-C again to quit at once)...\n');
  stop.abort('interrupted');
});
process.on('SIGTERM', () => stop.abort('interrupted'));

main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  now: () => new Date(),
  signal: stop.signal,
}).then((code) => {
  process.exitCode = code;
});
