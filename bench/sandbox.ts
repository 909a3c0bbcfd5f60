// What the trust boundary costs per episode, on the bundled example: one episode of its opening
// round (same seed, same work) run three ways, interleaved so they share the machine's noise:
//   in place      the agent unconfined, graded in its own workspace, committed there: an episode
//                 as forkflush ran it before the sandbox and the clean room (the reference);
//   clean room    sandbox off: the judge grades a fresh checkout of forkflush's own snapshot;
//   sandboxed     what runs now: the agent and both graders in bubblewrap, and the clean room.
// Then what one sandbox start costs (a folder of 200 files handed over, `true` run in a grader's
// sandbox), interleaved too:
//   shared        as before accounts: every sandbox as nobody, one process limit for all;
//   own account   now: a uid of its own leased for it (under root), started by a shell that makes
//                 it the OOM killer's first choice and sets umask 002.
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentFor } from '../src/agents/specs.js';
import { renderPrompt } from '../src/core/prompts.js';
import { applyOpen, reconcile } from '../src/core/reconcile.js';
import type { Episode, RunState } from '../src/core/state.js';
import { Git } from '../src/io/git.js';
import { runProcess } from '../src/io/process.js';
import type { Confinement, Wrapped } from '../src/io/sandbox.js';
import { withFilterAtFd3 } from '../src/io/seccomp.js';
import { startRun } from '../src/local/start.js';
import { type Isolation, isolationFor } from '../src/worker/boundary.js';
import { allowedEnv } from '../src/worker/env.js';
import { runEpisode } from '../src/worker/episode.js';
import { runGrader } from '../src/worker/grade.js';
import { startGradeService } from '../src/worker/grade-service.js';

const REPEAT = 7;
const example = join(import.meta.dirname, '..', '..', 'examples', 'maxsat');
const dir = mkdtempSync(join(tmpdir(), 'forkflush-bench-sandbox-'));
cpSync(example, dir, { recursive: true, filter: (src) => !src.includes('.forkflush') });
const run = await startRun({ dir, seed: 1, now: new Date() });
const first = reconcile(run.state)[0];
if (first?.type !== 'open') throw new Error('the example opens no round');
const state: RunState = applyOpen(run.state, first.round);
const episode = state.rounds[0]?.episodes[0] as Episode;
const prompt = renderPrompt({
  config: state.config,
  episode,
  task: run.info.task,
  best: null,
  gradeCommand: '$FORKFLUSH_GRADE',
  templates: run.info.templates,
});
const sandboxed = await isolationFor('required');
const off: Isolation = { sandbox: null, label: 'off (bench)' };

/** One episode through the worker, as a run does it. */
async function worker(isolation: Isolation): Promise<number> {
  const prepared = await run.forge.prepareEpisode(state, episode);
  const t = performance.now();
  await runEpisode({
    runId: state.id,
    config: state.config,
    episode,
    phase: 'opening',
    own: prepared.own,
    places: prepared.places,
    checkoutIndex: prepared.checkoutIndex,
    scratchDir: prepared.scratchDir,
    prompt,
    agent: agentFor(state.config),
    isolation,
  });
  return (performance.now() - t) / 1000;
}

/** The same episode the way forkflush ran one before its trust boundary. */
async function inPlace(): Promise<number> {
  const prepared = await run.forge.prepareEpisode(state, episode);
  const { workspace, box, context } = prepared.places;
  const t = performance.now();
  mkdirSync(box, { recursive: true });
  writeFileSync(join(box, 'prompt.md'), prompt);
  const env = { ...allowedEnv(process.env, []), HOME: box, TMPDIR: box };
  const config = state.config;
  const grading = await startGradeService({
    config,
    workdir: workspace,
    box,
    env,
    limit: Number.POSITIVE_INFINITY,
    onExhausted: () => {},
  });
  await agentFor(config).run({
    workdir: workspace,
    prompt,
    promptFile: join(box, 'prompt.md'),
    contextDir: context,
    usageFile: join(box, 'usage.json'),
    logFile: join(box, 'agent.log'),
    gradeCommand: grading.command,
    allowance: episode.allowance,
    unit: config.budget.unit,
    seed: episode.seed,
    episodeId: episode.id,
    deadlineMs: config.agent.timeout * 1000,
    deadlineIsBudget: false,
    env,
    signal: new AbortController().signal,
    spawn: runProcess,
    confined: false,
  });
  await grading.close();
  await runGrader(config, workspace, env);
  // The workspace may be the sandbox user's from an earlier variant (nobody's, under root).
  const git = new Git(workspace);
  await git.exec(['-c', 'safe.directory=*', 'add', '-A']);
  const tree = await git.out(['-c', 'safe.directory=*', 'write-tree']);
  await git.exec(['-c', 'safe.directory=*', 'commit-tree', tree, '-p', episode.base, '-m', 'in place']);
  return (performance.now() - t) / 1000;
}

