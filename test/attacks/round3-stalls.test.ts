// Round 3: special files and stalls. A hostile agent (or code of its that setup or the grader
// runs) leaves what would block forkflush's own git for good: a FIFO where git opens files by name
// (.gitignore, .gitattributes, a nested .git's HEAD), one at a protected path, a socket, a link or
// a .git file leading git to a FIFO outside the tree, a daemon that lays them again. Each run
// must end within its limits with the honest sibling's score recorded and the hostile episode's
// note saying what was removed, as root and as an ordinary user. Then SIGTERM, whatever the
// episode is doing: the process exits with 130 within its bound, leaves nothing running, and
// `forkflush resume` finishes the run.
import { type ChildProcess, execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Episode } from '../../src/core/state.js';
import { buildActionFromSource } from '../integration/action-repo.js';
import {
  type AttackRepo,
  type AttackRepoOptions,
  CAT_GRADER,
  cleanupAttackTemps,
  currentCli,
  describeSandboxed,
  FX,
  killProcessesUnder,
  makeActionRepo,
  makeAttackRepo,
  newestRunState,
  processesUnder,
  processesWith,
  runCli,
  runJob,
  showFile,
  treeMode,
  unique,
} from './helpers.js';

afterAll(cleanupAttackTemps);
beforeAll(async () => {
  await currentCli();
});

/** The Action built from these sources (dist/ is rebuilt only at release). */
const action = buildActionFromSource();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const isRoot = process.getuid?.() === 0;
if (!isRoot)
  console.warn('\n!!!!!!!! round 3 as an ordinary user needs root to switch to uid 65534: SKIPPED !!!!!!!!\n');

/** The uid an ordinary user's run takes (nobody): its files and home are handed to it. */
const NOBODY = 65534;

/** A fork of two branches at once: r0.b0 lays the trap, r0.b1 works honestly. */
const TWO_BRANCHES = {
  strategy: 'best-of-n',
  budget: 'total: 12\n  unit: tokens\n  episode: 6',
  extra: 'fork:\n  branches: 2',
};
/** Each agent is done in a moment: the run must end well within the agent's deadline and a few seconds. */
const AGENT_TIMEOUT = 20;
const RUN_DEADLINE_MS = 60_000;

/** Runs `forkflush run` (the built CLI) on the repository, as root or as nobody; kills what it left. */
async function cliRun(repo: AttackRepo, asUser: boolean, env: NodeJS.ProcessEnv = {}) {
  const root = join(repo.dir, '..');
  const home = join(root, 'home');
  mkdirSync(home, { recursive: true });
  if (asUser) execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, root]);
  try {
    return await runCli(['run', repo.dir, '--seed', '1'], {
      cwd: root,
      deadlineMs: RUN_DEADLINE_MS,
      env: { PATH: process.env.PATH, HOME: asUser ? home : process.env.HOME, LANG: 'C.UTF-8', ...env },
      ...(asUser ? { uid: NOBODY } : {}),
    });
  } finally {
    killProcessesUnder(root);
  }
}

interface StallCase {
  mode: string;
  repo?: Partial<AttackRepoOptions>;
  /** What the hostile episode's note names (removed); at least these. */
  removed: RegExp;
  /** What is true of the hostile episode's result otherwise. */
  check(e: Episode, repo: AttackRepo): void;
}

const scored = (e: Episode) => expect(e.result?.score).toBe(7);

