// An episode's agent: its box (a home, a /tmp and the prompt of its own, the environments the
// allowlists give), the services it reaches from its sandbox (the grade service, the egress proxy),
// and the agent itself, tried again when it fails in a way that passes (agent-tries.ts).
import { appendFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EGRESS_METER_CHECK_MS, EGRESS_UNREACHABLE_CHECK_MS, METERED_USD_STOP_FACTOR } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { formatNumber } from '../core/text.js';
import { tallySpend } from '../core/usage.js';
import { type Cleaned, NOTHING_CLEANED, removeTree } from '../io/agent-files.js';
import { NO_ACCOUNT } from '../io/sandbox.js';
import { runTries, type Tried } from './agent-tries.js';
import { agentConfinement, episodeLogs, graderConfinement, sessionSpawner } from './boundary.js';
import { startEgress } from './egress.js';
import { allowedEnv } from './env.js';
import { diskFullLine } from './episode-errors.js';
import type { EpisodeJob } from './episode-input.js';
import { startGradeService } from './grade-service.js';
import { hiddenPathFailure } from './hidden-paths.js';

/** What the steps of an episode share: its box, its environments, its stop, and what was swept. */
export interface EpisodeBox {
  box: string;
  promptFile: string;
  /** The box's home and /tmp, for the agent and the grade service. */
  home: { HOME: string; TMPDIR: string };
  agentEnv: NodeJS.ProcessEnv;
  /** The judge's grader: grader.env. */
  graderEnv: NodeJS.ProcessEnv;
  /**
   * The gradings the agent asks for run its workspace as it stands, the grader's files too (the
   * judge alone restores them): they get agent.env as the agent holds it (a key the proxy holds as
   * its placeholder), never grader.env.
   */
  askedGradingEnv: NodeJS.ProcessEnv;
  source: NodeJS.ProcessEnv;
  interrupt: AbortSignal;
  /** What was swept out of the workspace and the judge's checkout (git would have stalled on it). */
  swept: Cleaned;
}

/** The box made anew: a home of the episode's own (no history, no credentials of the user's), a private /tmp, the prompt. */
export async function prepareBox(job: EpisodeJob): Promise<EpisodeBox> {
  const { config, places, isolation } = job;
  const source = job.env ?? process.env;
  const box = places.box;
  await removeTree(box);
  for (const dir of [join(box, 'home'), join(box, 'tmp'), job.scratchDir]) await mkdir(dir, { recursive: true });
  const promptFile = join(box, 'prompt.md');
  await writeFile(promptFile, job.prompt);
  const home = { HOME: join(box, 'home'), TMPDIR: isolation.sandbox ? '/tmp' : join(box, 'tmp') };
  return {
    box,
    promptFile,
    home,
    agentEnv: { ...allowedEnv(source, [...job.agent.passEnv, ...config.agent.env]), ...home },
    graderEnv: allowedEnv(source, config.grader.env),
    askedGradingEnv: allowedEnv(source, config.agent.env),
    source,
    interrupt: job.signal ?? new AbortController().signal,
    swept: { ...NOTHING_CLEANED },
  };
}

/** What the agent step leaves: the tries, what its sandbox refused and removed, and how to charge it. */
export interface AgentRun {
  tried: Tried;
  /** What the egress proxy refused or could not reach, and a stop for the model use it relayed; null: nothing. */
  egressNote: string | null;
  removed: Cleaned;
  chargeBase: { unit: Config['budget']['unit']; allowance: number; limitSeconds: number };
  evaluations: () => number;
  /** Why the agent's log could not be written (a full disk), or null. */
  logFull: string | null;
}

/** The services the agent reaches (the grade service, the egress proxy) and the confined spawn. */
async function startServices(job: EpisodeJob, b: EpisodeBox, stopForBudget: AbortController) {
  const { config, episode, places, isolation } = job;
  const sandbox = isolation.sandbox;
  // The agent and the gradings it asks for: one account, since both write the workspace.
  const account = sandbox?.account() ?? NO_ACCOUNT;
  // The agent's way out: forkflush's proxy, which holds its keys (worker/egress.ts).
  const egress = await startEgress({ config, env: b.agentEnv, machine: b.source, sandboxed: sandbox !== null }).catch(
    (e: unknown) => {
      account.release();
      throw e;
    },
  );
  // What the agent holds of agent.env, placeholders for the keys the proxy holds: the grading runs
  // the workspace as the agent left it, its grader too, and its output goes back to the agent.
  const asked = Object.keys(b.askedGradingEnv).filter((name) => egress.env[name] !== undefined);
  const grading = await startGradeService({
    config,
    workdir: places.workspace,
    box: b.box,
    env: { ...Object.fromEntries(asked.map((name) => [name, egress.env[name]])), ...b.home },
    ...(sandbox
      ? {
          confine: {
            sandbox,
            confinement: {
              ...graderConfinement(places.workspace, join(b.box, 'tmp'), places, config, b.source, [places.context]),
              // No network, whatever grader.network says: the agent's own goes through its proxy only.
              network: false,
              account,
            },
          },
        }
      : {}),
    limit:
      config.budget.unit === 'evaluations'
        ? Math.max(1, Math.floor(episode.allowance + 1e-9))
        : Number.POSITIVE_INFINITY,
    onExhausted: () => stopForBudget.abort('budget'),
  }).catch(async (e: unknown) => {
    await egress.close();
    account.release();
    throw e;
  });
  const confinement = { ...agentConfinement(places, config, b.source), account };
  // Bound, not handed over: the sockets stay forkflush's (open to the sandbox's user).
  confinement.shared = [...(confinement.shared ?? []), grading.socketDir, ...(egress.bind ? [egress.bind] : [])];
  const removed: Cleaned = { ...NOTHING_CLEANED };
  const spawn = sessionSpawner(sandbox, confinement, { context: places.context, box: b.box }, removed, egress.wrap);
  const close = async () => {
    await grading.close();
    account.release();
    await egress.close();
  };
  return { grading, egress, removed, spawn, close };
}