const variants: Array<[string, () => Promise<number>]> = [
  ['in place', inPlace],
  ['clean room', () => worker(off)],
  ['sandboxed', () => worker(sandboxed)],
];
const times = new Map<string, number[]>(variants.map(([name]) => [name, []]));
await inPlace(); // warm the caches once
for (let i = 0; i < REPEAT; i++) for (const [name, fn] of variants) times.get(name)?.push(await fn());
rmSync(dir, { recursive: true, force: true });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const reference = median(times.get('in place') ?? []);
for (const [name] of variants) {
  const xs = times.get(name) ?? [];
  console.log(`${name.padEnd(10)} ${xs.map((x) => x.toFixed(3)).join(' ')} s (median ${median(xs).toFixed(3)} s)`);
}
/** The command line as forkflush made it before accounts: nobody for all, no OOM preference, no umask. */
function asBefore(w: Wrapped): Wrapped {
  const args = [...w.args];
  // The shell that starts bwrap (oom_score_adj, umask) was not there.
  if (w.file === '/bin/sh' && args[0] === '-c') args.splice(0, 2);
  const file = args.shift() as string;
  const nobody = args.map((a) => (/^--re[ug]id=/.test(a) ? `${a.slice(0, 8)}65534` : a));
  return { file, args: nobody, ...(w.fd3 ? { fd3: w.fd3 } : {}) };
}

function runWrapped(w: Wrapped, cwd: string): Promise<number | null> {
  return new Promise((resolve) => {
    const child = withFilterAtFd3(w.fd3, (extra) =>
      spawn(w.file, w.args, { cwd, stdio: ['ignore', 'ignore', 'ignore', ...extra] }),
    );
    child.on('close', (code) => resolve(code));
  });
}

/** One sandbox start, in milliseconds: a folder of 200 files handed over, `true` run. */
async function start(before: boolean): Promise<number> {
  const s = sandboxed.sandbox;
  if (!s) throw new Error('no sandbox');
  const folder = mkdtempSync(join(tmpdir(), 'forkflush-bench-start-'));
  for (let i = 0; i < 200; i++) writeFileSync(join(folder, `f${i}`), 'x');
  mkdirSync(join(folder, 'tmp'));
  const account = s.account();
  const c: Confinement = {
    writable: [folder],
    readable: [],
    hidden: [],
    tmp: join(folder, 'tmp'),
    network: false,
    grader: true,
    account,
  };
  const t = performance.now();
  if (before) await runWrapped({ file: 'chown', args: ['-R', '--no-dereference', '65534:65534', folder] }, '/');
  else await s.handOver(c);
  const w = s.wrap(c, folder, 'true', []);
  const code = await runWrapped(before ? asBefore(w) : w, folder);
  const ms = performance.now() - t;
  account.release();
  rmSync(folder, { recursive: true, force: true });
  if (code !== 0) throw new Error(`the sandbox start failed (exit ${code})`);
  return ms;
}

const STARTS = 40;
const starts = { shared: [] as number[], own: [] as number[] };
await start(false);
for (let i = 0; i < STARTS; i++) {
  starts.shared.push(await start(true));
  starts.own.push(await start(false));
}
const [shared, own] = [median(starts.shared), median(starts.own)];
console.log(
  `sandbox start (median of ${STARTS}): shared ${shared.toFixed(1)} ms, own account ${own.toFixed(1)} ms ` +
    `(${own >= shared ? '+' : ''}${(own - shared).toFixed(1)} ms; accounts: ${sandboxed.sandbox?.accounts})`,
);

const clean = median(times.get('clean room') ?? []);
const boxed = median(times.get('sandboxed') ?? []);
console.log(
  `sandbox: one episode of the example ${boxed.toFixed(2)} s sandboxed vs ${reference.toFixed(2)} s in place ` +
    `(ratio ${(boxed / reference).toFixed(2)}; clean room alone ${(clean / reference).toFixed(2)}; ${sandboxed.label}); ` +
    `a sandbox start ${own.toFixed(1)} ms with its own account vs ${shared.toFixed(1)} ms shared`,
);