const CASES: StallCase[] = [
  { mode: 'gitignore', removed: /3 special files .*"(sub\/)?(deeper\/)?\.gitignore"/, check: scored },
  { mode: 'gitattributes', removed: /2 special files .*"(lib\/)?\.gitattributes"/, check: scored },
  {
    mode: 'nested-head',
    removed: /2 special files .*"vendor\/lib\/\.git(\/HEAD)?"/,
    check: (e, repo) => {
      scored(e);
      expect(showFile(join(repo.dir, '.git'), e.result?.commit ?? '', 'vendor/lib/code.txt')).toBe('code\n');
    },
  },
  {
    mode: 'protected',
    repo: { protected: ['grade.sh', 'tests/**'] },
    removed: /2 special files .*"(grade\.sh|tests\/planted)"/,
    check: (e, repo) => {
      expect(e.result?.score).toBeNull();
      expect(e.result?.protectedChanged).toEqual(['grade.sh']);
      expect(showFile(join(repo.dir, '.git'), e.result?.commit ?? '', 'grade.sh')).toMatch(/honest grader/);
    },
  },
  {
    mode: 'links',
    removed: /5 special files or git redirects .*"(\.gitignore|\.gitattributes|\.gitmodules|n1\/\.git|n2\/\.git)"/,
    check: (e, repo) => {
      scored(e);
      const gitDir = join(repo.dir, '.git');
      const commit = e.result?.commit ?? '';
      expect(treeMode(gitDir, commit, 'value-link')).toBe('120000');
      expect(treeMode(gitDir, commit, 'abs-link')).toBe('120000');
      expect(showFile(gitDir, commit, 'n1/inner.txt')).toBe('inner\n');
      for (const gone of ['.gitignore', '.gitattributes', '.gitmodules'])
        expect(treeMode(gitDir, commit, gone)).toBeNull();
    },
  },
  {
    mode: 'daemon',
    removed: /special files .*"(\.gitignore|pipe)"/,
    check: (e, repo) => {
      scored(e);
      expect(existsSync(join(repo.logs, 'daemon-started'))).toBe(true);
    },
  },
  {
    mode: 'setup',
    repo: { files: { 'install.sh': 'echo installed > installed.txt\n' }, extra: 'setup: sh install.sh' },
    removed: /3 special files .*"(\.gitignore|deps\/\.git(\/HEAD)?)"/,
    check: scored,
  },
  {
    mode: 'solver',
    repo: {
      grader: 'sh grade.sh',
      protected: ['grade.sh', '*.expected'],
      files: {
        'grade.sh':
          '# The honest grader, which runs solve.sh if there is one.\n[ -f solve.sh ] && sh solve.sh > /dev/null 2>&1\ncat value.txt\n',
      },
    },
    removed: /4 special files .*"(sock|x\.expected|sub\/\.git(\/HEAD)?)"/,
    check: (e) => {
      // The FIFO made at a protected path while the grader ran voids the score, swept or not.
      expect(e.result?.score).toBeNull();
      expect(e.result?.reason).toBe('the graded code wrote under protected paths while the grader ran: x.expected');
    },
  },
];

for (const asUser of [false, true]) {
  describeSandboxed(
    `special files that would stall forkflush's git, ${asUser ? 'as an ordinary user' : 'as root'}`,
    () => {
      it.skipIf(asUser && !isRoot).each(CASES.map((c) => [c.mode, c] as const))(
        '%s: the run ends within its limits, the sibling is scored, the note says what went',
        async (_, c) => {
          const marker = unique('ff-stall');
          const repo = makeAttackRepo({
            agent: `sh {fx}/round3-stall.sh ${c.mode} {logs} ${marker}`,
            grader: CAT_GRADER,
            agentTimeout: AGENT_TIMEOUT,
            ...TWO_BRANCHES,
            ...c.repo,
            extra: `${TWO_BRANCHES.extra}\n${c.repo?.extra ?? ''}`,
          });
          const cli = await cliRun(repo, asUser);
          const state = newestRunState(repo.dir);
          const how = `exit ${cli.exitCode} after ${cli.ms} ms:\n${cli.out.slice(-1500)}`;
          expect(cli.timedOut, how).toBe(false);
          expect(state?.status, how).toBe('finished');
          expect(cli.ms, how).toBeLessThan((AGENT_TIMEOUT + 10) * 1000);
          const [hostile, honest] = state?.rounds[0]?.episodes ?? [];
          if (!hostile || !honest) throw new Error('no episodes');
          expect(honest.result?.score, how).toBe(5);
          expect(hostile.result?.note ?? '', JSON.stringify(hostile.result)).toMatch(c.removed);
          c.check(hostile, repo);
          // As nobody: the run's own files are nobody's, and its sandbox the unprivileged one.
          if (asUser) expect(statSync(join(repo.dir, '.forkflush', state?.id ?? '')).uid).toBe(NOBODY);
          expect(hostile.result?.sandbox).toMatch(/^bubblewrap/);
          expect(processesWith(marker)).toEqual([]);
        },
      );
    },
  );
}

// ---- SIGTERM, whatever the episode is doing ----

/**
 * How long a stopped forkflush may take to exit (src/cli/index.ts STOP_WITHIN_MS), and a second
 * for the process to be reaped on a busy machine.
 */
const STOP_BOUND_MS = 11_000;

interface Stopped {
  exitCode: number | null;
  /** From the SIGTERM to the exit. */
  ms: number;
  out: string;
}

/**
 * Starts `forkflush run`, waits until `ready()` says the episode is where the test wants it, sends
 * one SIGTERM, and times the exit.
 */
