// `forkflush map`: the idea map of a run or a compare (README, "Idea maps"). It finds the runs
// (map-target.ts), samples their snapshots (core/map/sample.ts), asks the judge for a spec of each
// and for triplet answers (map-calls.ts, map-judge.ts: any agent kind, in the sandbox, within
// map.budget), keeps every answer in the cache (map-cache.ts) as it lands, then fits the map in the
// core (core/map/record.ts) and writes map.json and map.svg beside the run's or the compare's results,
// whose report.md then shows it. A judge that fails is reported, never papered over: a map with
// too many failed calls is not drawn.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { agentFor } from '../agents/specs.js';
import type { Config } from '../core/config.js';
import { renderMapSvg } from '../core/map/chart.js';
import { specPrompt, tripletFile, tripletPrompt } from '../core/map/prompts.js';
import { buildMap, type Judgment, type MapRecord, type MapSnapshot } from '../core/map/record.js';
import { amount } from '../core/map/report.js';
import { newQuestions, runSnapshots, tripletKey } from '../core/map/sample.js';
import { type MapSettings, mapSettings, tripletCount } from '../core/map/settings.js';
import {
  MAP_CALL_ESTIMATE,
  MAP_CONCURRENCY,
  MAP_FAILURES_IN_A_ROW,
  MAP_MOST_FAILED,
  MAP_SEED,
} from '../core/method.js';
import type { RunState } from '../core/state.js';
import { removeTree } from '../io/agent-files.js';
import { isolationFor } from '../worker/boundary.js';
import { checkoutInto, type OwnRepo } from '../worker/cleanroom.js';
import { LocalForge } from './forge.js';
import { judgeKey, MapCache } from './map-cache.js';
import { ask, Ledger, type MapPlan, type PoolEnd, planOf, pool } from './map-calls.js';
import { taskFolder } from './start.js';

export type { MapPlan } from './map-calls.js';

import { type JudgeCall, JudgeInterrupted, type JudgeSetup, type MapStep, readOnly } from './map-judge.js';
import { findTarget, mapConfig, refreshReports } from './map-target.js';
import { RunStore, writeAtomic } from './store.js';

export interface MapOptions {
  dir: string;
  configFile?: string;
  run?: string;
  compare?: string;
  dryRun?: boolean;
  concurrency?: number;
  seed?: number;
  now: () => Date;
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  log: (line: string) => void;
}

export interface MapOutcome {
  /** 0 drawn; 1 the judge failed or the budget ran out (nothing drawn); 2 a setup mistake; 130 interrupted. */
  code: number;
  message?: string;
  plan: MapPlan;
  record?: MapRecord;
  /** map.json and map.svg, when drawn. */
  files?: { json: string; svg: string; folder: string };
  /** Where the logs of failed judge calls are, when some failed. */
  failedLogs?: string;
}

type Specs = Map<string, { spec: string; spent: number }>;

export async function makeMap(o: MapOptions): Promise<MapOutcome> {
  const taskDir = await taskFolder(o.dir);
  const target = await findTarget(taskDir, o);
  const config = await mapConfig(taskDir, target, o.configFile);
  const settings = mapSettings(config);
  const runs = target.runs.map((r) => ({ state: r.state, task: r.info.task, variant: r.variant }));
  return mapRuns({
    ...o,
    target: { kind: target.kind, id: target.id },
    folder: target.folder,
    runs,
    config,
    settings,
    cacheDir: join(RunStore.runsDir(taskDir), 'map-cache', judgeKey(settings.judge)),
    work: join(target.folder, 'map'),
    repos: async () => {
      const repos = new Map<string, OwnRepo>();
      const hidden = [taskDir, RunStore.runsDir(taskDir)];
      for (const r of target.runs) {
        const { own, commonDir } = await new LocalForge(r.info.repo, r.store).open();
        repos.set(r.state.id, own);
        hidden.push(r.info.repo, commonDir);
      }
      return { repos, hidden };
    },
    lock: () => new RunStore(join(target.folder, 'map')).lock(),
    drawn: () => refreshReports(taskDir, target),
  });
}

/** A run as the map reads it: its state, its task's text and its compare variant (null: none). */
export interface MapRunInput {
  state: RunState;
  task: string;
  variant: string | null;
}

/**
 * What drawing a map needs, whichever shell asks: the runs' states, the git repositories holding
 * their commits (opened when the judge is about to be asked), the folder map.json and map.svg go
 * to, the cache's folder (one judge's: map-cache.ts judgeKey) and a work folder for the calls.
 */
