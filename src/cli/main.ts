// The `forkflush` command line: parses flags (args.ts), calls the local runner or the core, prints.
// Exit codes: 0 done; 1 the run produced nothing (no score, no episode that did any work), or
// failed; 2 something to fix first (config, flags, files not committed, a path the sandbox hides,
// an agent that cannot start or work: its key, its quota, its model, crashes that repeat; setup
// commands that fail); 130 interrupted.
import pkg from '../../package.json' with { type: 'json' };
import { parseVariantFlag, type Variant } from '../core/compare-config.js';
import { comparePlan, compareText } from '../core/compare-report.js';
import { ConfigError, type ConfigOverrides, configJsonSchema, STRATEGIES, type Strategy } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { MAX_BRANCHES, MAX_COMPARE_SEEDS } from '../core/method.js';
import { lineageBranch } from '../core/names.js';
import { plan, planTable, planWarnings, widthText } from '../core/plan.js';
import { probePlan, probeText } from '../core/probe.js';
import { RecordError } from '../core/records.js';
import { LEADERBOARD_HEADER, leaderboardRows, statusJson, summary, takeHomeLines } from '../core/report.js';
import { type RunState, setupFailed } from '../core/state.js';
import { nothingDone, retryStopped, runStop } from '../core/stop.js';
import { shellQuote, textTable } from '../core/text.js';
import { type CompareOptions, runCompare } from '../local/compare.js';
import { runProbe } from '../local/probe.js';
import { progressView } from '../local/progress.js';
import { writeReports } from '../local/reports.js';
import { drive } from '../local/runner.js';
import { loadConfig, type OpenRun, openRun, retryStop, startRun } from '../local/start.js';
import { COMMANDS, commandUsage, type Parsed, parseCommandLine, usage } from './args.js';
import { initTask } from './init.js';
import { mapCommand } from './map.js';
import { smoke } from './smoke.js';

export const VERSION: string = pkg.version;