async function runAndTerminate(repo: AttackRepo, ready: () => boolean, env: NodeJS.ProcessEnv = {}): Promise<Stopped> {
  const root = join(repo.dir, '..');
  let child: ChildProcess | undefined;
  let exited = false;
  let said = '';
  const running = runCli(['run', repo.dir, '--seed', '1'], {
    cwd: root,
    deadlineMs: 150_000,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8', ...env },
    onStart: (c) => {
      child = c;
      c.on('exit', () => {
        exited = true;
      });
    },
    onOutput: (out) => {
      said = out;
    },
  });
  // Bounds against a hang, not timings: idle, the episode gets there in 2 s; CI once took over 30 s
  // (two cores, with chaos runs and the agent CLIs' install beside the suite).
  for (let i = 0; i < 1_800 && !exited && !ready(); i++) await sleep(50);
  expect(
    ready(),
    `the episode got where the test stops it; forkflush ${exited ? 'exited' : 'runs'}:\n${said.slice(-1500)}`,
  ).toBe(true);
  // A moment in that step, so that it is really waiting there.
  await sleep(500);
  const sent = Date.now();
  child?.kill('SIGTERM');
  const r = await running;
  return { exitCode: r.exitCode, ms: Date.now() - sent, out: r.out };
}

/** After the stop: nothing of the run is running, the episode is unrecorded, and a resume finishes it. */
async function expectStoppedThenResumed(repo: AttackRepo, stopped: Stopped, marker: string): Promise<void> {
  const root = join(repo.dir, '..');
  const how = `exit ${stopped.exitCode} ${stopped.ms} ms after the SIGTERM:\n${stopped.out.slice(-1500)}`;
  expect(stopped.exitCode, how).toBe(130);
  expect(stopped.ms, how).toBeLessThan(STOP_BOUND_MS);
  expect(stopped.out).toMatch(/interrupted: finished episodes are saved\. Continue with: forkflush resume/);
  console.log(`SIGTERM to exit: ${stopped.ms} ms`);
  await sleep(300);
  expect(processesUnder(root), 'processes of the stopped run').toEqual([]);
  expect(processesWith(marker)).toEqual([]);
  const state = newestRunState(repo.dir);
  const episode = state?.rounds[0]?.episodes[0];
  expect(episode?.result).toBeUndefined();
  // Stopped by forkflush itself: not a start that never ended.
  expect(episode?.unfinishedStarts).toBeUndefined();
  const resumed = await runCli(['resume', repo.dir], { cwd: root, deadlineMs: 60_000 });
  killProcessesUnder(root);
  const after = newestRunState(repo.dir);
  expect(resumed.exitCode, resumed.out.slice(-1500)).toBe(0);
  expect(after?.status).toBe('finished');
  expect(after?.rounds[0]?.episodes[0]?.result?.score).toBe(5);
  expect(readFileSync(join(repo.logs, 'attempts'), 'utf8').trim()).toBe('2');
}