export interface MapJob extends Omit<MapOptions, 'dir' | 'configFile' | 'run' | 'compare'> {
  target: MapRecord['target'];
  folder: string;
  runs: MapRunInput[];
  config: Config;
  settings: MapSettings;
  cacheDir: string;
  work: string;
  /** Each run's repository by run id, and the places the judge must not see. */
  repos: () => Promise<{ repos: Map<string, OwnRepo>; hidden: string[] }>;
  /** Holds the work folder against another map at the same time (released when the map ends). */
  lock?: () => Promise<() => Promise<void>>;
  /** Once map.json and map.svg are written (the local reports show the map). */
  drawn?: () => Promise<void>;
}

/** Samples the runs' snapshots, asks the judge (what the cache lacks), fits and writes the map. */
export async function mapRuns(j: MapJob): Promise<MapOutcome> {
  const { settings } = j;
  const seed = j.seed ?? MAP_SEED;
  const snapshots = j.runs.flatMap((r) =>
    runSnapshots(r.state, settings.snapshots).map(
      (x): MapSnapshot => ({ ...x, strategy: r.state.config.strategy, variant: r.variant, seed: r.state.seed }),
    ),
  );
  const cache = await MapCache.open(j.cacheDir, settings.judge);
  const specs: Specs = new Map();
  for (const x of snapshots) {
    const c = await cache.spec(x.commit);
    if (c) specs.set(x.commit, c);
  }
  const plan = planOf({ ...j.target, folder: j.folder, runs: j.runs }, snapshots, specs, cache, settings, seed);
  if (j.dryRun) return { code: 0, plan };
  if (snapshots.length < 3)
    return {
      code: 1,
      plan,
      message: `${j.target.kind} ${j.target.id} has ${snapshots.length} snapshots: a map needs 3`,
    };
  await mkdir(j.work, { recursive: true, mode: 0o700 });
  await cache.make();
  const release = j.lock ? await j.lock() : async () => {};
  try {
    return await draw(await prepare({ j, seed, snapshots, cache, specs, plan }));
  } catch (e) {
    if (e instanceof JudgeInterrupted)
      return { code: 130, plan, message: 'interrupted: every answer so far is kept; run forkflush map again to go on' };
    throw e;
  } finally {
    await removeTree(join(j.work, 'calls')).catch(() => {});
    await release();
  }
}

interface Mapping {
  j: MapJob;
  seed: number;
  snapshots: MapSnapshot[];
  cache: MapCache;
  specs: Specs;
  plan: MapPlan;
}

interface Ready extends Mapping {
  setup: JudgeSetup;
  repos: Map<string, OwnRepo>;
  ledger: Ledger;
  calls: MapRecord['calls'];
  failed: MapRecord['failed'];
  concurrency: number;
}

/** The judge's setup (its adapter, the sandbox, the places it must not see) and the budget's ledger. */
async function prepare(m: Mapping): Promise<Ready> {
  const { j } = m;
  const isolation = await isolationFor(j.config.sandbox.mode);
  if (isolation.warning) j.log(`note: ${isolation.warning}`);
  const { repos, hidden } = await j.repos();
  const setup: JudgeSetup = {
    adapter: agentFor({ ...j.config, agent: j.settings.judge }),
    judge: j.settings.judge,
    config: j.config,
    isolation,
    env: j.env ?? process.env,
    work: join(j.work, 'calls'),
    failedLogs: join(j.work, 'failed'),
    hidden: [...new Set(hidden)],
    unit: j.settings.unit,
    signal: j.signal ?? new AbortController().signal,
  };
  // Only their ratio matters; a judge whose calls so far reported nothing is weighed by the rough figures.
  const rough = MAP_CALL_ESTIMATE;
  const unit = j.settings.unit;
  const weights = {
    spec: m.plan.estimate.spec.each || rough.spec[unit],
    triplet: m.plan.estimate.triplet.each || rough.triplet[unit],
  };
  // What the specs it reuses cost, and what its earlier calls that brought no answer cost.
  const target = `${j.target.kind} ${j.target.id}`;
  const ledger = new Ledger(
    j.settings.budget,
    [...m.specs.values()].reduce((s, x) => s + x.spent, 0) + m.cache.unansweredSpent(target),
    weights,
    (spent) => m.cache.saveUnanswered(target, spent),
  );
  ledger.plan({ spec: m.plan.specs.toAsk, triplet: m.plan.triplets.toAsk });
  const p = m.plan;
  j.log(
    `map of ${p.target.kind} ${p.target.id}: ${p.snapshots} snapshots of ${p.runs} run(s); judge ${p.judge}; ` +
      `${p.specs.toAsk} specs and about ${p.triplets.toAsk} judgments to ask (${p.specs.cached} and ${p.triplets.cached} cached); ` +
      `budget ${amount(j.settings.budget)} ${j.settings.unit}`,
  );
  return {
    ...m,
    setup,
    repos,
    ledger,
    calls: { spec: { made: 0, cached: m.specs.size, failed: 0 }, triplet: { made: 0, cached: 0, failed: 0 } },
    failed: { specs: [], judgments: 0, errors: [] },
    concurrency: j.concurrency ?? MAP_CONCURRENCY,
  };
}

