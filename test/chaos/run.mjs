// `npm run test:chaos -- [--runs N] [--seed S] [--load L]`: runs the chaos suite (vitest.chaos.config.ts)
// with N seeded runs from seed S (defaults 200 and 1), then prints one summary line from the shards'
// outcomes. `--load L` keeps L busy-loop processes burning CPU beside the suite for as long as it runs:
// a busy CI machine, where timers run seconds late and handlers outlive the webhook timeout. A seeded
// run must come out the same (test/github/box.ts waits for such handlers). `--beside CMD` runs the
// shell command CMD at the same time as real load (its output is the terminal's; the suite's goes
// to a log, printed when it fails), and fails when either fails: `npm test` runs it beside the main
// vitest suite, whose processes keep both cores busy (burners would only waste them), and
// `npm run test:chaos` with `--load 2`. The last of a repeated flag counts (`-- --load 0`).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.lastIndexOf(`--${name}`);
  const value = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} takes a whole number, not ${args[i + 1]}`);
  return value;
};
const besideAt = args.lastIndexOf('--beside');
const beside = besideAt >= 0 ? args[besideAt + 1] : undefined;
if (besideAt >= 0 && !beside) throw new Error('--beside takes a command');
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

const exited = (child) =>
  new Promise((resolve) => child.on('exit', (code, signal) => resolve({ status: code, signal })));
const besideRun = beside ? exited(spawn(beside, { shell: true, stdio: 'inherit' })) : null;
const log = join(out, 'vitest.log');
const logFd = beside ? openSync(log, 'w') : null;
const started = Date.now();
const vitest = await exited(
  spawn('npx', ['vitest', 'run', '--config', 'vitest.chaos.config.ts'], {
    stdio: logFd === null ? 'inherit' : ['ignore', logFd, logFd],
    env: {
      ...process.env,
      FORKFLUSH_CHAOS_RUNS: String(runs),
      FORKFLUSH_CHAOS_SEED: String(seed),
      FORKFLUSH_CHAOS_OUT: join(out, 'outcomes'),
    },
  }),
);
const seconds = Math.round((Date.now() - started) / 1000);
stopBurners();
const besideStatus = besideRun ? await besideRun : { status: 0 };
if (logFd !== null && vitest.status !== 0) process.stdout.write(readFileSync(log, 'utf8'));
const outcomeDir = join(out, 'outcomes');
const outcomes = existsSync(outcomeDir)
  ? readdirSync(outcomeDir).flatMap((f) => JSON.parse(readFileSync(join(outcomeDir, f), 'utf8')))
  : [];
rmSync(out, { recursive: true, force: true });
const bad = outcomes.filter((o) => o.violations.length > 0).sort((a, b) => a.seed - b.seed);
const violations = bad.reduce((n, o) => n + o.violations.length, 0);
const faults = outcomes.reduce((n, o) => n + o.faults, 0);
const seeds = bad.length > 0 ? ` (seeds ${bad.map((o) => o.seed).join(', ')})` : '';
const missing = outcomes.length < runs ? ` (only ${outcomes.length} reported)` : '';
const loaded = [
  load > 0 ? `${load} CPU-burning process${load === 1 ? '' : 'es'}` : null,
  beside ? `\`${beside}\` (exit ${besideStatus.status ?? besideStatus.signal})` : null,
]
  .filter(Boolean)
  .join(' and ');
console.log(
  `chaos: ${runs} runs${missing}, ${violations} invariant violations, ${faults} faults injected, ${seconds} s${loaded ? `, beside ${loaded}` : ''}${seeds}`,
);
process.exit(vitest.status === 0 && outcomes.length === runs && besideStatus.status === 0 ? 0 : 1);
