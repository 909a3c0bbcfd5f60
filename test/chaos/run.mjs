// `npm run test:chaos -- [--runs N] [--seed S]`: runs the chaos suite (vitest.chaos.config.ts) with
// N seeded runs from seed S (defaults 200 and 1), then prints one summary line from the shards' outcomes.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  const value = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} takes a whole number, not ${args[i + 1]}`);
  return value;
};
const runs = option('runs', 200);
const seed = option('seed', 1);
const out = mkdtempSync(join(tmpdir(), 'forkflush-chaos-'));
const started = Date.now();
const vitest = spawnSync('npx', ['vitest', 'run', '--config', 'vitest.chaos.config.ts'], {
  stdio: 'inherit',
  env: {
    ...process.env,
    FORKFLUSH_CHAOS_RUNS: String(runs),
    FORKFLUSH_CHAOS_SEED: String(seed),
    FORKFLUSH_CHAOS_OUT: out,
  },
});
const seconds = Math.round((Date.now() - started) / 1000);
const outcomes = readdirSync(out).flatMap((f) => JSON.parse(readFileSync(join(out, f), 'utf8')));
rmSync(out, { recursive: true, force: true });
const bad = outcomes.filter((o) => o.violations.length > 0).sort((a, b) => a.seed - b.seed);
const violations = bad.reduce((n, o) => n + o.violations.length, 0);
const faults = outcomes.reduce((n, o) => n + o.faults, 0);
const seeds = bad.length > 0 ? ` (seeds ${bad.map((o) => o.seed).join(', ')})` : '';
const missing = outcomes.length < runs ? ` (only ${outcomes.length} reported)` : '';
console.log(
  `chaos: ${runs} runs${missing}, ${violations} invariant violations, ${faults} faults injected, ${seconds} s${seeds}`,
);
process.exit(vitest.status === 0 && outcomes.length === runs ? 0 : 1);