async function draw(r: Ready): Promise<MapOutcome> {
  const toSpec = r.snapshots.filter((x) => !r.specs.has(x.commit));
  const specEnd = await pool(toSpec, r.concurrency, 'specs', r.j.log, (x) => askSpec(r, x));
  const specStop = stopped(r, specEnd, 'spec', toSpec.length);
  if (specStop) return specStop;
  const mapped = r.snapshots.filter((x) => r.specs.has(x.commit));
  const { questions, answered } = questionsFor(r, mapped);
  await baseCheckout(r);
  const tripletEnd = await pool(questions, r.concurrency, 'judgments', r.j.log, (q) => askTriplet(r, q, answered));
  const tripletStop = stopped(r, tripletEnd, 'triplet', questions.length);
  if (tripletStop) return tripletStop;
  if (answered.length === 0)
    return {
      code: 1,
      plan: r.plan,
      message: 'the judge answered no triplet question: there is nothing to fit a map to',
    };
  const { j } = r;
  const first = j.runs[0];
  const record = buildMap({
    target: r.plan.target,
    createdAt: j.now().toISOString(),
    direction: first?.state.config.grader.direction ?? 'maximize',
    judge: { kind: j.settings.judge.kind, label: r.plan.judge },
    embedding: j.settings.embedding,
    seed: r.seed,
    snapshots: mapped,
    judgments: answered,
    heldOutShare: j.settings.heldOut,
    failed: { ...r.failed, errors: r.failed.errors.slice(0, 5) },
    calls: r.calls,
    spent: r.ledger.spent,
    unit: j.settings.unit,
    budget: j.settings.budget,
  });
  const json = join(j.folder, 'map.json');
  const svg = join(j.folder, 'map.svg');
  await writeAtomic(json, `${JSON.stringify(record, null, 1)}\n`);
  await writeAtomic(svg, renderMapSvg(record, { title: `Idea map of ${j.target.kind} ${j.target.id}` }));
  await j.drawn?.();
  const failedAny = r.failed.errors.length > 0;
  return {
    code: 0,
    plan: r.plan,
    record,
    files: { json, svg, folder: j.folder },
    ...(failedAny ? { failedLogs: r.setup.failedLogs } : {}),
  };
}

/** A spec of a snapshot, asked in a read-only checkout of its commit, kept as soon as it lands. */
async function askSpec(r: Ready, x: MapSnapshot) {
  const run = r.j.runs.find((y) => y.state.id === x.run);
  const own = r.repos.get(x.run);
  if (!run || !own) throw new Error(`no run ${x.run} for snapshot ${x.commit}`);
  const name = `spec-${x.commit.slice(0, 16)}`;
  const config = run.state.config;
  const call: JudgeCall = {
    step: 'spec',
    name,
    prompt: specPrompt({
      task: run.task,
      taskFile: config.task,
      protected: config.grader.protected,
      journal: config.journal,
    }),
    cwd: join(r.setup.work, name, 'snapshot'),
    prepare: (cwd) => checkoutInto(own, x.commit, cwd, join(r.setup.work, name, 'checkout.index')),
    seed: r.seed,
  };
  const reply = await ask(r.setup, r.ledger, call);
  if (reply === null) return null;
  r.calls.spec.made++;
  if (!reply.ok) {
    r.calls.spec.failed++;
    r.failed.specs.push({ run: x.run, episode: x.episode, commit: x.commit, error: reply.error });
    r.failed.errors.push(`spec of ${x.run} ${x.episode}: ${reply.error}`);
    return reply;
  }
  if (reply.note) r.j.log(`note: ${x.run} ${x.episode}: ${reply.note}`);
  r.specs.set(x.commit, { spec: reply.text, spent: reply.spent });
  await r.cache.saveSpec({ commit: x.commit, spec: reply.text, spent: reply.spent });
  return reply;
}

