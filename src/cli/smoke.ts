// `forkflush run --smoke`: the task's agent started once, as an episode starts it (forkflush's
// sandbox, its egress proxy holding the keys, the allowlisted environment, a fresh context), on a
// tiny prompt with a small cap, in a checkout of its own (the committed tree, or the task folder's
// files where a run works on a copy of them); prints what it
// answered, or exits non-zero with the agent's own error. It writes no run state and charges no
// run: everything lives in a temporary folder, removed when it ends (a failed call's log is kept
// beside it and named). The one call goes through the map judge's door (local/map-judge.ts
// askJudge), which runs exactly one agent session outside a run.
import { mkdir, mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentFor } from '../agents/specs.js';
import { SMOKE_CAP_TOKENS, SMOKE_CAP_USD, SMOKE_TIMEOUT_SECONDS } from '../core/bounds.js';
import type { Config, ConfigOverrides } from '../core/config.js';
import type { MapUnit } from '../core/map/config.js';
import { formatNumber } from '../core/text.js';
import { Git } from '../io/git.js';
import { askJudge } from '../local/map-judge.js';
import { loadConfig } from '../local/start.js';
import { RunStore } from '../local/store.js';
import { copyTaskFiles } from '../local/task-copy.js';
import { isolationFor } from '../worker/boundary.js';

export const SMOKE_PROMPT =
  "This is forkflush's smoke test of the agent it will run on this task: it only checks that you start and answer. " +
  'Change no file and run no command. Answer with one short sentence that says you are ready.';

/** The cap of the one call, in the budget's unit (never more than one episode's allowance); evaluations are capped by time. */
const SMOKE_CAP: Record<MapUnit, number> = {
  usd: SMOKE_CAP_USD,
  tokens: SMOKE_CAP_TOKENS,
  minutes: SMOKE_TIMEOUT_SECONDS / 60,
};

export interface SmokeIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

export async function smoke(
  o: { dir: string; configFile?: string | undefined; overrides?: ConfigOverrides },
  io: SmokeIo,
): Promise<number> {
  const { config } = await loadConfig(o.dir, o.configFile, o.overrides ?? {});
  const isolation = await isolationFor(config.sandbox.mode);
  if (isolation.warning) io.stderr.write(`forkflush: note: ${isolation.warning}\n`);
  const { unit, allowance } = smokeCap(config);
  const top = await gitTop(o.dir);
  const taskDir = await realpath(o.dir);
  const work = await mkdtemp(join(tmpdir(), 'forkflush-smoke-'));
  const failedLogs = `${work}-log`;
  const agent = { ...config.agent, timeout: Math.min(config.agent.timeout, SMOKE_TIMEOUT_SECONDS) };
  io.stdout.write(
    `forkflush smoke: starting the ${config.agent.kind} agent once (cap ${formatNumber(allowance, 6)} ${unit}, ` +
      `${agent.timeout} s; sandbox: ${isolation.sandbox ? 'on' : 'off'})\n`,
  );
  try {
    const reply = await askJudge(
      {
        adapter: agentFor(config),
        judge: agent,
        config,
        isolation,
        env: io.env ?? process.env,
        work,
        failedLogs,
        // The repository itself and its runs stay hidden: the agent sees its checkout only.
        hidden: top ? [top, RunStore.runsDir(top)] : [],
        unit,
        signal: io.signal ?? new AbortController().signal,
      },
      {
        step: 'spec',
        smoke: true,
        name: 'smoke',
        prompt: SMOKE_PROMPT,
        cwd: join(work, 'workspace'),
        // What an episode starts from: the committed tree, or the folder's files where a run works on a copy.
        prepare: (cwd: string) =>
          top === taskDir
            ? checkoutHead(top, cwd, join(work, 'smoke.index'))
            : copyTaskFiles(o.dir, cwd).then(() => {}),
        seed: 0,
      },
      allowance,
    );
    const spent = `spent ${formatNumber(reply.spent, 6)} ${unit}`;
    if (!reply.ok) {
      io.stderr.write(`forkflush smoke: ${reply.error} (${spent})${reply.log ? `; its log: ${reply.log}` : ''}\n`);
      return 1;
    }
    await rm(failedLogs, { recursive: true, force: true });
    io.stdout.write(
      `forkflush smoke: the agent answered (${spent}${reply.note ? `; ${reply.note}` : ''}):\n${reply.text.trim()}\n`,
    );
    return 0;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The call's unit and cap: the budget's unit (evaluations: minutes), at most one episode's allowance. */
export function smokeCap(config: Config): { unit: MapUnit; allowance: number } {
  const b = config.budget;
  const unit: MapUnit = b.unit === 'evaluations' ? 'minutes' : b.unit;
  return { unit, allowance: unit === b.unit ? Math.min(SMOKE_CAP[unit], b.episode) : SMOKE_CAP[unit] };
}

async function gitTop(dir: string): Promise<string | null> {
  const r = await new Git(dir).exec(['rev-parse', '--show-toplevel'], { check: false });
  return r.exitCode === 0 ? r.stdout.trim() : null;
}

/** The committed tree (HEAD) into `cwd` (an empty folder outside a git repository), through an index of its own: the repository's index and files are not touched. */
async function checkoutHead(top: string, cwd: string, index: string): Promise<void> {
  await mkdir(cwd, { recursive: true });
  await new Git(top).exec(['--work-tree', cwd, 'read-tree', '--reset', '-u', 'HEAD'], {
    env: { GIT_INDEX_FILE: index },
  });
}
