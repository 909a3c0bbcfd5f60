// `npm run test:chaos -- [--runs N] [--seed S] [--load L]`: runs the chaos suite (vitest.chaos.config.ts)
// with N seeded runs from seed S (defaults 200 and 1), then prints one summary line from the shards'
// outcomes. `--load L` keeps L busy-loop processes burning CPU beside the suite for as long as it runs:
// a busy CI machine, where timers run seconds late and handlers outlive the webhook timeout. A seeded
// run must come out the same (test/github/box.ts waits for such handlers). `npm test` and
// `npm run test:chaos` run it with `--load 2`; the last of a repeated flag counts (`-- --load 0`).
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.lastIndexOf(`--${name}`);
  const value = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} takes a whole number, not ${args[i + 1]}`);
  return value;
};
const runs = option('runs', 200);
const seed = option('seed', 1);
const load = option('load', 0);
const out = mkdtempSync(join(tmpdir(), 'forkflush-chaos-'));

// The burners: each its own node process spinning until it is killed (or its parent is gone).
const burners = Array.from({ length: load }, () =>
  spawn(
    process.execPath,
    [
      '-e',
      `const p = ${process.pid}; for (let i = 0; ; i++) if (i % 1e8 === 0) try { process.kill(p, 0) } catch { process.exit() }`,
    ],
    { stdio: 'ignore' },
  ),
);
const stopBurners = () => {
  for (const b of burners) if (b.exitCode === null && b.signalCode === null) b.kill('SIGKILL');
};
process.on('exit', stopBurners);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stopBurners();
    process.exit(130);
  });
}

const started = Date.now();
const vitest = await new Promise((resolve) => {
  const child = spawn('npx', ['vitest', 'run', '--config', 'vitest.chaos.config.ts'], {
    stdio: 'inherit',
    env: {
      ...process.env,
      FORKFLUSH_CHAOS_RUNS: String(runs),
      FORKFLUSH_CHAOS_SEED: String(seed),
      FORKFLUSH_CHAOS_OUT: out,
    },
  });
  child.on('exit', (code, signal) => resolve({ status: code, signal }));
});
const seconds = Math.round((Date.now() - started) / 1000);
stopBurners();
const outcomes = readdirSync(out).flatMap((f) => JSON.parse(readFileSync(join(out, f), 'utf8')));
rmSync(out, { recursive: true, force: true });
const bad = outcomes.filter((o) => o.violations.length > 0).sort((a, b) => a.seed - b.seed);
const violations = bad.reduce((n, o) => n + o.violations.length, 0);
const faults = outcomes.reduce((n, o) => n + o.faults, 0);
const seeds = bad.length > 0 ? ` (seeds ${bad.map((o) => o.seed).join(', ')})` : '';
const missing = outcomes.length < runs ? ` (only ${outcomes.length} reported)` : '';
const loaded = load > 0 ? `, beside ${load} CPU-burning process${load === 1 ? '' : 'es'}` : '';
console.log(
  `chaos: ${runs} runs${missing}, ${violations} invariant violations, ${faults} faults injected, ${seconds} s${loaded}${seeds}`,
);
process.exit(vitest.status === 0 && outcomes.length === runs ? 0 : 1);