export interface Io {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  /** For questions (forkflush init); a terminal when isTTY. */
  stdin?: NodeJS.ReadStream;
  now: () => Date;
  /** Set when the user asks to stop (Ctrl-C). */
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

export async function main(argv: string[], io: Io): Promise<number> {
  try {
    return await dispatch(argv, io);
  } catch (e) {
    if (e instanceof ConfigError) {
      io.stderr.write(`forkflush: the config is not valid:\n${e.problems.map((p) => `  ${p}`).join('\n')}\n`);
      return 2;
    }
    if (e instanceof UserError || e instanceof RecordError) {
      io.stderr.write(`forkflush: ${e.message}\n`);
      return 2;
    }
    const err = e as Error;
    io.stderr.write(`forkflush: failed: ${err.message}\n`);
    if ((io.env ?? process.env).FORKFLUSH_DEBUG) io.stderr.write(`${err.stack}\n`);
    return 1;
  }
}

async function dispatch(argv: string[], io: Io): Promise<number> {
  const p = parseCommandLine(argv);
  if (p.version) {
    io.stdout.write(`forkflush ${VERSION}\n`);
    return 0;
  }
  if (p.command === null) {
    // No command: the usage is the answer to --help, and a mistake otherwise.
    (p.help ? io.stdout : io.stderr).write(usage(VERSION));
    return p.help ? 0 : 2;
  }
  if (p.help) {
    io.stdout.write(commandUsage(p.command));
    return 0;
  }
  const name = p.command.name;
  if (name === 'help') {
    const [topic] = p.positionals;
    const c = topic ? COMMANDS.find((x) => x.name === topic) : undefined;
    if (topic && !c) throw new UserError(`no command "${topic}": use ${COMMANDS.map((x) => x.name).join(', ')}`);
    io.stdout.write(c ? commandUsage(c) : usage(VERSION));
    return 0;
  }
  if (name === 'schema') {
    if (p.positionals.length > 0) throw new UserError('forkflush schema takes no arguments');
    io.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
    return 0;
  }
  const [dir = '.', ...extra] = p.positionals;
  if (extra.length > 0)
    throw new UserError(`unexpected argument ${extra[0]}: give one folder (see forkflush help ${name})`);
  const v = p.values;
  switch (name) {
    case 'plan': {
      const { config } = await loadConfig(dir, str(v.config), readOverrides(v));
      if (v.json) {
        const json = {
          strategy: config.strategy,
          budget: config.budget,
          branches: config.fork.branches,
          phases: plan(config),
          warnings: planWarnings(config),
        };
        io.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
      } else {
        // The notes a run would print before it starts, on the plan they are about.
        for (const w of planWarnings(config)) io.stderr.write(`forkflush: note: ${w}\n`);
        io.stdout.write(`${planTable(config)}\n`);
      }
      return 0;
    }
    case 'run':
      return run(dir, p, io);
    case 'resume': {
      const open = await openRun(dir, str(v.run));
      if (open.state.status === 'finished') {
        io.stdout.write(`run ${open.state.id} is already finished.\n`);
        return printResult(open, io);
      }
      const driver = await open.store.driver();
      if (driver !== null)
        throw new UserError(
          `run ${open.state.id} is being driven by process ${driver}: stop it first, or wait for it to end`,
        );
      const stop = runStop(open.state);
      if (stop && !retryStopped(open.state)) {
        // Nothing a resume could do: the run keeps its config, and the stop says what needs a new run.
        io.stderr.write(`forkflush: run ${open.state.id} stopped: ${stop.message}\n`);
        return stop.code;
      }
      for (const w of open.warnings) io.stderr.write(`forkflush: note: ${w}\n`);
      io.stdout.write(`forkflush: resuming run ${open.state.id}\nsandbox: ${sandboxLine(open)}\n`);
      const stopping = retryStopped(open.state)?.episodes ?? [];
      const again = await retryStop(open);
      if (again !== null)
        io.stdout.write(
          stopping.every(setupFailed)
            ? `round ${again}: every branch's setup failed last time; running it again\n`
            : `round ${again}: ${stopping.map((e) => e.id).join(', ')} stopped the run last time; running ${stopping.length === 1 ? 'it' : 'them'} again\n`,
        );
      return go(open, io);
    }
    case 'status':
      return status(dir, p, io);
    case 'init':
      return initTask(dir, v, io);
    case 'compare':
      return compareCommand(dir, p, io);
    case 'probe':
      return probeCommand(dir, p, io);
    case 'map':
      return mapCommand(dir, p, io, integer);
  }
  throw new UserError(`unknown command "${name}"`);
}

async function run(dir: string, p: Parsed, io: Io): Promise<number> {
  const v = p.values;
  if (v.smoke === true) return smoke({ dir, configFile: str(v.config), overrides: readOverrides(v) }, io);
  const dryRun = v['dry-run'] === true;
  const open = await startRun({
    dir,
    ...(v.config ? { configFile: str(v.config) } : {}),
    overrides: readOverrides(v),
    ...(v.seed !== undefined ? { seed: integer('--seed', str(v.seed) ?? '', 0) } : {}),
    ...(v.concurrency !== undefined ? { concurrency: integer('--concurrency', str(v.concurrency) ?? '', 1) } : {}),
    keepRejected: v['keep-rejected'] === true,
    now: io.now(),
    dryRun,
    ...(io.env ? { env: io.env } : {}),
  });
  for (const w of open.warnings) io.stderr.write(`forkflush: note: ${w}\n`);
  const s = open.state;
  const c = s.config;
  io.stdout.write(
    `forkflush ${dryRun ? 'dry run' : `run ${s.id}`}: ${c.strategy}, budget ${c.budget.total} ${c.budget.unit}${widthText(c)}, seed ${s.seed}\n` +
      `sandbox: ${sandboxLine(open)}\n` +
      `initial workspace: ${s.base.score === null ? `no score (${s.base.reason})` : `score ${s.base.score}`}\n`,
  );
  if (dryRun) {
    // Graded as committed, like the working tree with its uncommitted files (start.ts): no score in both.
    const unscored =
      s.base.score === null
        ? 'note: the initial workspace has no score, as committed and as it is: fine for a task that starts from nothing; ' +
          'otherwise fix the grader first (the run stops after its opening round if no episode gets a score either)\n'
        : '';
    io.stdout.write(
      `\n${planTable(c)}\n\n${unscored}the checks passed; no agent was started. Run it: forkflush run ${dir}${argvTail(p)}\n`,
    );
    return 0;
  }
  return go(open, io);
}

async function status(dir: string, p: Parsed, io: Io): Promise<number> {
  const open = await openRun(dir, str(p.values.run));
  const { state } = open;
  const pid = state.status === 'finished' ? null : await open.store.driver();
  // A run its setup stopped is resumed only where a resume runs the round again (retryStopped).
  const stop = pid === null ? runStop(state) : null;
  const resumable = state.status !== 'finished' && pid === null && (!stop || retryStopped(state) !== null);
  const resume = resumable ? `forkflush resume ${dir} --run ${state.id}` : null;
  if (p.values.json) {
    const json = statusJson(state, { folder: open.store.dir, live: pid ? { pid } : null, resume });
    io.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
    return 0;
  }
  const where =
    state.status === 'finished' ? '' : pid ? `, running in process ${pid}` : stop ? ', stopped' : ', interrupted';
  io.stdout.write(`run ${state.id} (${open.store.dir})${where}\n${summary(state)}\n`);
  const current = state.rounds.find((r) => !r.decision);
  if (current) {
    const left = current.episodes.filter((e) => !e.result).map((e) => e.id);
    io.stdout.write(
      `open round ${current.index} (${current.phase}): waiting for ${left.join(', ') || 'the decision'}\n`,
    );
  }
  if (resume)
    io.stdout.write(
      stop ? `after the fix, continue it with ${resume}\n` : `nothing is driving it: continue it with ${resume}\n`,
    );
  io.stdout.write(`\n${textTable(LEADERBOARD_HEADER, leaderboardRows(state, 10))}\n`);
  return 0;
}

function sandboxLine(open: OpenRun): string {
  return open.isolation.sandbox
    ? `${open.isolation.label}: the agent and the grader are confined (workspace, context and box writable; home, repository and run folders hidden)`
    : `OFF, ${open.isolation.label.replace(/^off /, '')}: agents run with your user's rights`;
}

async function go(open: OpenRun, io: Io): Promise<number> {
  const start = Date.now();
  const view = progressView(io.stdout, start, () => Date.now(), io.env ?? process.env);
  let result: Awaited<ReturnType<typeof drive>>;
  try {
    result = await drive(open.state, {
      store: open.store,
      forge: open.forge,
      info: open.info,
      isolation: open.isolation,
      onEvent: (e) => view.onEvent(e),
      ...(io.signal ? { signal: io.signal } : {}),
    });
  } finally {
    view.close();
  }
  open.state = result.state;
  if (result.stopped) {
    await writeReports(open.store, result.state, placeOf(open));
    // One line: what happened, the agent's own words, what to do, and the command that continues.
    const resume = retryStopped(result.state)
      ? `; after the fix: forkflush resume ${open.info.taskDir} --run ${result.state.id}`
      : '';
    io.stderr.write(`\nforkflush: ${result.stopped.message}${resume}\n`);
    io.stdout.write(`report: ${open.store.path('report.md')}\n`);
    return result.stopped.code;
  }
  if (result.problem) {
    // No reports: the disk that is full would refuse them.
    io.stderr.write(
      `\nforkflush: ${result.problem}\nthen: forkflush resume ${open.info.taskDir} --run ${result.state.id}\n`,
    );
    return 1;
  }
  if (result.interrupted) {
    await writeReports(open.store, result.state, placeOf(open));
    io.stdout.write(
      `\ninterrupted: finished episodes are saved. Continue with: forkflush resume ${open.info.taskDir} --run ${result.state.id}\n`,
    );
    return 130;
  }
  return printResult(open, io);
}

const placeOf = (open: OpenRun) => ({ repo: open.info.repo, taskDir: open.info.taskDir, scratch: open.info.scratch });

async function printResult(open: OpenRun, io: Io): Promise<number> {
  const state: RunState = open.state;
  const { report, chart } = await writeReports(open.store, state, placeOf(open));
  io.stdout.write(`\n${textTable(LEADERBOARD_HEADER, leaderboardRows(state, 10))}\n\n${summary(state)}\n`);
  const where = open.info.scratch ? ` (in ${open.info.repo})` : '';
  io.stdout.write(
    `lineage: ${lineageBranch(state.id, 0, state.lineages.length)}${where}\n` +
      `report:  ${report}\nchart:   ${chart}\n`,
  );
  const home = takeHomeLines(state, placeOf(open));
  if (home.length > 0) io.stdout.write(`\n${home.join('\n')}\n`);
  const nothing = nothingDone(state);
  if (nothing) {
    io.stderr.write(
      `forkflush: ${nothing}: see the reasons in the report, and the agents' and graders' logs in episodes/ of the run folder\n`,
    );
    return 1;
  }
  return 0;
}

// compare and probe: the runs in local/compare.ts and local/probe.ts, the figures in the core.

async function compareCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const v = p.values;
  const out = v.json ? io.stderr : io.stdout;
  const strategies = str(v.strategies)
    ?.split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  for (const x of strategies ?? [])
    if (!(STRATEGIES as readonly string[]).includes(x))
      throw new UserError(`--strategies: "${x}" is not a strategy: use ${STRATEGIES.join(', ')}`);
  const variants = (Array.isArray(v.variant) ? v.variant : []).map((text): Variant => {
    const r = parseVariantFlag(text);
    if ('problem' in r) throw new UserError(r.problem);
    return r;
  });
  if (new Set(variants.map((x) => x.name)).size < variants.length) throw new UserError('--variant: names must differ');
  const o: Omit<CompareOptions, 'log'> = {
    ...shared(dir, p, io),
    kind: 'compare',
    ...(strategies ? { strategies: strategies as Strategy[] } : {}),
    ...(v.seeds !== undefined ? { seeds: integer('--seeds', str(v.seeds) ?? '', 1, MAX_COMPARE_SEEDS) } : {}),
    ...(variants.length > 0 ? { variants } : {}),
    ...(v.branches !== undefined ? { branches: integer('--branches', str(v.branches) ?? '', 1, MAX_BRANCHES) } : {}),
  };
  const c = await runCompare({ ...o, log: (line) => out.write(`${line}\n`) });
  const r = c.results;
  if (v['dry-run']) {
    out.write(
      `${comparePlan(c.manifest, r, c.resumed)}\nthe checks passed; no agent was started. Run it: forkflush compare ${dir}${argvTail(p)}\n`,
    );
    // JSON: the results as a compare starts them (every run "not started"), marked as a dry run.
    if (v.json) io.stdout.write(`${JSON.stringify({ ...r, dryRun: true }, null, 2)}\n`);
    return 0;
  }
  return finishCompare(c, `${compareText(r)}\n`, r, dir, io, v.json === true);
}

