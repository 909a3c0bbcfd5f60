// The `forkflush` command line: parses flags, calls the local runner or the core, prints.
import { parseArgs } from 'node:util';
import { ConfigError, type ConfigOverrides, configJsonSchema, STRATEGIES, type Strategy } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { bestBranch, lineageBranch } from '../core/names.js';
import { planTable } from '../core/plan.js';
import { LEADERBOARD_HEADER, leaderboardRows, summary } from '../core/report.js';
import type { RunState } from '../core/state.js';
import { textTable } from '../core/text.js';
import { progressView } from '../local/progress.js';
import { writeReports } from '../local/reports.js';
import { drive } from '../local/runner.js';
import { loadConfig, type OpenRun, openRun, startRun } from '../local/start.js';

const USAGE = `forkflush: run an AI coding agent with the fork-and-flush method

Usage:
  forkflush run [DIR]      run the whole plan on the git repository DIR (default: .)
  forkflush plan [DIR]     print the plan: phases, branches, budget each, cumulative spend
  forkflush status [DIR]   show the newest run (or --run ID) of DIR
  forkflush resume [DIR]   continue an interrupted run without redoing finished episodes
  forkflush schema         print the JSON Schema of .github/autoresearch.yml

Options:
  --config FILE        config file (default: DIR/.github/autoresearch.yml)
  --strategy NAME      ${STRATEGIES.join(' | ')}
  --budget N           total budget, in the config's unit
  --branches K         branches per fork round (best-of-n: lineages)
  --seed N             seed of every random choice and of each episode's FORKFLUSH_SEED
  --concurrency N      episodes at once (default: K)
  --keep-rejected      keep the branches of rejected episodes
  --run ID             the run to show or resume (default: the newest)
  -h, --help           this text
`;

export interface Io {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  now: () => Date;
  /** Set when the user asks to stop (Ctrl-C). */
  signal?: AbortSignal;
}

export async function main(argv: string[], io: Io): Promise<number> {
  try {
    return await dispatch(argv, io);
  } catch (e) {
    if (e instanceof ConfigError) {
      io.stderr.write(`forkflush: the config is not valid:\n${e.problems.map((p) => `  ${p}`).join('\n')}\n`);
      return 2;
    }
    if (e instanceof UserError) {
      io.stderr.write(`forkflush: ${e.message}\n`);
      return 2;
    }
    const err = e as Error;
    io.stderr.write(`forkflush: failed: ${err.message}\n`);
    if (process.env.FORKFLUSH_DEBUG) io.stderr.write(`${err.stack}\n`);
    return 1;
  }
}

async function dispatch(argv: string[], io: Io): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (e) {
    throw new UserError(`${(e as Error).message.split('\n')[0]} (see forkflush --help)`);
  }
  const { values: v, positionals } = parsed;
  const [command, dir = '.', ...extra] = positionals;
  if (v.help || command === undefined || command === 'help') {
    io.stdout.write(USAGE);
    return command === undefined && !v.help ? 2 : 0;
  }
  if (extra.length > 0) throw new UserError(`unexpected argument ${extra[0]}: give one folder (see forkflush --help)`);
  const overrides = readOverrides(v);
  switch (command) {
    case 'schema':
      io.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
      return 0;
    case 'plan': {
      const { config } = await loadConfig(dir, v.config, overrides);
      io.stdout.write(`${planTable(config)}\n`);
      return 0;
    }
    case 'run': {
      const run = await startRun({
        dir,
        ...(v.config ? { configFile: v.config } : {}),
        overrides,
        ...(v.seed !== undefined ? { seed: integer('--seed', v.seed, 0) } : {}),
        ...(v.concurrency !== undefined ? { concurrency: integer('--concurrency', v.concurrency, 1) } : {}),
        keepRejected: v['keep-rejected'] ?? false,
        now: io.now(),
      });
      for (const w of run.warnings) io.stderr.write(`forkflush: note: ${w}\n`);
      const s = run.state;
      const c = s.config;
      io.stdout.write(
        `forkflush run ${s.id}: ${c.strategy}, budget ${c.budget.total} ${c.budget.unit}, K = ${c.fork.branches}, seed ${s.seed}\n` +
          `sandbox: ${sandboxLine(run)}\n` +
          `initial workspace: ${s.base.score === null ? `no score (${s.base.reason})` : `score ${s.base.score}`}\n`,
      );
      return go(run, io);
    }
    case 'resume': {
      const run = await openRun(dir, v.run);
      if (run.state.status === 'finished') {
        io.stdout.write(`run ${run.state.id} is already finished.\n`);
        return printResult(run, io);
      }
      for (const w of run.warnings) io.stderr.write(`forkflush: note: ${w}\n`);
      io.stdout.write(`forkflush: resuming run ${run.state.id}\nsandbox: ${sandboxLine(run)}\n`);
      return go(run, io);
    }
    case 'status': {
      const run = await openRun(dir, v.run);
      const { state } = run;
      io.stdout.write(`run ${state.id} (${run.store.dir})\n${summary(state)}\n`);
      const open = state.rounds.find((r) => !r.decision);
      if (open) {
        const left = open.episodes.filter((e) => !e.result).map((e) => e.id);
        io.stdout.write(`open round ${open.index} (${open.phase}): waiting for ${left.join(', ') || 'the decision'}\n`);
      }
      if (state.status !== 'finished') io.stdout.write(`continue it with: forkflush resume ${dir}\n`);
      io.stdout.write(`\n${textTable(LEADERBOARD_HEADER, leaderboardRows(state, 10))}\n`);
      return 0;
    }
    default:
      throw new UserError(
        `unknown command "${command}": use run, plan, status, resume or schema (see forkflush --help)`,
      );
  }
}

