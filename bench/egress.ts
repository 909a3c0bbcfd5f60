// What egress control costs an episode: the same agent session in bubblewrap two ways, interleaved
// so they share the machine's noise:
//   direct    the sandbox shares the machine's network and the agent calls the model itself, with
//             its key (how forkflush ran agents before egress control: the baseline);
//   proxied   the sandbox has only its loopback; the forwarder inside carries the calls to
//             forkflush's proxy, which puts the key in and forwards them (what runs now).
// The agent is a small Node program that makes CALLS model calls the way an SDK does (keep-alive,
// a 30 kB request, a streamed answer of 40 events) against a mock model server on 127.0.0.1 that
// answers at once, so what is measured is the path, not the model. Reported: the session's wall
// time (sandbox, forwarder and proxy start included) and the calls' median latency.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../src/core/config.js';
import { runProcess } from '../src/io/process.js';
import { agentConfinement, isolationFor } from '../src/worker/boundary.js';
import { startEgress } from '../src/worker/egress.js';

const REPEAT = 9;
const CALLS = 20;
const KEY = 'sk-ant-api03-bench-key';

const isolation = await isolationFor('required');
const sandbox = isolation.sandbox;
if (!sandbox) throw new Error('the egress bench needs bubblewrap');

const mock = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let i = 0; i < 40; i++)
      res.write(`event: content_block_delta\ndata: {"delta":{"text":"${'x'.repeat(40)}"}}\n\n`);
    res.end('event: message_stop\ndata: {}\n\n');
  });
});
await new Promise<void>((resolve) => mock.listen(0, '127.0.0.1', resolve));
const mockUrl = `http://127.0.0.1:${(mock.address() as AddressInfo).port}`;

const dir = mkdtempSync(join(tmpdir(), 'forkflush-bench-egress-'));
const work = join(dir, 'work');
mkdirSync(work, { recursive: true });
const agent = join(work, 'agent.cjs');
writeFileSync(
  agent,
  `const http = require('node:http');
const keepAlive = new http.Agent({ keepAlive: true });
const body = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(30000) }] });
(async () => {
  const times = [];
  for (let i = 0; i < ${CALLS}; i++) {
    const t = performance.now();
    await new Promise((resolve, reject) => {
      const req = http.request(process.env.ANTHROPIC_BASE_URL + '/v1/messages', { method: 'POST', agent: keepAlive,
        headers: { 'x-api-key': process.env.ANTHROPIC_API_KEY, 'content-type': 'application/json' } }, (res) => {
        if (res.statusCode !== 200) reject(new Error('status ' + res.statusCode));
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(body);
    });
    times.push(performance.now() - t);
  }
  console.log(JSON.stringify(times));
  keepAlive.destroy();
})();
`,
);

const config = {
  agent: { kind: 'command', env: ['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL'] },
  setup: { commands: [] },
  sandbox: { mode: 'required', read: [], write: [] },
} as unknown as Config;
const places = { workspace: work, context: work, box: work, objects: [], private: [] };
const env = { PATH: process.env.PATH, HOME: work, ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: mockUrl };

/** One agent session: its wall time and its calls' latencies, in ms. */
async function session(proxied: boolean): Promise<{ ms: number; calls: number[] }> {
  const t = performance.now();
  const egress = proxied ? await startEgress({ config, env, sandboxed: true }) : null;
  const account = (sandbox as NonNullable<typeof sandbox>).account();
  const confinement = { ...agentConfinement(places, config, process.env), account };
  confinement.tmp = work;
  if (egress?.bind) confinement.shared = [egress.bind];
  else confinement.network = true;
  const { file, args } = egress ? egress.wrap(process.execPath, [agent]) : { file: process.execPath, args: [agent] };
  const r = await runProcess(file, args, {
    cwd: work,
    env: egress ? egress.env : env,
    confine: { sandbox: sandbox as NonNullable<typeof sandbox>, confinement },
    timeoutMs: 60_000,
  });
  await egress?.close();
  account.release();
  if (r.exitCode !== 0) throw new Error(`the agent failed (${proxied ? 'proxied' : 'direct'}): ${r.stderr}`);
  return { ms: performance.now() - t, calls: JSON.parse(r.stdout) as number[] };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const results = {
  direct: { ms: [] as number[], calls: [] as number[] },
  proxied: { ms: [] as number[], calls: [] as number[] },
};
await session(false); // warm the caches once
await session(true);
for (let i = 0; i < REPEAT; i++) {
  for (const proxied of [false, true]) {
    const s = await session(proxied);
    const into = proxied ? results.proxied : results.direct;
    into.ms.push(s.ms);
    into.calls.push(...s.calls);
  }
}
mock.close();
rmSync(dir, { recursive: true, force: true });

for (const [name, r] of Object.entries(results)) {
  console.log(
    `${name.padEnd(8)} session ${r.ms.map((x) => x.toFixed(0)).join(' ')} ms (median ${median(r.ms).toFixed(0)} ms); ` +
      `a call: median ${median(r.calls).toFixed(2)} ms`,
  );
}
const session_ = median(results.proxied.ms) - median(results.direct.ms);
const call = median(results.proxied.calls) - median(results.direct.calls);
console.log(
  `egress: a session of ${CALLS} model calls takes ${session_.toFixed(0)} ms more through the proxy ` +
    `(${median(results.proxied.ms).toFixed(0)} vs ${median(results.direct.ms).toFixed(0)} ms direct), ` +
    `${call.toFixed(2)} ms more per call (${median(results.proxied.calls).toFixed(2)} vs ${median(results.direct.calls).toFixed(2)} ms; ${isolation.label})`,
);
