// Local runs killed at random and resumed, the way test/chaos does it for GitHub: the real CLI as a
// child process (`forkflush run`, `forkflush resume`, `forkflush status`), a command agent that
// takes a random 0.1-1.5 s and writes a number, a grader that prints it; then, over and over, a
// kill at a random moment (SIGKILL of the process group or of the process alone, SIGTERM, SIGINT,
// SIGINT twice), aimed at a phase (the initial grading, an agent, a judge, the commit and the
// adoption, the report) or at a random time, and a `resume`, until the run says it is finished.
// Some cycles start two resumes at once, or ask for a status while a resume drives the run.
// After every exit and at the end the invariants are checked; each failure names its seed and
// the sequence of commands and kills (`run !KILL-group@judge => SIGKILL -> resume ...`).
//
// Rows (a helper's review, stop 50):
// - two that failed before their fix: `resume` read state.json before it took the run's lock
//   (cli/resume.ts, openRun, then driveRun's lock), so a run that ended between the two was driven
//   again from the state read before it ended. Random kills hit that window rarely; these rows
//   make it certain by holding the resume at its sandbox probe, right after its read (a bwrap
//   that waits at a gate, first on PATH). Now the resume takes
//   the lock and reads the state again under it.
// - one compact chaos row (a fixed seed, four kills, about 25-45 s), a regression guard of the
//   invariants over random kill points. Long searches, replays of a seed, and power-cut kills:
//   FORKFLUSH_LOCAL_CHAOS_SEEDS=17,42 npx vitest run test/integration/local-chaos.test.ts
//   FORKFLUSH_LOCAL_CHAOS_RANDOM=20    (20 random seeds more; each prints its seed when it fails)
//   FORKFLUSH_LOCAL_CHAOS_TREE=1       (also SIGKILL the CLI with every process under it at once)
//   FORKFLUSH_LOCAL_CHAOS_VERBOSE=1    (print each seed's sequence)
// About 40 random seeds (each 1-6 kills; about half of them with power-cut kills among the modes)
// found nothing beyond the two rows' race: no lost winner, no best below a recorded score, no
// round opened twice, no result off its branch, no process left behind, no stale lock, state.json
// always read, every finished run with its report.

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseCommitMessage } from '../../src/core/journal.js';
import { bestBranch, episodeBranch, lineageBranch } from '../../src/core/names.js';
import { parseRunState } from '../../src/core/records.js';
import type { RunState } from '../../src/core/state.js';
import {
  attackTemp,
  cleanupAttackTemps,
  currentCli,
  describeSandboxed,
  makeAttackRepo,
  processesUnder,
  processesWith,
} from '../attacks/helpers.js';
import { prng } from '../chaos/prng.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
}, 120_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The seeded generator the GitHub chaos uses: the whole kill schedule of an iteration comes from its seed. */
const rng = prng;

// The agent: its delay and its number come from the test's seed, the episode's seed and the how-many-th
// start of the episode this is (counted in the logs folder), so a rerun after a kill may score
// differently. It sleeps in short steps: the shell with the marker on its command line lives throughout.
const AGENT = `# sh agent.sh MARK LOGS TESTSEED
mark=$1; logs=$2; tseed=$3
id=$FORKFLUSH_EPISODE
n=$(( $(cat "$logs/starts-$id" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$logs/starts-$id"
h=$(printf '%s' "$tseed-$FORKFLUSH_SEED-$n" | cksum | cut -d' ' -f1)
ms=$(( 100 + h % 1400 )); v=$(( (h / 1400) % 100000 + 2 ))
echo "start $id $n $ms $v" >> "$logs/agent.log"
# A test holds an episode's agent here while the file hold-<episode> exists.
while [ -e "$logs/hold-$id" ]; do sleep 0.05; done
end=$(( $(date +%s%N) / 1000000 + ms ))
while [ $(( $(date +%s%N) / 1000000 )) -lt "$end" ]; do sleep 0.05; done
echo "$v" > value.txt
printf '{"spent": %s}\\n' "$FORKFLUSH_BUDGET" > "$FORKFLUSH_USAGE_FILE"
echo "end $id $n $v" >> "$logs/agent.log"
: "$mark"
`;
// The grader: the number in value.txt, after a moment (a judge long enough to be killed in).
const GRADER = `# sh grade.sh MARK
sleep 0.25
cat value.txt 2>/dev/null || echo 0
: "$1"
`;