async function probeCommand(dir: string, p: Parsed, io: Io): Promise<number> {
  const v = p.values;
  const out = v.json ? io.stderr : io.stdout;
  const budgetEach =
    v['budget-each'] !== undefined ? positive('--budget-each', str(v['budget-each']) ?? '') : undefined;
  const probe = await runProbe({
    ...shared(dir, p, io),
    ...(v.runs !== undefined ? { runs: integer('--runs', str(v.runs) ?? '', 2, MAX_COMPARE_SEEDS) } : {}),
    ...(budgetEach !== undefined ? { budgetEach } : {}),
    log: (line) => out.write(`${line}\n`),
  });
  const { outcome: c, analysis, planned, budgetEach: each } = probe;
  if (v['dry-run']) {
    const plan = probePlan({
      runs: c.manifest.entries.length,
      each,
      planned,
      unit: c.results.budget.unit,
      initial: c.results.initial,
    });
    out.write(
      `${c.manifest.id}: ${plan}\nthe checks passed; no agent was started. Run it: forkflush probe ${dir}${argvTail(p)}\n`,
    );
    if (v.json)
      io.stdout.write(`${JSON.stringify({ ...c.results, dryRun: true, budgetEach: each, planned }, null, 2)}\n`);
    return 0;
  }
  const json = { ...c.results, probe: analysis };
  return finishCompare(c, `${probeText(analysis)}\n`, json, dir, io, v.json === true);
}

