// Orchestration overhead of a whole run: wall time minus the time agents and graders take on the
// run's critical path (grading the initial workspace, then the slowest episode of each round),
// as a share of wall time. Runs the bundled example, with its stand-in agent and real grader.
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drive } from '../src/local/runner.js';
import { startRun } from '../src/local/start.js';

const example = join(import.meta.dirname, '..', '..', 'examples', 'maxsat');
const dir = mkdtempSync(join(tmpdir(), 'forkflush-bench-overhead-'));
cpSync(example, dir, { recursive: true, filter: (src) => !src.includes('.forkflush') });

const started = performance.now();
const run = await startRun({ dir, seed: 1, now: new Date() });
const { state } = await drive(run.state, run);
const wall = (performance.now() - started) / 1000;

let work = state.base.graderSeconds ?? 0;
for (const round of state.rounds) {
  work += Math.max(...round.episodes.map((e) => (e.result?.agentSeconds ?? 0) + (e.result?.graderSeconds ?? 0)));
}
const episodes = state.rounds.reduce((n, r) => n + r.episodes.length, 0);
const overhead = wall - work;
rmSync(dir, { recursive: true, force: true });
console.log(
  `run: ${state.rounds.length} rounds, ${episodes} episodes, wall ${wall.toFixed(1)} s, agents+graders on the critical path ${work.toFixed(1)} s, ` +
    `overhead per round ${((overhead / state.rounds.length) * 1000).toFixed(0)} ms`,
);
console.log(`overhead: ${((overhead / wall) * 100).toFixed(1)}% of run wall time`);