type Mode = 'KILL-group' | 'KILL' | 'TERM' | 'INT' | 'INT-twice' | 'KILL-tree';
type Aim = 'time' | 'initial' | 'agent' | 'judge' | 'commit' | 'decide' | 'report';

interface Cli {
  child: ChildProcess;
  out: () => string;
  ended: Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }>;
}

interface Task {
  seed: number;
  dir: string;
  logs: string;
  agentMark: string;
  graderMark: string;
  keepRejected: boolean;
  concurrency: number;
  history: string[];
  problems: string[];
}

function cliEnv(): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8', TMPDIR: process.env.TMPDIR };
}

/** `forkflush ARGS` as a child process leading a group of its own (so the group can be killed). */
async function startCli(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<Cli> {
  const cli = await currentCli();
  const child = spawn(process.execPath, [cli, ...args], {
    cwd,
    env: { ...cliEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (out += d));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, out })),
  );
  return { child, out: () => out, ended };
}

function signal(cli: Cli, mode: Mode): void {
  const pid = cli.child.pid;
  if (pid === undefined || cli.child.exitCode !== null || cli.child.signalCode !== null) return;
  try {
    if (mode === 'KILL-tree') {
      // A power cut, as near as a test gets: the CLI and everything under it stopped, then killed.
      const each = (pids: number[], sig: NodeJS.Signals) => {
        for (const p of pids) {
          try {
            process.kill(p, sig);
          } catch {}
        }
      };
      const tree = descendantsOf(pid);
      each([pid, ...tree], 'SIGSTOP');
      each([pid, ...descendantsOf(pid), ...tree], 'SIGKILL');
      return;
    }
    if (mode === 'KILL-group') process.kill(-pid, 'SIGKILL');
    else if (mode === 'KILL') process.kill(pid, 'SIGKILL');
    else if (mode === 'TERM') process.kill(pid, 'SIGTERM');
    else process.kill(pid, 'SIGINT');
  } catch {}
}

function runFolder(dir: string): string | null {
  const runs = join(dir, '.forkflush');
  const ids = existsSync(runs) ? readdirSync(runs).filter((id) => existsSync(join(runs, id, 'state.json'))) : [];
  const id = ids.sort().at(-1);
  return id ? join(runs, id) : null;
}

function loadState(dir: string): RunState | null {
  const folder = runFolder(dir);
  if (!folder) return null;
  const file = join(folder, 'state.json');
  return parseRunState(readFileSync(file, 'utf8'), file);
}