function shared(dir: string, p: Parsed, io: Io) {
  const v = p.values;
  if (
    v.resume &&
    ['strategies', 'seeds', 'variant', 'budget', 'branches', 'seed', 'runs', 'budget-each'].some(
      (k) => v[k as keyof typeof v] !== undefined,
    )
  )
    throw new UserError(
      '--resume continues it as it was planned: drop the other flags (all but --config, --concurrency and --json)',
    );
  return {
    dir,
    ...(v.config ? { configFile: str(v.config) } : {}),
    ...(v.seed !== undefined ? { seed: integer('--seed', str(v.seed) ?? '', 0, 2 ** 31 - MAX_COMPARE_SEEDS) } : {}),
    ...(v.budget !== undefined ? { budget: positive('--budget', str(v.budget) ?? '') } : {}),
    ...(v.concurrency !== undefined ? { concurrency: integer('--concurrency', str(v.concurrency) ?? '', 1) } : {}),
    resume: v.resume === true,
    dryRun: v['dry-run'] === true,
    now: io.now,
    ...(io.env ? { env: io.env } : {}),
    ...(io.signal ? { signal: io.signal } : {}),
  };
}

/** The end of compare and probe: the figures, where the files are, how to go on; the exit code. */
function finishCompare(
  c: Awaited<ReturnType<typeof runCompare>>,
  text: string,
  json: object,
  dir: string,
  io: Io,
  asJson: boolean,
): number {
  const kind = c.manifest.kind;
  if (asJson) io.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  else
    io.stdout.write(
      `\n${text}\nresults: ${c.folder}/results.json\nreport:  ${c.folder}/report.md\nchart:   ${c.folder}/chart.svg\n`,
    );
  if (c.code === 2)
    io.stderr.write(`forkflush: ${c.message}\nfix it, then continue with: forkflush ${kind} ${dir} --resume\n`);
  if (c.code === 130)
    io.stderr.write(`\ninterrupted: finished runs are saved. Continue with: forkflush ${kind} ${dir} --resume\n`);
  if (c.code === 1) io.stderr.write(`forkflush: no run of the ${kind} got a score: see each run's report.md\n`);
  return c.code;
}

