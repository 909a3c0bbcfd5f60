// The buttons of the Actions tab and the nightly schedule, pressed or missed during a long
// unattended run: re-runs, cancels, hand dispatches, a disabled worker workflow, ticks that come
// twice, late or early. Each row failed before its fix (a review's findings); its comment says what
// went wrong and what holds now.
import { chmodSync, existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Probot } from 'probot';
import { afterEach, describe, expect, it } from 'vitest';
import { nightlyTick } from '../../src/app/app.js';
import { startNightly } from '../../src/app/server.js';
import { charged as chargedOf } from '../../src/core/budget.js';
import { CONFIG, Harness, testOctokit } from './harness.js';
import { useGitHubInABox } from './use-box.js';

useGitHubInABox();

const RUN = 'issue-7';
const NIGHTLY = `${CONFIG}schedule: { nightly: true, budget: 100, rounds: 5 }\n`;

/** Waits (polling) until `done()` holds, or `ms` have passed; says which. */
async function waitFor(done: () => boolean, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (done()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return done();
}

/** A logger that keeps every line (the hosted tick logs one per repository it ticked). */
function keptLogger(lines: string[]): any {
  const log: any = {
    info: (_fields: unknown, line?: string) => lines.push(String(line ?? _fields)),
    error: (_fields: unknown, line?: string) => lines.push(`error: ${String(line ?? _fields)}`),
    warn: () => {},
    debug: () => {},
    child: () => log,
  };
  return log;
}

describe('the hosted nightly timer and a restart of the app', () => {
  // FORKFLUSH_NIGHTLY_HOUR=20 (UTC): the team's rounds run at 20:00, at night in Asia. The app is
  // redeployed at 08:00 UTC the next day, in the team's working day. Failed before its fix:
  // startNightly ticks at start with rounds (for the last 20:00 mark, which the process before it
  // had served), and nightlyRun asked only whether a round ran on this UTC *date* (lastNightly):
  // every finished nightly run got its round at 08:00, in working hours, and none at 20:00. Each
  // restart moved the round. Now a round is once per night of its hour mark (github/nightly.ts).
  it('a restart of the app in the day runs no nightly round before FORKFLUSH_NIGHTLY_HOUR', {
    timeout: 180_000,
  }, async () => {
    const h = await new Harness({ '.github/autoresearch.yml': NIGHTLY }).load();
    await h.label(7);
    await h.playToEnd(RUN);
    // The night of the 30th: the 20:00 tick runs its round, played to its end.
    h.clock = new Date('2026-11-30T20:00:00Z');
    await nightlyTick(h.api(), h.clock);
    await h.playToEnd(RUN);
    const dispatched = h.gh.dispatches.length;
    // The next day at 08:00 UTC the app is redeployed: a new process, its timer started.
    h.clock = new Date('2026-12-01T08:00:00Z');
    const probot = new Probot({
      appId: h.box.auth.appId,
      privateKey: h.box.auth.privateKey,
      baseUrl: h.box.apiUrl,
      logLevel: 'fatal',
      Octokit: testOctokit(),
    });
    const lines: string[] = [];
    const app = { auth: probot.auth.bind(probot), log: keptLogger(lines) } as unknown as Probot;
    const startedAt = async (): Promise<void> => {
      lines.length = 0;
      const timer = startNightly(app, 20, h.recordKey, () => h.clock);
      try {
        // Its start-up tick ticks the repository (it logs the runs it synced) or fails.
        await waitFor(() => lines.some((l) => /nightly tick|repair|failed/.test(l)), 120_000);
      } finally {
        clearInterval(timer);
      }
    };
    await startedAt();
    expect({ lines, roundsDispatchedAt0800: h.gh.dispatches.slice(dispatched).map((d) => d.inputs.round) }).toEqual({
      lines: expect.any(Array),
      roundsDispatchedAt0800: [],
    });
    // Restarted again at 20:30: that night's round is served (once).
    h.clock = new Date('2026-12-01T20:30:00Z');
    await startedAt();
    expect(h.gh.dispatches.slice(dispatched).map((d) => d.inputs.round)).toHaveLength(1);
  });
});

const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
const folders: string[] = [];
afterEach(() => {
  for (const f of folders.splice(0)) rmSync(f, { recursive: true, force: true });
});

/**
 * A task whose agent is the test agent (usage 0.9 of its allowance), except r0.b1's first
 * attempt: it reports a spend of 9, then its runner is lost (the Action killed mid-agent, no result).
 */
async function lostRunnerTask() {
  const logs = await mkdtemp(join(tmpdir(), 'forkflush-buttons-'));
  folders.push(logs);
  chmodSync(logs, 0o777);
  const lost = `echo '{"spent": 9}' > "$FORKFLUSH_USAGE_FILE"; touch ${logs}/first; exec sleep 61.${process.pid}`;
  const command = `if [ "$FORKFLUSH_EPISODE" = r0.b1 ] && [ ! -e ${logs}/first ]; then ${lost}; else node agent.mjs improve ${logs}/calls.jsonl; fi`;
  const files = {
    '.github/autoresearch.yml': `grader:
  command: sh grade.sh
  protected: [grade.sh, agent.mjs]
agent:
  command: ${JSON.stringify(command)}
budget:
  total: 100
  unit: tokens
  episode: 10
fork:
  branches: 2
  at: [0.5]
  branch_budget: 0.15
sandbox: off
`,
    'agent.mjs': readFileSync(join(FIXTURES, 'agent.mjs'), 'utf8'),
    'grade.sh': readFileSync(join(FIXTURES, 'grade.sh'), 'utf8'),
    'value.txt': '0',
    'NOTES.md': '# Notes\n',
  };
  return { files, logs };
}

/** The runner of job `id` is lost: its Action's process (and the agent's sleep) killed at once. */
function loseRunner(h: Harness, id: number): void {
  const workspace = join(h.gh.store.root, 'jobs', String(id), 'workspace');
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const mine = readlinkSync(`/proc/${pid}/cwd`) === workspace && cmdline.includes('index.js');
      if (mine || cmdline.includes(`61.${process.pid}`)) process.kill(Number(pid), 'SIGKILL');
    } catch {}
  }
}