function sandboxLine(run: OpenRun): string {
  return run.isolation.sandbox
    ? `${run.isolation.label}: the agent and the grader are confined (workspace, context and box writable; home, repository and run folders hidden)`
    : `OFF, ${run.isolation.label.replace(/^off /, '')}: agents run with your user's rights`;
}

async function go(run: OpenRun, io: Io): Promise<number> {
  const start = Date.now();
  const view = progressView(io.stdout, start, () => Date.now());
  let result: Awaited<ReturnType<typeof drive>>;
  try {
    result = await drive(run.state, {
      store: run.store,
      forge: run.forge,
      info: run.info,
      isolation: run.isolation,
      onEvent: (e) => view.onEvent(e),
      ...(io.signal ? { signal: io.signal } : {}),
    });
  } finally {
    view.close();
  }
  run.state = result.state;
  if (result.interrupted) {
    await writeReports(run.store, result.state);
    io.stdout.write(
      `\ninterrupted: finished episodes are saved. Continue with: forkflush resume ${run.info.taskDir} --run ${result.state.id}\n`,
    );
    return 130;
  }
  return printResult(run, io);
}

async function printResult(run: OpenRun, io: Io): Promise<number> {
  const state: RunState = run.state;
  const { report, chart } = await writeReports(run.store, state);
  io.stdout.write(`\n${textTable(LEADERBOARD_HEADER, leaderboardRows(state, 10))}\n\n${summary(state)}\n`);
  const where = run.info.scratch ? ` (in ${run.info.repo})` : '';
  io.stdout.write(
    `lineage: ${lineageBranch(state.id, 0, state.lineages.length)}${where}\n` +
      `best:    ${state.best ? bestBranch(state.id) : 'none'}\n` +
      `report:  ${report}\nchart:   ${chart}\n`,
  );
  return 0;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      config: { type: 'string' },
      strategy: { type: 'string' },
      budget: { type: 'string' },
      branches: { type: 'string' },
      seed: { type: 'string' },
      concurrency: { type: 'string' },
      'keep-rejected': { type: 'boolean' },
      run: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

function readOverrides(v: ReturnType<typeof parse>['values']): ConfigOverrides {
  const o: ConfigOverrides = {};
  if (v.strategy !== undefined) {
    if (!(STRATEGIES as readonly string[]).includes(v.strategy)) {
      throw new UserError(`--strategy must be one of ${STRATEGIES.join(', ')}, got "${v.strategy}"`);
    }
    o.strategy = v.strategy as Strategy;
  }
  if (v.budget !== undefined) {
    const n = Number(v.budget);
    if (!(Number.isFinite(n) && n > 0)) throw new UserError(`--budget must be a number above 0, got "${v.budget}"`);
    o.budget = n;
  }
  if (v.branches !== undefined) o.branches = integer('--branches', v.branches, 1, 64);
  return o;
}

function integer(flag: string, text: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new UserError(
      `${flag} must be a whole number from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ''}, got "${text}"`,
    );
  }
  return n;
}