/** The questions still to ask among the snapshots with a spec, and the answers the cache has. */
function questionsFor(r: Ready, mapped: MapSnapshot[]) {
  const ids = mapped.map((x) => x.commit);
  const inMap = new Set(ids);
  const reused = [...r.cache.judgments.values()].filter((j) => inMap.has(j.anchor) && inMap.has(j.a) && inMap.has(j.b));
  r.calls.triplet.cached = reused.length;
  const questions = newQuestions(
    ids,
    tripletCount(r.j.settings, mapped.length),
    new Set(r.cache.judgments.keys()),
    r.seed,
  );
  r.ledger.plan(
    { spec: 0, triplet: questions.length },
    reused.reduce((s, j) => s + j.spent, 0),
  );
  const answered: Judgment[] = reused.map(({ anchor, a, b, answer }) => ({ anchor, a, b, answer }));
  return { questions, answered };
}

/** The triplet judge's cwd: a read-only checkout of the (first) run's initial workspace. */
async function baseCheckout(r: Ready): Promise<void> {
  const first = r.j.runs[0];
  const own = first && r.repos.get(first.state.id);
  if (!first || !own) return;
  await mkdir(r.setup.work, { recursive: true });
  await checkoutInto(own, first.state.base.commit, join(r.setup.work, 'base'), join(r.setup.work, 'base.index'));
  await readOnly(join(r.setup.work, 'base'));
}

async function askTriplet(r: Ready, q: { anchor: string; a: string; b: string }, answered: Judgment[]) {
  const spec = (id: string) => ({ id, spec: (r.specs.get(id) as { spec: string }).spec });
  const key = tripletKey(q);
  const call: JudgeCall = {
    step: 'triplet',
    name: `triplet-${key
      .split(' ')
      .map((id) => id.slice(0, 12))
      .join('-')}`,
    prompt: tripletPrompt({ anchor: spec(q.anchor).spec, a: spec(q.a).spec, b: spec(q.b).spec }),
    cwd: join(r.setup.work, 'base'),
    triplet: tripletFile(spec(q.anchor), spec(q.a), spec(q.b)),
    seed: r.seed,
  };
  const reply = await ask(r.setup, r.ledger, call);
  if (reply === null) return null;
  r.calls.triplet.made++;
  if (!reply.ok) {
    r.calls.triplet.failed++;
    r.failed.judgments++;
    r.failed.errors.push(`judgment ${key}: ${reply.error}`);
    return reply;
  }
  const j = { anchor: q.anchor, a: q.a, b: q.b, answer: reply.text as 'a' | 'b' };
  answered.push(j);
  await r.cache.saveJudgment({ ...j, spent: reply.spent });
  return reply;
}

/** Why a step ends the map without drawing it, or null: it may go on. */
function stopped(r: Ready, end: PoolEnd, step: MapStep, asked: number): MapOutcome | null {
  const what = step === 'spec' ? 'specs' : 'judgments';
  const { plan, ledger } = r;
  const { settings } = r.j;
  const logs = ` (logs of the failed calls: ${r.setup.failedLogs})`;
  const failed = r.calls[step].failed;
  if (end.kind === 'budget') {
    const spent = `the map's budget of ${amount(settings.budget)} ${settings.unit} is spent (${amount(ledger.spent)}) with ${what} still to ask`;
    // Failed calls spent it: more budget buys more failures until the judge is mended.
    if (failed > 0)
      return {
        code: 1,
        plan,
        message: `${spent}, and the judge failed ${failed} of the ${r.calls[step].made} ${what} it was asked; the first: ${end.firstError ?? '-'}${logs}: mend the judge before raising map.budget (every answer so far is kept)`,
        failedLogs: r.setup.failedLogs,
      };
    return {
      code: 1,
      plan,
      message: `${spent}: raise map.budget and run forkflush map again (every answer so far is kept)`,
    };
  }
  if (end.kind === 'failed') {
    if (end.notStarted) return { code: 2, plan, message: `the map's judge could not start: ${end.error}` };
    return {
      code: 1,
      plan,
      message: `the judge failed ${MAP_FAILURES_IN_A_ROW} ${what} in a row, so the map stopped; the last: ${end.error}${logs}`,
      failedLogs: r.setup.failedLogs,
    };
  }
  if (asked > 0 && failed / asked > MAP_MOST_FAILED)
    return {
      code: 1,
      plan,
      message:
        `the judge failed ${failed} of ${asked} ${what} (more than ${MAP_MOST_FAILED * 100}%), so no map was drawn; ` +
        `the first: ${end.firstError ?? '-'}${logs}`,
      failedLogs: r.setup.failedLogs,
    };
  return null;
}