function git(dir: string, ...args: string[]): string | null {
  const r = spawnSync('git', args, { cwd: dir, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

const fail = (t: Task, what: string) =>
  t.problems.push(`seed ${t.seed}: ${what}\n  sequence: ${t.history.join(' -> ')}`);

/** Waits until `ok()` or the deadline; whether it held. */
async function until(ok: () => boolean, ms: number, every = 25): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (ok()) return true;
    await sleep(every);
  }
  return ok();
}

/** Resolves once the aim is reached in this process's run (or it ended): then the kill comes. */
async function reachAim(
  t: Task,
  cli: Pick<Cli, 'out'>,
  aim: Aim,
  r: ReturnType<typeof rng>,
  isRun: boolean,
  running: () => boolean,
): Promise<void> {
  const o = {
    get over() {
      return !running();
    },
  };
  const lines = (re: RegExp) => (cli.out().match(re) ?? []).length;
  const limit = 60_000;
  switch (aim) {
    case 'time':
      await until(() => o.over, r.int(100, 9000));
      return;
    case 'initial':
      // The initial grading (run) or the first agent (resume): whichever the command does first.
      if (isRun) await until(() => o.over || processesWith(t.graderMark).length > 0, limit, 5);
      else await until(() => o.over || processesWith(t.agentMark).length > 0, limit, 5);
      await sleep(r.int(0, 200));
      return;
    case 'agent': {
      const skip = r.int(0, 4);
      const seen = () => lines(/ started \(/g);
      await until(() => o.over || seen() > skip, limit);
      await sleep(r.int(0, 900));
      return;
    }
    case 'judge': {
      // A grader running once an agent ran: a judge (the agent itself never asks for a grading).
      const skip = r.int(0, 3);
      let judged = 0;
      let wasGrading = false;
      await until(
        () => {
          if (o.over) return true;
          if (lines(/ started \(/g) === 0) return false;
          const grading = processesWith(t.graderMark).length > 0;
          if (grading && !wasGrading) judged++;
          wasGrading = grading;
          return grading && judged > skip;
        },
        limit,
        5,
      );
      await sleep(r.int(0, 250));
      return;
    }
    case 'commit': {
      // Just after a judge ended: the snapshot, the journal line, the commit, the branch, the best.
      const skip = r.int(0, 3);
      let ends = 0;
      let wasGrading = false;
      await until(
        () => {
          if (o.over) return true;
          if (lines(/ started \(/g) === 0) return false;
          const grading = processesWith(t.graderMark).length > 0;
          if (!grading && wasGrading) ends++;
          wasGrading = grading;
          return ends > skip;
        },
        limit,
        5,
      );
      await sleep(r.int(0, 120));
      return;
    }
    case 'decide': {
      // Around a fork round's decision and its settling (the lineage's compare-and-swap, the branches removed).
      const skip = r.int(0, 2);
      await until(() => o.over || lines(/ scored | no score/g) > skip * 2 + 1, limit, 5);
      await sleep(r.int(0, 150));
      return;
    }
    case 'report':
      await until(() => o.over || / finished: spent/.test(cli.out()), 120_000, 5);
      await sleep(r.int(0, 60));
      return;
  }
}

/**
 * How long what a killed forkflush left may take to go: the group keeper's TERM, its second, then
 * KILL (io/group-keeper.ts), on a busy machine.
 */
const AFTER_EXIT_MS = 10_000;

/** After a forkflush process ended: nothing of it runs, the state reads, the lock holds no one. */
async function afterExit(t: Task, label: string): Promise<void> {
  const gone = await until(
    () => processesWith(t.agentMark).length === 0 && processesWith(t.graderMark).length === 0,
    AFTER_EXIT_MS,
    50,
  );
  if (!gone) {
    const left = [...processesWith(t.agentMark), ...processesWith(t.graderMark)];
    const cmd = left.map((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      } catch {
        return '?';
      }
    });
    fail(
      t,
      `${label}: processes of the run left running ${AFTER_EXIT_MS / 1000} s after forkflush exited: ${cmd.join(' | ')}`,
    );
    for (const p of left) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {}
    }
  }
  const strays = await until(() => processesUnder(t.dir).length === 0, AFTER_EXIT_MS, 50);
  if (!strays) {
    const left = processesUnder(t.dir);
    fail(
      t,
      `${label}: processes in the task folder left ${AFTER_EXIT_MS / 1000} s after forkflush exited: ${left
        .map((p) => {
          try {
            return readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' ').trim().slice(0, 200);
          } catch {
            return '?';
          }
        })
        .join(' | ')}`,
    );
    for (const p of left) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {}
    }
  }
  try {
    loadState(t.dir);
  } catch (e) {
    fail(t, `${label}: state.json does not read: ${(e as Error).message.slice(0, 300)}`);
  }
}

/** The invariants of a finished run. */
function checkFinished(t: Task, state: RunState): void {
  const dir = t.dir;
  const folder = runFolder(dir) as string;
  const episodes = state.rounds.flatMap((r) => r.episodes);
  // No round opened twice: unique, consecutive round indices; unique episode ids, each in its round.
  const indices = state.rounds.map((r) => r.index);
  if (indices.some((ix, i) => ix !== i)) fail(t, `round indices are not 0..n-1 once each: ${indices.join(',')}`);
  const ids = episodes.map((e) => e.id);
  if (new Set(ids).size !== ids.length) fail(t, `episode ids repeat: ${ids.join(',')}`);
  for (const r of state.rounds) {
    if (!r.decision) fail(t, `round ${r.index} of a finished run is not decided`);
    for (const e of r.episodes) {
      if (e.round !== r.index) fail(t, `${e.id} is in round ${r.index}`);
      if (!e.result) fail(t, `${e.id} of a finished run has no result`);
      if (e.unfinishedStarts) fail(t, `${e.id} still has ${e.unfinishedStarts} unfinished starts in a finished run`);
    }
  }
  // The best: on its branch, the best of every recorded score, and what its tree scores.
  const scored = episodes.filter((e) => e.result && e.result.score !== null);
  const top = Math.max(state.base.score ?? -Infinity, ...scored.map((e) => e.result?.score as number));
  const bestRef = git(dir, 'rev-parse', '--verify', '-q', `refs/heads/${bestBranch(state.id)}`);
  if (!state.best) fail(t, 'a finished run with scored episodes has no best');
  else {
    if (bestRef !== state.best.commit)
      fail(
        t,
        `${bestBranch(state.id)} is at ${bestRef}, state.json's best is ${state.best.commit} (${state.best.episode})`,
      );
    if (state.best.score !== top)
      fail(t, `the best recorded is ${state.best.score} (${state.best.episode}), but an episode recorded ${top}`);
    const tree = git(dir, 'show', `${state.best.commit}:value.txt`);
    if (state.best.episode !== 'base' && Number(tree) !== state.best.score)
      fail(t, `the best commit holds ${tree}, the state says it scored ${state.best.score}`);
  }
  // Every result commit exists, says what the state says, and sits where it belongs.
  const lineageHead = git(dir, 'rev-parse', `refs/heads/${lineageBranch(state.id, 0, state.lineages.length)}`);
  const lineageCommits = new Set((git(dir, 'rev-list', lineageHead ?? 'HEAD') ?? '').split('\n'));
  for (const r of state.rounds)
    for (const e of r.episodes) {
      const result = e.result;
      if (!result || result.exit === 'setup' || result.commit === e.base) continue;
      const message = git(dir, 'log', '-1', '--format=%B', result.commit);
      if (message === null) {
        fail(t, `${e.id}'s result commit ${result.commit} is not in the repository`);
        continue;
      }
      const parsed = parseCommitMessage(`${message}\n`, result.commit);
      if (parsed?.result.score !== result.score)
        fail(t, `${e.id}: the commit's trailers say ${parsed?.result.score}, the state ${result.score}`);
      const adopted = r.decision?.adopted.includes(e.id) ?? false;
      if (adopted && !lineageCommits.has(result.commit))
        fail(t, `${e.id} was adopted, but its commit is not on the lineage branch`);
      const branch = git(
        dir,
        'rev-parse',
        '--verify',
        '-q',
        `refs/heads/${episodeBranch(state.id, e.round, e.branch)}`,
      );
      if (!adopted && t.keepRejected && branch !== result.commit)
        fail(t, `${e.id} (dropped, --keep-rejected) has its branch at ${branch}, its result is ${result.commit}`);
    }
  // Every score the judge committed for an episode on a branch of the run is in the state (no lost winner).
  const refs = (
    git(dir, 'for-each-ref', '--format=%(refname) %(objectname)', `refs/heads/forkflush/${state.id}/`) ?? ''
  )
    .split('\n')
    .filter(Boolean);
  for (const line of refs) {
    const [ref, sha] = line.split(' ') as [string, string];
    const message = git(dir, 'log', '-1', '--format=%B', sha) ?? '';
    const parsed = parseCommitMessage(`${message}\n`, sha);
    if (!parsed || parsed.result.score === null) continue;
    if (parsed.result.score > top)
      fail(t, `${ref} holds ${parsed.episode}'s commit scored ${parsed.result.score}, above the best recorded ${top}`);
  }
  // The spend: within one episode of the total, but for what killed starts were charged by the rule.
  const total = state.config.budget.total;
  const spent = episodes.reduce((s, e) => s + (e.result?.spent ?? 0) + (e.interruptedSpent ?? 0), 0);
  const killedCharge = episodes.reduce((s, e) => s + (e.killedStarts ?? 0) * e.allowance, 0);
  const maxAllowance = Math.max(...episodes.map((e) => e.allowance));
  if (spent - killedCharge > total + maxAllowance + 1e-9)
    fail(t, `spent ${spent} (of which ${killedCharge} charged for killed starts) against a total of ${total}`);
  // The report, and no lock left behind.
  if (!existsSync(join(folder, 'report.md'))) fail(t, 'the finished run has no report.md');
  const lock = join(folder, 'lock');
  if (existsSync(lock)) {
    const pid = Number(readFileSync(lock, 'utf8').split(' ')[0]);
    let alive = false;
    try {
      process.kill(pid, 0);
      alive = true;
    } catch {}
    if (alive) fail(t, `the lock names process ${pid}, still alive after every forkflush ended`);
  }
}

async function statusJson(
  t: Task,
): Promise<{ code: number | null; json: Record<string, unknown> | null; out: string }> {
  const cli = await startCli(['status', t.dir, '--json'], join(t.dir, '..'));
  const r = await cli.ended;
  let json: Record<string, unknown> | null = null;
  try {
    json = JSON.parse(r.out.slice(r.out.indexOf('{')));
  } catch {}
  return { code: r.code, json, out: r.out };
}

function makeTask(seed: number, r: ReturnType<typeof rng>, o: { total: number }): Task {
  const tag = `${seed}-${process.pid}-${Date.now().toString(36)}`;
  const agentMark = `ffchaos-agent-${tag}`;
  const graderMark = `ffchaos-grade-${tag}`;
  const repo = makeAttackRepo({
    dir: attackTemp(`chaos-${seed}`),
    agent: `sh agent.sh ${agentMark} {logs} ${seed}`,
    grader: `sh grade.sh ${graderMark}`,
    protected: ['grade.sh', 'agent.sh'],
    strategy: 'fork-and-flush',
    budget: `total: ${o.total}\n  unit: tokens\n  episode: 2`,
    agentTimeout: 20,
    graderTimeout: 10,
    extra: 'fork:\n  branches: 2\n  branch_budget: 0.1\n',
    files: { 'agent.sh': AGENT, 'grade.sh': GRADER },
  });
  return {
    seed,
    dir: repo.dir,
    logs: repo.logs,
    agentMark,
    graderMark,
    keepRejected: r.chance(0.5),
    concurrency: r.pick([1, 2, 2]),
    history: [],
    problems: [],
  };
}

/**
 * One iteration: run, then kills and resumes chosen by the seed, then resumes left alone until
 * the run is finished; the invariants after every exit and at the end. Returns the problems found.
 */
async function chaos(seed: number, o: { kills: number; total: number; extras: boolean }): Promise<Task> {
  const r = rng(seed);
  const t = makeTask(seed, r, o);
  const cwd = join(t.dir, '..');
  const modes: Mode[] = ['KILL-group', 'KILL-group', 'KILL', 'TERM', 'INT', 'INT-twice'];
  if (process.env.FORKFLUSH_LOCAL_CHAOS_TREE) modes.push('KILL-tree', 'KILL-tree', 'KILL-tree');
  const aims: Aim[] = ['time', 'time', 'initial', 'agent', 'judge', 'commit', 'decide', 'report'];
  const flags = [
    '--seed',
    String(seed % 1000),
    '--concurrency',
    String(t.concurrency),
    ...(t.keepRejected ? ['--keep-rejected'] : []),
  ];
  t.history.push(`config{concurrency ${t.concurrency}${t.keepRejected ? ', keep-rejected' : ''}}`);
  let finished = false;
  for (let cycle = 0; cycle < o.kills + 6 && !finished; cycle++) {
    const killing = cycle < o.kills;
    const isRun = loadState(t.dir) === null;
    const args = isRun ? ['run', t.dir, ...flags] : ['resume', t.dir];
    const cmd = isRun ? 'run' : 'resume';
    // Two resumes at once: one drives the run, the other is refused.
    const twin = !isRun && o.extras && r.chance(0.2);
    const cli = await startCli(args, cwd);
    let other: Cli | null = null;
    if (twin) {
      await sleep(r.int(0, 400));
      other = await startCli(['resume', t.dir], cwd);
    }
    const both = other ? [cli, other] : [cli];
    const out = () => both.map((c) => c.out()).join('\n');
    const running = () => both.some((c) => c.child.exitCode === null && c.child.signalCode === null);
    const askStatus = !isRun && o.extras && r.chance(0.3);
    let statusAt: Promise<void> = Promise.resolve();
    if (askStatus) {
      statusAt = (async () => {
        // Once an episode runs, the status names the live process that drives it.
        const seen = await until(() => / started \(/.test(out()) || !running(), 60_000);
        const driver = both.find((c) => / started \(/.test(c.out()));
        if (!seen || !driver || driver.child.exitCode !== null || driver.child.signalCode !== null) return;
        const s = await statusJson(t);
        const alive = driver.child.exitCode === null && driver.child.signalCode === null;
        if (s.code !== 0 || !s.json) fail(t, `status --json while ${cmd} ran: exit ${s.code}: ${s.out.slice(-400)}`);
        else if (alive && (s.json.status !== 'running' || s.json.pid !== driver.child.pid))
          fail(
            t,
            `status --json while ${cmd} (pid ${driver.child.pid}) ran said status ${s.json.status}, pid ${s.json.pid}`,
          );
        t.history.push('status');
      })();
    }
    let step = `${cmd}${twin ? '+resume' : ''}`;
    if (killing) {
      const mode = r.pick(modes);
      const aim = r.pick(aims.filter((a) => a !== 'report' || r.chance(0.5)));
      await reachAim(t, { ...cli, out }, aim, r, isRun, running);
      step += ` !${mode}@${aim}`;
      for (const c of both) signal(c, mode);
      if (mode === 'INT-twice') {
        await sleep(r.int(0, 600));
        for (const c of both) signal(c, 'INT');
      }
    }
    const deadline = setTimeout(() => {
      fail(t, `${step}: still running after 150 s; killed`);
      for (const c of both) signal(c, 'KILL-group');
    }, 150_000);
    const ends = await Promise.all(both.map((c) => c.ended));
    clearTimeout(deadline);
    await statusAt;
    step += ` => ${ends.map((e) => e.code ?? e.signal).join('/')}`;
    t.history.push(step);
    await afterExit(t, step);
    // Exit codes: 0 finished, 130 interrupted, SIGKILL killed; of two resumes at once, one may be
    // refused (2, naming the process that drives the run), never both, and never both drive.
    const refused = (e: { code: number | null; out: string }) => e.code === 2 && /being driven by process/.test(e.out);
    // A second Ctrl-C that lands as Node tears down (after "interrupted: ...") ends it by the signal
    // itself, which the shell reads as 130 too.
    const sensible = (e: { code: number | null; signal: NodeJS.Signals | null }) =>
      e.signal !== null ? ['SIGKILL', 'SIGINT', 'SIGTERM'].includes(e.signal) : e.code === 0 || e.code === 130;
    for (const e of ends)
      if (!sensible(e) && !(twin && refused(e)))
        fail(t, `${step}: ${cmd} ended ${e.code ?? e.signal}: ${e.out.slice(-800)}`);
    if (twin) {
      if (ends.every(refused))
        fail(t, `${step}: both resumes were refused:\n${ends.map((e) => e.out.slice(-300)).join('\n')}`);
      if (ends.every((e) => / started \(/.test(e.out)))
        fail(t, `${step}: both resumes started episodes:\n${ends.map((e) => e.out.slice(-600)).join('\n---\n')}`);
    }
    const ended = ends.find((e) => !refused(e)) ?? (ends[0] as (typeof ends)[number]);
    const state = (() => {
      try {
        return loadState(t.dir);
      } catch {
        return null;
      }
    })();
    if (state?.status === 'finished') {
      if (!killing && ended.code !== 0)
        fail(t, `${step}: the run is finished, but the last command ended ${ended.code ?? ended.signal}`);
      // Killed after the finish was saved: the next resume says it is finished (checked below).
      finished = true;
    }
    if (t.problems.length > 0) break;
  }
  if (t.problems.length > 0) return t;
  if (!finished) {
    fail(t, 'the run did not finish after its kills and 6 resumes');
    return t;
  }
  const state = loadState(t.dir) as RunState;
  checkFinished(t, state);
  // A later resume is not blocked by a stale lock, and says the run is finished; so does status.
  const again = await startCli(['resume', t.dir], cwd);
  const a = await again.ended;
  if (a.code !== 0 || !/already finished/.test(a.out))
    fail(t, `a resume of the finished run ended ${a.code}: ${a.out.slice(-500)}`);
  const s = await statusJson(t);
  if (s.code !== 0 || s.json?.status !== 'finished' || s.json?.pid !== null)
    fail(t, `status --json of the finished run: exit ${s.code}, ${s.out.slice(0, 300)}`);
  const after = loadState(t.dir) as RunState;
  if (JSON.stringify(after.best) !== JSON.stringify(state.best))
    fail(t, 'a resume of the finished run changed its best');
  return t;
}

/** Every live process under `pid`. */
function descendantsOf(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      parent.set(Number(p), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {}
  }
  const found: number[] = [];
  let frontier = [pid];
  while (frontier.length > 0) {
    const next = [...parent].filter(([, pp]) => frontier.includes(pp)).map(([p]) => p);
    found.push(...next);
    frontier = next;
  }
  return found;
}

/**
 * A bubblewrap that waits at a gate: the first program a resume starts after reading the state
 * (its sandbox probe, in openRun) says it got there (`reached`) and waits till the test opens the
 * gate (`open`). An absolute folder first on PATH: forkflush finds bwrap there. It stands for a
 * busy machine that deschedules the resume between its read and its lock, and holds it there as
 * long as the test needs, whatever the machine's load.
 */
function bwrapGate(): { env: NodeJS.ProcessEnv; reached: () => boolean; open: () => void } {
  const dir = attackTemp('gate');
  const real = spawnSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).stdout.trim();
  writeFileSync(
    join(dir, 'bwrap'),
    `#!/bin/sh\n: > ${dir}/reached\nwhile [ ! -e ${dir}/open ]; do sleep 0.02; done\nexec ${real} "$@"\n`,
    { mode: 0o755 },
  );
  return {
    env: { PATH: `${dir}:${process.env.PATH}` },
    reached: () => existsSync(join(dir, 'reached')),
    open: () => writeFileSync(join(dir, 'open'), ''),
  };
}

/**
 * `forkflush run` of a task with `held`'s agent held (its hold file), and, once `ready` says the
 * run is there, a resume of it that waits at its sandbox probe (bwrapGate); `started` gets each
 * CLI as it starts, for the row's cleanup.
 */
async function resumeAtGate(t: Task, held: string, ready: (run: Cli) => boolean, started: Cli[]) {
  const cwd = join(t.dir, '..');
  writeFileSync(join(t.logs, `hold-${held}`), '');
  const run = await startCli(['run', t.dir, '--seed', '1'], cwd);
  started.push(run);
  expect(await until(() => ready(run) || run.child.exitCode !== null, 120_000)).toBe(true);
  expect(run.child.exitCode, run.out().slice(-1500)).toBeNull();
  const gate = bwrapGate();
  const resume = await startCli(['resume', t.dir], cwd, gate.env);
  started.push(resume);
  const reached = await until(() => gate.reached() || resume.child.exitCode !== null, 60_000);
  expect(reached && resume.child.exitCode === null, `the resume never reached its probe: ${resume.out()}`).toBe(true);
  return { run, resume, gate };
}

describeSandboxed('a resume started while the run it would continue is ending', () => {
  // `resume` reads state.json (openRun), probes the sandbox, asks whether a process drives the
  // run, and only then takes the lock (driveRun), driving the state it read first. Here the run
  // finishes (and lets go of its lock) between the read and the question: the resume drives the
  // run from its old state, in which the last round is still open. Its first step carries every
  // decided round's settling out again, finds the lineage at a commit the old state never adopted,
  // and ends with exit 1: "the lineage branch ... moved outside forkflush (expected <base> or
  // <r0.b0>, found <r8.b0>): reset it to one of those commits, then resume" — advice that, taken,
  // throws away every round after the first of a run that had finished well. (By the code, past
  // that check it would run the last episode again: its branch went with its settled round, so
  // there is no result to read back.)
  // Should hold: the state is read again once the lock is held (as retryStop already does), and
  // the resume says the run is finished (exit 0), leaving the state and the branches as they were.
  // The resume waits at its sandbox probe, once it has read the state (bwrapGate), and goes on
  // once the run has finished.
  it('reads the state again under the lock: the finished run is left as it was (seed 7001)', async () => {
    const seed = 7001;
    const t = makeTask(seed, rng(seed), { total: 20 });
    const last = 'r8.b0';
    const started: Cli[] = [];
    try {
      const { run, resume, gate } = await resumeAtGate(
        t,
        last,
        (r) => new RegExp(`${last} started`).test(r.out()),
        started,
      );
      // The run's last episode goes on, and the run finishes.
      rmSync(join(t.logs, `hold-${last}`));
      const ran = await run.ended;
      expect(ran.code, ran.out.slice(-1500)).toBe(0);
      const done = loadState(t.dir) as RunState;
      expect(done.status).toBe('finished');
      const lineage = git(t.dir, 'rev-parse', `refs/heads/${lineageBranch(done.id, 0, 1)}`);
      gate.open();
      const resumed = await resume.ended;
      const after = loadState(t.dir) as RunState;
      const starts = readFileSync(join(t.logs, `starts-${last}`), 'utf8').trim();
      const said = `resume ended ${resumed.code}: ${resumed.out.slice(-1200)}`;
      expect.soft(starts, `${last}'s agent ran again: ${said}`).toBe('1');
      expect.soft(after.rounds, `state.json's rounds changed: ${said}`).toEqual(done.rounds);
      expect.soft(after.best, said).toEqual(done.best);
      expect.soft(git(t.dir, 'rev-parse', `refs/heads/${lineageBranch(done.id, 0, 1)}`), said).toBe(lineage);
      expect.soft(git(t.dir, 'rev-parse', `refs/heads/${bestBranch(done.id)}`), said).toBe(done.best?.commit);
      expect(resumed.code === 0 && /already finished/.test(resumed.out), said).toBe(true);
    } finally {
      for (const cli of started) signal(cli, 'KILL-group');
    }
  }, 240_000);
});

describeSandboxed('Ctrl-C, and at once a resume', () => {
  // The same read before the lock, the way a user meets it: Ctrl-C on `forkflush run`, then
  // `forkflush resume` at once. The resume reads state.json while the run is still stopping; the
  // run stops its episode, saves it as interrupted (its start taken back, what it spent charged)
  // and lets go of the lock; the resume then drives the state it read, in which the episode's start
  // is still open: it takes it for a start forkflush was killed in, charges it its whole allowance
  // and counts it killed, and writes that over what the run saved.
  it('a resume drives the state the stopped run saved, not the one it read first (seed 7002)', async () => {
    const seed = 7002;
    const t = makeTask(seed, rng(seed), { total: 20 });
    const held = 'r1.b0';
    const started: Cli[] = [];
    try {
      // The episode's agent runs (its start is saved before it runs), held.
      const { run, resume, gate } = await resumeAtGate(
        t,
        held,
        () => existsSync(join(t.logs, `starts-${held}`)),
        started,
      );
      signal(run, 'INT');
      const ran = await run.ended;
      expect(ran.code, ran.out.slice(-1500)).toBe(130);
      const saved = loadState(t.dir) as RunState;
      const stopped = saved.rounds[1]?.episodes[0];
      expect(stopped?.unfinishedStarts, 'the run took its start back').toBeUndefined();
      rmSync(join(t.logs, `hold-${held}`));
      gate.open();
      const resumed = await resume.ended;
      const said = `resume ended ${resumed.code}: ${resumed.out.slice(-1500)}`;
      expect(resumed.code, said).toBe(0);
      const after = loadState(t.dir) as RunState;
      const episode = after.rounds[1]?.episodes[0];
      // Nothing was ever killed: the Ctrl-C'd attempt is charged what the run saved, not an allowance.
      expect.soft(episode?.killedStarts, `${held} counted as killed: ${said}`).toBeUndefined();
      expect(episode?.interruptedSpent, said).toBe(stopped?.interruptedSpent);
    } finally {
      for (const cli of started) signal(cli, 'KILL-group');
    }
  }, 240_000);
});

const fixed = (process.env.FORKFLUSH_LOCAL_CHAOS_SEEDS ?? '')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isInteger(n) && n > 0);
const randomCount = Number(process.env.FORKFLUSH_LOCAL_CHAOS_RANDOM ?? 0);
const randomSeeds = Array.from({ length: randomCount }, () => 1 + Math.floor(Math.random() * 1e6));

describeSandboxed('local runs killed at random and resumed', () => {
  // The regression guard: seed 337125 kills `run` before its state is saved (run again), stops one
  // with Ctrl-C twice around a commit, kills a resume's group during an agent, asks for a status,
  // stops one with Ctrl-C, and ends with two resumes at once; then every invariant.
  const rows = [
    { seed: 337125, kills: 4 },
    ...[...fixed, ...randomSeeds].map((seed) => ({ seed, kills: 1 + (seed % 6) })),
  ];
  for (const { seed, kills } of rows) {
    it(`seed ${seed}: ${kills} kills, then resumes, and every invariant`, async () => {
      const t = await chaos(seed, { kills, total: 20, extras: true });
      if (process.env.FORKFLUSH_LOCAL_CHAOS_VERBOSE) console.log(`seed ${seed} (${t.dir}): ${t.history.join(' -> ')}`);
      if (t.problems.length > 0) writeFileSync(join(t.logs, 'problems.txt'), t.problems.join('\n\n'));
      expect(t.problems, `seed ${seed}; the task is in ${t.dir}`).toEqual([]);
    }, 900_000);
  }
});