/** The flags of this command line, for the command that runs what a dry run checked. */
function argvTail(p: Parsed): string {
  const parts: string[] = [];
  for (const [k, val] of Object.entries(p.values)) {
    if (k === 'dry-run' || val === false || val === undefined) continue;
    for (const x of Array.isArray(val) ? val : [val])
      parts.push(x === true ? `--${k}` : `--${k} ${shellQuote(String(x))}`);
  }
  return parts.length > 0 ? ` ${parts.join(' ')}` : '';
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function readOverrides(v: Parsed['values']): ConfigOverrides {
  const o: ConfigOverrides = {};
  const strategy = str(v.strategy);
  if (strategy !== undefined) {
    if (!(STRATEGIES as readonly string[]).includes(strategy)) {
      throw new UserError(`--strategy must be one of ${STRATEGIES.join(', ')}, got "${strategy}"`);
    }
    o.strategy = strategy as Strategy;
  }
  const budget = str(v.budget);
  if (budget !== undefined) o.budget = positive('--budget', budget);
  const branches = str(v.branches);
  if (branches !== undefined) o.branches = integer('--branches', branches, 1, MAX_BRANCHES);
  return o;
}

export function positive(flag: string, text: string): number {
  const n = Number(text);
  if (!(text.trim() !== '' && Number.isFinite(n) && n > 0)) {
    throw new UserError(`${flag} must be a number above 0, got "${text}"`);
  }
  return n;
}

export function integer(flag: string, text: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new UserError(
      `${flag} must be a whole number from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ''}, got "${text}"`,
    );
  }
  return n;
}