// Room for runAndTerminate's bounds, the stop and a resume.
describeSandboxed('SIGTERM to forkflush run', { timeout: 240_000 }, () => {
  it('while the agent runs: exit 130 within the bound, nothing left running, resumed to the end', async () => {
    const marker = unique('ff-term-agent');
    const repo = makeAttackRepo({
      agent: `sh {fx}/round3-term.sh agent {logs} ${marker}`,
      grader: CAT_GRADER,
      agentTimeout: 60,
    });
    try {
      const stopped = await runAndTerminate(repo, () => existsSync(join(repo.logs, 'ready')));
      await expectStoppedThenResumed(repo, stopped, marker);
    } finally {
      killProcessesUnder(join(repo.dir, '..'));
    }
  });

  it("while the judge's grader runs (one that sleeps): the same", async () => {
    const marker = unique('ff-term-grader');
    const repo = makeAttackRepo({
      agent: `sh {fx}/round3-term.sh grader {logs} ${marker}`,
      // It sleeps where the agent left slow.txt, whose text names the sleep (the marker).
      grader: "sh -c 'test -f slow.txt && sleep $(cat slow.txt); cat value.txt'",
      graderTimeout: 60,
    });
    const sleeping = () => processesWith('sleep\u000030.').length > 0 && existsSync(join(repo.logs, 'ready'));
    try {
      const stopped = await runAndTerminate(repo, sleeping);
      await expectStoppedThenResumed(repo, stopped, marker);
    } finally {
      killProcessesUnder(join(repo.dir, '..'));
    }
  });

  it("while forkflush's own git is stuck on a FIFO (its user's attributes file, made one by the agent): the same", async () => {
    const marker = unique('ff-term-git');
    const repo = makeAttackRepo({ agent: `sh {fx}/round3-term.sh git {logs} ${marker}`, grader: CAT_GRADER });
    // forkflush's git reads $XDG_CONFIG_HOME/git/attributes (its ignore file no longer: the
    // repository's rules alone apply to the agent's work); here it is in a folder the agent may write.
    const xdg = join(repo.logs, 'xdg');
    mkdirSync(join(xdg, 'git'), { recursive: true });
    chmodSync(join(xdg, 'git'), 0o777);
    const root = join(repo.dir, '..');
    const stuckGit = () =>
      processesUnder(root).some((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('ls-files');
        } catch {
          return false;
        }
      });
    try {
      const stopped = await runAndTerminate(repo, stuckGit, { XDG_CONFIG_HOME: xdg });
      await expectStoppedThenResumed(repo, stopped, marker);
    } finally {
      killProcessesUnder(root);
    }
  });

  it('while something does not listen to it (a git of the pre-flight, stuck on a FIFO): the bound ends it, nothing left', async () => {
    const repo = makeAttackRepo({ agent: 'echo 5 > value.txt', grader: CAT_GRADER });
    const root = join(repo.dir, '..');
    // The pre-flight checks with `git status` (which reads its user's ignore file) that the task is committed.
    const xdg = join(root, 'xdg');
    mkdirSync(join(xdg, 'git'), { recursive: true });
    execFileSync('mkfifo', [join(xdg, 'git', 'ignore')]);
    const stuckGit = () =>
      processesUnder(root).some((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('status');
        } catch {
          return false;
        }
      });
    try {
      const stopped = await runAndTerminate(repo, stuckGit, { XDG_CONFIG_HOME: xdg });
      const how = `exit ${stopped.exitCode} ${stopped.ms} ms after the SIGTERM:\n${stopped.out.slice(-1500)}`;
      console.log(`SIGTERM to exit, past the bound: ${stopped.ms} ms`);
      expect(stopped.exitCode, how).toBe(130);
      expect(stopped.ms, how).toBeGreaterThanOrEqual(STOP_BOUND_MS - 1_000);
      // Past the bound by its stop of every command: 0.5 s idle, 2.2 s with the suite and the agent
      // CLIs side by side on two cores. What it guards against is a stop that never ends.
      expect(stopped.ms, how).toBeLessThan(STOP_BOUND_MS + 5_000);
      expect(stopped.out).toMatch(
        /forkflush: still stopping after 10 s; every command it started is stopped now, and it exits/,
      );
      await sleep(300);
      expect(processesUnder(root), 'processes of the stopped run').toEqual([]);
    } finally {
      killProcessesUnder(root);
    }
  });
});

describeSandboxed('SIGTERM to the worker Action', () => {
  /** How long a cancelled job may take to end (src/action/main.ts STOP_WITHIN_MS), and a second. */
  const JOB_STOP_BOUND_MS = 8_000;

  it.each([
    ['while the agent runs', 'agent'],
    ["while forkflush's own git is stuck on a FIFO", 'git'],
  ])('%s: the job fails as cancelled within its bound, nothing left running', async (_, mode) => {
    const marker = unique('ff-term-action');
    const repo = makeActionRepo('placeholder');
    repo.agent = `sh ${FX}/round3-term.sh ${mode} ${repo.logs} ${marker}`;
    repo.publish(repo.openingState());
    const xdg = join(repo.logs, 'xdg');
    mkdirSync(join(xdg, 'git'), { recursive: true });
    chmodSync(join(xdg, 'git'), 0o777);
    let child: ChildProcess | undefined;
    const job = runJob(repo, 'r0.b0', {
      action: await action,
      env: { XDG_CONFIG_HOME: xdg },
      onStart: (c) => {
        child = c;
      },
    });
    const stuck = () =>
      mode === 'agent'
        ? existsSync(join(repo.logs, 'ready'))
        : processesUnder(repo.root).some((p) => {
            try {
              return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('ls-files');
            } catch {
              return false;
            }
          });
    try {
      for (let i = 0; i < 600 && !stuck(); i++) await sleep(50);
      expect(stuck(), 'the episode got where the test stops it').toBe(true);
      await sleep(500);
      const sent = Date.now();
      child?.kill('SIGTERM');
      const r = await job;
      const ms = Date.now() - sent;
      console.log(`SIGTERM to the end of the job (${mode}): ${ms} ms`);
      const how = `exit ${r.exitCode} ${ms} ms after the SIGTERM:\n${r.stdout.slice(-1500)}`;
      expect(r.exitCode, how).toBe(1);
      expect(ms, how).toBeLessThan(JOB_STOP_BOUND_MS);
      expect(r.stdout).toMatch(/the job was cancelled before the episode had a result/);
      await sleep(300);
      expect(processesUnder(repo.root), 'processes of the cancelled job').toEqual([]);
      expect(processesWith(marker)).toEqual([]);
    } finally {
      killProcessesUnder(repo.root);
    }
  });
});
