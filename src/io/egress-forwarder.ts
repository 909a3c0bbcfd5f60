// The forwarder: inside the agent's sandbox, whose network namespace has only loopback, it listens
// on 127.0.0.1 ports and carries each connection to a Unix socket of forkflush's egress proxy
// (egress-proxy.ts), bound into the sandbox; then it runs the agent's command and ends as that
// ends. It is forkflush's own Node running a script written next to the sockets: it holds nothing
// (no key, no token), so it runs as the agent does. forkflush signals every process of the sandbox
// itself when it stops the agent, so the forwarder ignores those signals and waits for the agent.
import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const SOURCE = `// forkflush's network forwarder (see forkflush's src/io/egress-forwarder.ts).
'use strict';
const net = require('node:net');
const { spawn } = require('node:child_process');
const { constants } = require('node:os');
const argv = process.argv.slice(2);
const cut = argv.indexOf('--');
const maps = argv.slice(0, cut).map((a) => [Number(a.slice(0, a.indexOf('='))), a.slice(a.indexOf('=') + 1)]);
const [file, ...args] = argv.slice(cut + 1);
let ready = 0;
for (const [port, path] of maps) {
  // No Nagle on the agent's side: a model's streamed answer comes in small writes.
  const server = net.createServer({ noDelay: true }, (inside) => {
    const out = net.connect(path);
    inside.pipe(out);
    out.pipe(inside);
    const end = () => { inside.destroy(); out.destroy(); };
    inside.on('error', end).on('close', end);
    out.on('error', end).on('close', end);
  });
  server.on('error', (e) => {
    process.stderr.write('forkflush: the network forwarder cannot listen on 127.0.0.1:' + port + ': ' + e.message + '\\n');
    process.exit(125);
  });
  server.listen(port, '127.0.0.1', () => { if (++ready === maps.length) run(); });
}
if (maps.length === 0) run();
function run() {
  const signals = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'];
  for (const s of signals) process.on(s, () => {});
  const child = spawn(file, args, { stdio: 'inherit' });
  child.on('error', (e) => {
    process.stderr.write(file + ': ' + e.message + '\\n');
    process.exit(e.code === 'ENOENT' ? 127 : 126);
  });
  child.on('exit', (code, signal) => {
    if (signal === null) process.exit(code === null ? 1 : code);
    for (const s of signals) process.removeAllListeners(s);
    process.kill(process.pid, signal);
    process.exit(128 + (constants.signals[signal] || 0));
  });
}
`;

/** Writes the forwarder's script into `dir` (the folder the sandbox binds) and returns its path. */
export async function writeForwarder(dir: string): Promise<string> {
  const script = join(dir, 'forwarder.cjs');
  await writeFile(script, SOURCE);
  await chmod(script, 0o644);
  return script;
}

/**
 * The command line that runs `file args` behind the forwarder: `ports` maps each port on the
 * sandbox's 127.0.0.1 to the Unix socket it leads to.
 */
export function forwarded(
  script: string,
  ports: Readonly<Record<number, string>>,
  file: string,
  args: readonly string[],
): { file: string; args: string[] } {
  const maps = Object.entries(ports).map(([port, socket]) => `${port}=${socket}`);
  return { file: process.execPath, args: [script, ...maps, '--', file, ...args] };
}