describe('"Re-run failed jobs" on a round whose end no event reported (Actions mode, GITHUB_TOKEN)', () => {
  // Actions mode with GITHUB_TOKEN (the README's default): no workflow_job and no workflow_run of a
  // round reaches the app; the hourly tick reads the branches. r0.b1's runner is lost while its
  // agent works (it had spent 9): the job is red, nothing pushed, and the round stays open until
  // its deadline. A teammate presses "Re-run failed jobs". Failed before its fix: the worker saw
  // the same run id as the dispatch's, an open episode with no result and its branch at its base,
  // and ran the agent again; its result (13.5) was recorded, and the first attempt's spend was in
  // no ledger (up to an allowance per press). Now a re-run's result is charged the attempts before
  // it, each its whole allowance, an estimate said as one (core/charge.ts withEarlierAttempts).
  it("a lost runner's job re-run by hand is charged the lost attempt's possible spend with its own", {
    timeout: 300_000,
  }, async () => {
    const { files, logs } = await lostRunnerTask();
    const h = await new Harness(files).load();
    await h.label(7);
    // Actions mode with GITHUB_TOKEN: a round the app dispatched sends no workflow_run (and no
    // workflow_job ever reaches the app): the hourly tick is how the app hears of the round.
    h.box.webhookUrl = null;
    const jobs = h.box.actions.queuedJobs();
    const job = jobs.find((j) => j.name.endsWith(' r0.b1'));
    if (!job) throw new Error("expected r0.b1's job");
    for (const other of jobs) if (other !== job) await h.box.runJob(other);
    // r0.b1's runner is lost while its agent works (it has reported a spend of 9): the job fails, no result pushed.
    const running = h.box.actions.runJob(job);
    expect(await waitFor(() => existsSync(join(logs, 'first')), 120_000)).toBe(true);
    loseRunner(h, job.id);
    await running;
    expect(job.conclusion).toBe('failure');
    // The next hourly tick (well within the round's deadline): r0.b0's result is read, r0.b1 has none yet.
    h.clock = new Date(h.clock.getTime() + 20 * 60_000);
    await nightlyTick(h.api(), h.clock);
    expect(h.state(RUN).rounds[0]?.episodes[1]?.result).toBeUndefined();
    // A teammate sees the red job in the Actions tab and clicks "Re-run failed jobs": GitHub runs
    // the same workflow run (its id kept) again, the failed job queued anew.
    h.box.actions.rerunFailedJobs(job.runId);
    await h.box.runQueued();
    h.clock = new Date(h.clock.getTime() + 20 * 60_000);
    await nightlyTick(h.api(), h.clock);
    const b1 = h.state(RUN).rounds[0]?.episodes[1];
    const calls = existsSync(join(logs, 'calls.jsonl'))
      ? readFileSync(join(logs, 'calls.jsonl'), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l).episode)
      : [];
    const agentRuns = 1 + calls.filter((e: string) => e === 'r0.b1').length;
    const charged = b1 ? chargedOf(b1) : 0;
    // Either the re-run runs no agent (the round settles with the lost job's failure charged, at
    // the deadline), or both attempts are charged (9 + 13.5): never an agent run not in the ledger.
    const counted = agentRuns === 1 || charged >= 9 + 13.5;
    expect({ agentRuns, charged, counted }).toEqual({ agentRuns, charged, counted: true });
    // The re-run ran the agent, and its result carries the lost attempt's charge: its allowance.
    expect(agentRuns).toBe(2);
    expect(b1?.result).toMatchObject({ spent: 13.5, earlierSpent: b1?.allowance });
    expect(b1?.result?.note).toContain('a re-run (attempt 2 of its workflow run)');
  });
});