/** Runs the agent in its sandbox within its budget, tried again when it fails in a way that passes. */
export async function runAgentStep(job: EpisodeJob, b: EpisodeBox): Promise<AgentRun> {
  const { config, episode, places, isolation } = job;
  const stopForBudget = new AbortController();
  const unit = config.budget.unit;
  const { grading, egress, removed, spawn: confinedSpawn, close } = await startServices(job, b, stopForBudget);
  // A log the agent's output could not be written to for a full disk stopped it: no result of its.
  let logFull: string | null = null;
  const spawn: typeof confinedSpawn = async (file, args, options) => {
    const r = await confinedSpawn(file, args, options);
    if (r.logProblem && diskFullLine(r.logProblem)) logFull ??= r.logProblem;
    return r;
  };
  const budgetMs = unit === 'minutes' ? episode.allowance * 60_000 : Number.POSITIVE_INFINITY;
  const agentTimeoutMs = config.agent.timeout * 1000;
  const deadlineMs = Math.min(budgetMs, agentTimeoutMs);
  const chargeBase = { unit, allowance: episode.allowance, limitSeconds: deadlineMs / 1000 };
  const agentLog = episodeLogs(job.scratchDir).agent;
  // Said while the agent runs, once: a CLI that cannot reach its model API retries for minutes in silence.
  const unreachable = job.warn
    ? setInterval(() => {
        const note = egress.unreachable();
        if (!note) return;
        job.warn?.(note);
        clearInterval(unreachable);
      }, EGRESS_UNREACHABLE_CHECK_MS)
    : undefined;
  // Code the agent runs that asks the model with its placeholder key spends what no CLI counts: the
  // answers the proxy relayed stop the agent once they state more than its allowance, as a CLI's do.
  // In dollars, past METERED_USD_STOP_FACTOR times it: forkflush's table may price a model dearer
  // than the CLI that stops itself at its allowance by its own prices.
  let meteredStop: string | null = null;
  const stopAt = episode.allowance * (unit === 'usd' ? METERED_USD_STOP_FACTOR : 1);
  const metered = setInterval(() => {
    const seen = tallySpend(unit, egress.metered());
    if (seen === null || !(seen > stopAt)) return;
    meteredStop = `stopped by forkflush: the answers of the model calls its proxy relayed stated ${formatNumber(seen, 6)} ${unit}, past ${formatNumber(stopAt, 6)} (the episode's allowance is ${formatNumber(episode.allowance, 6)})`;
    stopForBudget.abort('budget');
    clearInterval(metered);
  }, EGRESS_METER_CHECK_MS);
  let tried: Tried;
  try {
    tried = await runTries({
      agent: job.agent,
      session: {
        workdir: places.workspace,
        prompt: job.prompt,
        promptFile: b.promptFile,
        contextDir: places.context,
        usageFile: join(b.box, 'usage.json'),
        logFile: agentLog,
        gradeCommand: grading.command,
        allowance: episode.allowance,
        unit,
        seed: episode.seed,
        episodeId: episode.id,
        deadlineMs,
        deadlineIsBudget: budgetMs <= agentTimeoutMs,
        env: egress.env,
        signal: AbortSignal.any([b.interrupt, stopForBudget.signal]),
        spawn,
        confined: isolation.sandbox !== null,
        keys: egress.keys,
      },
      interrupt: b.interrupt,
      charge: chargeBase,
      evaluations: () => grading.evaluations(),
      refused: { count: egress.refusedCount, note: egress.note },
      metered: egress.metered,
      offline: { traffic: egress.traffic, note: egress.unreachable },
      ...(isolation.sandbox
        ? {
            hiddenCause: (missing: string[], text: string) =>
              hiddenPathFailure(missing, text, {
                workspace: places.workspace,
                path: (b.agentEnv as NodeJS.ProcessEnv).PATH ?? '',
                repositories: places.private,
              }),
          }
        : {}),
      mark: (line) => appendFile(agentLog, line),
      ...(job.sleep ? { sleep: job.sleep } : {}),
    });
  } finally {
    clearInterval(unreachable);
    clearInterval(metered);
    await close();
  }
  const egressNote = [egress.note(), meteredStop].filter(Boolean).join('; ') || null;
  return { tried, egressNote, removed, chargeBase, evaluations: () => grading.evaluations(), logFull };
}
