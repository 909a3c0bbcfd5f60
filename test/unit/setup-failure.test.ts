// When a run stops before spending the rest of its budget, and when it must go on (core/stop.ts):
// a setup that cannot work, a grader that scores nothing, an agent that fails or keeps crashing.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import {
  budgetLeftUnspent,
  endWarnings,
  nothingDone,
  overBudget,
  sameScoreEverywhere,
} from '../../src/core/end-warnings.js';
import { issueComment } from '../../src/core/github-status.js';
import { CRASH_STREAK } from '../../src/core/method.js';
import { planWarnings, simulate } from '../../src/core/plan.js';
import { applyDecision, applyInterrupted, applyOpen, applyResult, reconcile } from '../../src/core/reconcile.js';
import { type EpisodeResult, newRunState, type RunState } from '../../src/core/state.js';
import { haltsOnGitHub, retryStopped, stopBefore, stoppingFailure, stopReason } from '../../src/core/stop.js';
import { config, laterRounds, openingRound, result } from './helpers.js';

const opening = openingRound;

const noScore = (reason: string): Partial<EpisodeResult> => ({ score: null, reason });

describe('stopReason', () => {
  it('stops with code 2 at the first episode whose agent could not start, even before the round ends', () => {
    const s = opening(null, [{ exit: 'crash', agentNotStarted: 'exit 127: nope: not found' }], false);
    const f = stopReason(s);
    expect(f?.code).toBe(2);
    expect(f?.message).toContain('the agent could not start in r0.b0 (exit 127: nope: not found)');
    expect(f?.message).toContain('check agent.command');
  });

  it('stops with code 1 when neither the initial workspace nor the opening round got a score, naming the reasons', () => {
    const s = opening(null, [
      noScore('grader exit 1: Error: no module x'),
      noScore('grader exit 1: Error: no module x'),
      noScore('grader printed "oops", not a number'),
      noScore('grader timed out'),
    ]);
    const f = stopReason(s);
    expect(f?.code).toBe(1);
    // Each distinct reason once, at most three.
    expect(f?.message).toContain(
      '(grader exit 1: Error: no module x; grader printed "oops", not a number; grader timed out)',
    );
  });

  it('says what differs in the judge where the reasons point at it (network, git, environment, time, files)', () => {
    const hint = (reason: string) =>
      stopReason(opening(null, [noScore(reason), noScore(reason), noScore(reason), noScore(reason)]))?.message;
    expect(hint('the grader exited with code 6: curl: (6) Could not resolve host: example.com')).toContain(
      "(as it runs there: the judge's grader has no network unless grader.network: true)",
    );
    expect(hint('the grader exited with code 128: fatal: not a git repository')).toContain('without .git');
    expect(hint('the grader exited with code 1: Error: MY_TOKEN is not set')).toContain('what grader.env lists');
    expect(hint('the grader timed out after 12 s')).toContain('grader.timeout is the limit');
    expect(hint('the grader printed "oops", not a number')).not.toContain('as it runs there');
    expect(hint('the grader exited with code 1: ModuleNotFoundError: numpy')).not.toContain('no network');
  });

  it('goes on while the opening round is open, or when one episode scored', () => {
    const all = [noScore('a'), noScore('b'), noScore('c'), noScore('d')];
    expect(stopReason(opening(null, all.slice(0, 3), false))).toBeNull();
    expect(stopReason(opening(5, all.slice(0, 3), false))).toBeNull();
    expect(stopReason(opening(null, [noScore('a'), { score: 3 }, noScore('c'), noScore('d')]))).toBeNull();
    expect(stopReason(opening(5, [noScore('a'), { score: 3 }, noScore('c'), noScore('d')]))).toBeNull();
  });

  it('with a scored initial workspace, stops once CRASH_STREAK decided episodes and none since got a score, saying what to fix', () => {
    // The grader scores the initial workspace but fails on every changed tree where it is graded.
    const judge = 'the grader exited with code 1: ModuleNotFoundError: no module named numpy';
    const f = stopReason(opening(5, [noScore(judge), noScore(judge), noScore(judge), noScore(judge)]));
    expect(f).toMatchObject({ code: 1, graderScoredNothing: true });
    expect(f?.message).toBe(
      `the initial workspace got a score (5) but none of the 4 episodes since did (${judge}), so the run stopped rather than spend ` +
        "the rest of its budget: run the grader by hand on an episode's branch, fix what fails where it is graded, then start a new run" +
        // The judge's hint for a missing dependency (core/judge-hints.ts), new since this row was written.
        ' (as it runs there: the judge has only the committed files, so a dependency in a folder git ignores (node_modules, .venv) ' +
        'is not there: install it with setup.commands (npm ci, pip install -r requirements.txt), or commit it)',
    );
    // What the agent did, not the grader: a protected path changed, a workspace git cannot take.
    const protectedChange = {
      score: null,
      reason: 'the agent changed protected paths: grade.sh',
      protectedChanged: ['grade.sh'],
    };
    expect(
      stopReason(opening(5, [protectedChange, protectedChange, protectedChange, protectedChange]))?.message,
    ).toContain('the agent changes what grader.protected keeps every time');
    const big = noScore('the workspace could not be recorded ("w.bin" is 101 MB, more than a file may be)');
    expect(stopReason(opening(5, [big, big, big, big]))?.message).toContain(
      'keep what the agent makes that git cannot take',
    );
    // Serially: the first CRASH_STREAK decided episodes, not before.
    const unscored = Array.from({ length: CRASH_STREAK }, () => noScore(judge));
    expect(stopReason(singleRun(unscored.slice(1)))).toBeNull();
    expect(stopReason(singleRun(unscored))?.message).toContain(`none of the ${CRASH_STREAK} episodes since did`);
  });
});

const withBudget = (budget: string, agent = '{command: node agent.mjs}') =>
  parseConfig(`grader: {command: node grade.mjs}\nagent: ${agent}\nbudget: ${budget}\n`, 'test.yml');

describe('planWarnings', () => {
  it('warns of an agent CLI episode below one step, of less than a token, and of fractional evaluations', () => {
    const cli = withBudget('{total: 0.2, unit: usd}', '{kind: claude-code}');
    expect(planWarnings(cli).join('\n')).toMatch(/the smallest episode gets 0\.0\d+ usd, less than one agent step/);
    const tiny = withBudget('{total: 10, unit: tokens}');
    expect(planWarnings(tiny)).toEqual([
      expect.stringMatching(/^the smallest episode gets 0\.\d+ tokens, less than one token/),
    ]);
    const evals = withBudget('{total: 54, unit: evaluations}');
    expect(planWarnings(evals).join('\n')).toMatch(/episodes get fractional evaluations \(3\.24, 2\.43/);
  });

  it('says nothing of a plan that makes sense', () => {
    expect(planWarnings(config())).toEqual([]);
    expect(planWarnings(withBudget('{total: 200, unit: evaluations}'))).toEqual([]);
  });
});

const key = { kind: 'auth' as const, quote: 'Error: 401 invalid x-api-key' };
const crashed = (extra: Partial<EpisodeResult> = {}): Partial<EpisodeResult> => ({
  exit: 'crash',
  unchanged: true,
  failure: { kind: 'crash', quote: 'exit 1: TypeError: boom' },
  spent: 0,
  ...extra,
});

/** The run carried on through serial episodes with these results (the opening round decided first). */
/** A single-run lineage from an initial workspace scored 5: one episode a round, each decided unless a stop came first. */
function singleRun(results: Partial<EpisodeResult>[]): RunState {
  let s = newRunState({ id: 't', seed: 1, config: config('strategy: single-run'), baseCommit: 'base', baseScore: 5 });
  for (const r of results) {
    if (stopReason(s) !== null) break;
    const [open] = reconcile(s);
    if (open?.type !== 'open') throw new Error(`expected open, got ${open?.type}`);
    s = applyOpen(s, open.round);
    for (const e of open.round.episodes) s = applyResult(s, e.id, result(5, 24, r));
    const [d] = reconcile(s);
    if (d?.type === 'decide' && stopReason(s) === null) s = applyDecision(s, d.round, d.decision);
  }
  return s;
}

const serial = (results: Partial<EpisodeResult>[]) =>
  laterRounds(opening(5, [{ score: 6 }, { score: 7 }, { score: 5 }, { score: 4 }]), results);

describe('an agent that fails', () => {
  it('stops the run (code 2) at the first permanent failure, mid-round, quoting the agent and saying what to do', () => {
    const s = opening(5, [{ score: 5 }, { exit: 'crash', failure: key }], false);
    const f = stopReason(s);
    expect(f?.code).toBe(2);
    expect(f?.message).toBe(
      'the agent failed in r0.b1: its key or login was refused (Error: 401 invalid x-api-key), so every episode would fail ' +
        'the same way and the run stopped: check the key or login the agent uses (the variables it needs listed in agent.env, ' +
        'the key not expired), then resume the run',
    );
    expect(f?.markdown).toContain('(`Error: 401 invalid x-api-key`)');
    // Its own fix, where the spec gave one.
    const own = opening(5, [{ exit: 'crash', failure: { ...key, fix: 'run `claude setup-token`' } }], false);
    expect(stopReason(own)?.message).toMatch(/: run `claude setup-token`$/);
    expect(stopBefore(s, reconcile(s)[0])).toEqual(f);
  });

  it('stops on a passing failure the worker gave up on, and says after how many tries', () => {
    const s = opening(
      5,
      [
        {
          exit: 'crash',
          failure: { kind: 'rate-limit', quote: '429 Too Many Requests' },
          retries: [
            { kind: 'rate-limit', quote: '429', waitedSeconds: 15 },
            { kind: 'rate-limit', quote: '429', waitedSeconds: 45 },
          ],
        },
      ],
      false,
    );
    expect(stopReason(s)?.message).toContain(
      "the agent failed in r0.b0: its provider's rate limit kept refusing it in 3 tries (at most 3) (429 Too Many Requests)",
    );
  });

  it('goes on after a single crash nobody recognised, and after crashes that changed the workspace', () => {
    expect(stopReason(opening(5, [crashed(), { score: 6 }, crashed(), crashed()]))).toBeNull();
    expect(
      stopReason(
        serial([
          crashed({ unchanged: undefined }),
          crashed({ unchanged: undefined }),
          crashed({ unchanged: undefined }),
        ]),
      ),
    ).toBeNull();
    expect(stopReason(serial([crashed(), crashed()]))).toBeNull();
  });

  it(`stops when every branch of the first fork round crashed without changing anything, or ${CRASH_STREAK} episodes in a row did`, () => {
    const all = opening(5, [crashed(), crashed(), crashed(), crashed()], false);
    expect(stopReason(all)?.message).toMatch(
      /^the agent crashed without changing the workspace in every branch of the first fork round \(r0\.b0, r0\.b1, r0\.b2, r0\.b3\), the last with exit 1: TypeError: boom, so the run stopped before it spent more: run the agent by hand/,
    );
    const streak = serial([crashed(), crashed(), crashed()]);
    expect(stopReason(streak)?.code).toBe(2);
    expect(stopReason(streak)?.message).toContain(`in ${CRASH_STREAK} episodes in a row (r1.b0, r2.b0, r3.b0)`);
    // The open round is not decided: the stop comes first.
    expect(streak.rounds.at(-1)?.decision).toBeUndefined();
  });

  it('stops when the agent keeps running until agent.timeout without changing anything, whatever little it reports spent', () => {
    // A CLI that hangs (a question, a refused host) may report next to no spend: its budget never stops it.
    const timedOut = (extra: Partial<EpisodeResult> = {}): Partial<EpisodeResult> => ({
      exit: 'timeout',
      unchanged: true,
      note: 'stopped at agent.timeout',
      spent: 0.001,
      ...extra,
    });
    const streak = serial([timedOut(), timedOut(), timedOut()]);
    expect(stopReason(streak)?.code).toBe(2);
    expect(stopReason(streak)?.message).toMatch(
      // forkflush's note on the last is said as its own, not as the agent's words (review: a charge
      // estimate read "the last with … charged 2.4 tokens as an estimate").
      /^the agent ran until its time limit \(agent\.timeout: 1800 s\) without changing the workspace in 3 episodes in a row \(r1\.b0, r2\.b0, r3\.b0\), forkflush's note on the last: stopped at agent\.timeout, .*where the agent waited.*larger agent\.timeout/,
    );
    expect(retryStopped(streak)?.episodes.map((e) => e.id)).toEqual(['r3.b0']);
    // Mixed with crashes, it says both; every branch of the first fork round, the same.
    expect(stopReason(serial([crashed(), timedOut(), crashed()]))?.message).toContain(
      'the agent crashed or ran until its time limit (agent.timeout) without changing the workspace in 3 episodes',
    );
    expect(stopReason(opening(5, [timedOut(), timedOut(), timedOut(), timedOut()], false))?.message).toContain(
      'ran until its time limit (agent.timeout: 1800 s) without changing the workspace in every branch of the first fork round',
    );
    // A time-out that changed the workspace did work: an agent that is slow, not stuck.
    expect(stopReason(serial([timedOut(), timedOut({ unchanged: undefined }), timedOut()]))).toBeNull();
    expect(stopReason(serial([timedOut(), timedOut()]))).toBeNull();
  });

  it('stops an agent that ends at once, cleanly, without ever changing anything (it prints its help, a wrapper never calls it)', () => {
    const idle = (extra: Partial<EpisodeResult> = {}): Partial<EpisodeResult> => ({
      exit: 'finished',
      unchanged: true,
      note: 'the agent wrote no usage file',
      spent: 24,
      spentBasis: 'estimated',
      ...extra,
    });
    const s = opening(5, [idle(), idle(), idle(), idle()], false);
    expect(stopReason(s)?.code).toBe(2);
    expect(stopReason(s)?.message).toMatch(
      // forkflush's note, said as such (see the time-out row above).
      /^the agent ended without changing the workspace in every branch of the first fork round \(r0\.b0, r0\.b1, r0\.b2, r0\.b3\), and no episode of the run has changed it, forkflush's note on the last: the agent wrote no usage file, .*run the agent by hand/,
    );
    expect(retryStopped(s)?.episodes).toHaveLength(4);
    // An agent that reported what it spent may have tried ideas and kept none, or had too small an
    // allowance to try one: the run goes on (and ends with exit 1 if nothing ever changes, nothingDone).
    const measured = idle({ spentBasis: undefined, spent: 2 });
    expect(stopReason(opening(5, [measured, measured, measured, measured], false))).toBeNull();
    // One branch that worked is enough: an agent that can work may well leave some rounds as they were.
    expect(stopReason(opening(5, [idle(), idle(), idle({ unchanged: undefined }), idle()], false))).toBeNull();
    expect(stopReason(serial([idle(), idle(), idle()]))).toBeNull();
    // A single-run lineage (no fork round): the first three in a row.
    const single = singleRun([idle(), idle(), idle()]);
    expect(stopReason(single)?.message).toContain('ended without changing the workspace in 3 episodes in a row');
  });

  it('stops an agent whose first steps cost more than twice an episode may spend, changing nothing', () => {
    // A real CLI on a small budget: its first request alone is over the allowance; forkflush stops it there.
    const allowance = opening(5, [{ score: 5 }, { score: 5 }, { score: 5 }, { score: 5 }], false).rounds[0]?.episodes[0]
      ?.allowance as number;
    const overran = (extra: Partial<EpisodeResult> = {}): Partial<EpisodeResult> => ({
      exit: 'budget',
      unchanged: true,
      spent: allowance * 8,
      note: `stopped by forkflush: the session spent ${allowance * 8} of its ${allowance}`,
      ...extra,
    });
    const s = opening(5, [overran(), overran(), overran(), overran()], false);
    expect(stopReason(s)?.code).toBe(2);
    expect(stopReason(s)?.message).toMatch(
      /^the agent spent more than twice its allowance without changing the workspace in every branch of the first fork round \(r0\.b0, r0\.b1, r0\.b2, r0\.b3\) \(the last \d+ of its \d+\), so its first steps cost more than an episode may spend.*start a new run$/,
    );
    expect(retryStopped(s)).toBeNull();
    // Stopped at its allowance (a budget that ran out as planned), or having changed something: it worked.
    const atBudget = overran({ spent: allowance });
    expect(stopReason(opening(5, [atBudget, atBudget, atBudget, atBudget], false))).toBeNull();
    expect(
      stopReason(opening(5, [overran(), overran({ unchanged: undefined }), overran(), overran()], false)),
    ).toBeNull();
  });

  it('judges the first fork round whole, whichever of its branches finish first', () => {
    // Its branches run at once: three that crashed before the fourth ended are no streak.
    for (const order of [
      [undefined, crashed(), crashed(), crashed()],
      [crashed(), crashed(), crashed(), undefined],
    ]) {
      const s = opening(5, order as Partial<EpisodeResult>[], false);
      expect(stopReason(s)).toBeNull();
    }
    // The fourth crashed too: the round's rule names all four.
    expect(stopReason(opening(5, [crashed(), crashed(), crashed(), crashed()], false))?.message).toContain(
      'every branch of the first fork round (r0.b0, r0.b1, r0.b2, r0.b3)',
    );
  });

  it('a resume runs again what stopped the run, its spend kept; one whose fix is to the config is not resumable', () => {
    const s = opening(
      5,
      [{ score: 5 }, { exit: 'crash', failure: key, spent: 0.4, spentBasis: 'estimated' }, { score: 3 }],
      false,
    );
    const retried = retryStopped(s);
    expect(retried?.episodes.map((e) => e.id)).toEqual(['r0.b1']);
    const again = retried?.state.rounds[0]?.episodes[1];
    expect(again).toMatchObject({ id: 'r0.b1', interruptedSpent: 0.4, interruptedBasis: 'estimated' });
    expect(again?.result).toBeUndefined();
    expect(retried && stopReason(retried.state)).toBeNull();
    expect(reconcile(retried?.state as RunState).map((a) => a.type)).toEqual(['run', 'run']);
    for (const kind of ['model', 'cli', 'hidden-path'] as const) {
      const config = opening(5, [{ exit: 'crash', failure: { kind, quote: 'x' } }], false);
      expect(stopReason(config)?.code).toBe(2);
      expect(retryStopped(config)).toBeNull();
    }
    // Crashes that repeated: the open round's ones run again, nothing spent is lost.
    const streak = serial([crashed(), crashed(), crashed({ spent: 2 })]);
    const again2 = retryStopped(streak);
    expect(again2?.episodes.map((e) => e.id)).toEqual(['r3.b0']);
    expect(again2?.state.rounds.at(-1)?.episodes[0]?.interruptedSpent).toBe(2);
  });

  it('reads a result of an earlier release whose agent could not start as the cli failure', () => {
    const s = opening(5, [{ exit: 'crash', agentNotStarted: 'exit 127: nope: not found' }], false);
    expect(stoppingFailure(s.rounds[0]?.episodes[0]?.result)).toEqual({
      kind: 'cli',
      quote: 'exit 127: nope: not found',
    });
  });
});

describe('nothingDone', () => {
  it('says when a run ended with no score, or only scores of crashes that changed nothing', () => {
    expect(nothingDone(opening(5, [{ score: null }, { score: null }, { score: null }, { score: null }]))).toBe(
      'no episode got a score',
    );
    expect(nothingDone(opening(5, [crashed(), crashed({ score: 5 }), crashed(), crashed()]))).toMatch(
      /^no episode did any work/,
    );
    expect(nothingDone(opening(5, [crashed(), { score: 5 }, crashed(), crashed()]))).toBeNull();
    // Ends that never changed the workspace: green would say the run made something.
    const clean = { exit: 'finished', unchanged: true, score: 5, spentBasis: 'estimated' } as const;
    expect(nothingDone(opening(5, [clean, clean, clean, clean]))).toBe(
      'no episode did any work: none changed the workspace (does agent.command run the agent on the task, and may it edit files there?)',
    );
    expect(nothingDone(opening(5, [clean, { score: 5 }, clean, clean]))).toBeNull();
    // Whatever it reported spending (a CLI waiting for approval, ideas tried and none kept), and
    // stopped at its budget too: the run made nothing to take home.
    const tried = { exit: 'finished', unchanged: true, score: 5 } as const;
    const stopped = { exit: 'budget', unchanged: true, score: 5 } as const;
    expect(nothingDone(opening(5, [tried, stopped, tried, tried]))).toMatch(/^no episode did any work: none changed/);
  });
});

describe('a grader that stops scoring in the night', () => {
  const broke = 'the grader exited with code 2: sh: 0: cannot open lib.sh: No such file';
  it('stops the run (code 1) once whole rounds of CRASH_STREAK episodes since the last score got none, its best kept', () => {
    const s = serial([noScore(broke), noScore(broke), noScore(broke)]);
    const f = stopReason(s);
    expect(f).toMatchObject({ code: 1, graderStoppedScoring: true });
    expect(f?.message).toBe(
      `the grader scored none of the 3 episodes since r0.b3 got one (${broke}), so the run stopped rather than spend ` +
        "the rest of its budget; its best so far is kept: run the grader by hand on an episode's branch, fix what fails " +
        'where it is graded, then start a new run (as it runs there: the judge has only the committed files (none that ' +
        '.gitignore leaves out), no home folder, and of the folders outside the repository only those sandbox.read lists)',
    );
    expect(f?.markdown).toContain(`(\`${broke}\`)`);
    expect(retryStopped(s)).toBeNull();
    // On GitHub it halts the run too, whether or not the initial workspace's grade is in there.
    expect(haltsOnGitHub(f, false)).toBe(true);
    // It stops before the next step, but for the run's end (nothing left to save).
    expect(stopBefore(s, reconcile(s)[0])?.code).toBe(1);
    expect(stopBefore(s, { type: 'finish' })).toBeNull();
  });

  it('goes on while fewer did, after a score between them, or where a round that scored is part of the streak', () => {
    expect(stopReason(serial([noScore(broke), noScore(broke)]))).toBeNull();
    expect(
      stopReason(serial([noScore(broke), noScore(broke), { score: 6 }, noScore(broke), noScore(broke)])),
    ).toBeNull();
    // One branch of a fork round that scored: its unscored siblings finished in any order, no pattern.
    expect(stopReason(opening(5, [{ score: 3 }, noScore(broke), noScore(broke), noScore(broke)]))).toBeNull();
  });

  it('warns at the end of a run whose last rounds got no score, quoting the grader inertly on GitHub', () => {
    const yaml =
      'grader: {command: x}\nagent: {command: y}\nbudget: {total: 12, unit: evaluations, episode: 2}\nstrategy: single-run\n';
    let i = 0;
    const s = simulate(parseConfig(yaml, 'x'), (e) => ({ spent: e.allowance, score: i++ < 2 ? 1 : null }), 1);
    expect(s.status).toBe('finished');
    const warnings = endWarnings(s);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^the grader scored none of the \d+ episodes since r1\.b0 got one \(no reason given\): run the grader/,
    );
    expect(endWarnings(s, (t) => `<${t}>`)[0]).toContain('(<no reason given>)');
    expect(issueComment(s, 'finished')).toContain('**Status:** finished; note: the grader scored none of the');
    i = 0;
    expect(endWarnings(simulate(parseConfig(yaml, 'x'), (e) => ({ spent: e.allowance, score: i++ })))).toEqual([]);
  });
});

describe('overBudget', () => {
  const yaml = (kind: string) =>
    `grader: {command: x}\nagent: {kind: ${kind}${kind === 'command' ? ', command: y' : ''}}\nbudget: {total: 40, unit: tokens, episode: 8}\nstrategy: single-run\n`;
  it('warns when the run spent past budget.total, naming the episodes that passed their allowance', () => {
    // review: an episode that reported 100 against an allowance of 7.2 ended "finished: spent 106/40", exit 0, unsaid.
    let i = 0;
    const run = (kind: string) =>
      simulate(parseConfig(yaml(kind), 'x'), (e) => ({ spent: i++ === 1 ? 100 : e.allowance, score: 1 }), 1);
    const s = run('command');
    const w = overBudget(s);
    expect(w).toMatch(
      /^the run spent 1\d\d of its 40 tokens: an episode spent past its allowance \(r1\.b0: 100 of [\d.]+\); a command agent reports its spend when it ends/,
    );
    expect(endWarnings(s)[0]).toBe(w);
    i = 0;
    expect(overBudget(run('claude-code'))).toContain(
      'an agent CLI is stopped at the first reading of its usage past its allowance',
    );
    expect(
      overBudget(simulate(parseConfig(yaml('command'), 'x'), (e) => ({ spent: e.allowance, score: 1 }), 1)),
    ).toBeNull();
  });
});

describe('overBudget after interruptions', () => {
  it('does not blame an agent that kept to its allowance when an interrupted attempt was charged beside the one that ran again', () => {
    // review (a long night): after Ctrl-C and resume, "r0.b0: 10 of 8 ... have it stop itself at
    // $FORKFLUSH_BUDGET" named an agent that never spent past its allowance in one attempt.
    const c = parseConfig(
      'grader: {command: x}\nagent: {command: y}\nbudget: {total: 16, unit: tokens, episode: 8}\nstrategy: single-run\n',
      'x',
    );
    let s = newRunState({ id: 't', seed: 1, config: c, baseCommit: 'base', baseScore: 1 });
    for (;;) {
      const [a] = reconcile(s);
      if (!a) break;
      if (a.type === 'open') {
        s = applyOpen(s, a.round);
        for (const e of a.round.episodes) {
          // The last episode: the allowances of those after it cannot make room.
          if (e.id === 'r1.b0') s = applyInterrupted(s, e.id, 3);
          s = applyResult(s, e.id, result(2, e.allowance));
        }
      } else if (a.type === 'decide') s = applyDecision(s, a.round, a.decision);
      else if (a.type === 'finish') s = { ...s, status: 'finished' };
      else break;
    }
    const w = overBudget(s) ?? '';
    expect(w).toMatch(/^the run spent 19 of its 16 tokens: an episode ran again after an interruption/);
    expect(w).toContain('(3)');
    expect(w).not.toContain('spent past its allowance');
  });
});

describe('sameScoreEverywhere', () => {
  const yaml =
    'grader: {command: x}\nagent: {command: y}\nbudget: {total: 12, unit: evaluations, episode: 3}\nstrategy: single-run\n';
  const run = (score: (i: number) => number, base: number | null = 1) => {
    let i = 0;
    const state = simulate(parseConfig(yaml, 'x'), (e) => ({ spent: e.allowance, score: score(i++) }), 1);
    return { ...state, base: { ...state.base, score: base } };
  };
  it('warns when the grader gave the initial workspace and every episode that changed it one score', () => {
    const flat = run(() => 1);
    expect(sameScoreEverywhere(flat)).toBe(
      `the grader gave the initial workspace and all 4 episodes that changed it the same score (1): does grader.command grade the workspace it runs in? Run it by hand after a change to see`,
    );
    expect(issueComment(flat, 'finished')).toContain(
      '**Status:** finished; note: the grader gave the initial workspace',
    );
    expect(sameScoreEverywhere(run((i) => (i === 2 ? 2 : 1)))).toBeNull();
    expect(sameScoreEverywhere(run(() => 1, null))).toBeNull();
  });
});

describe('budgetLeftUnspent', () => {
  const yaml = (unit: string) =>
    `grader: {command: x}\nagent: {command: y}\nbudget: {total: 12, unit: ${unit}, episode: 3}\nstrategy: single-run\n`;
  it('warns when a finished run left most of its budget because its episodes spent next to nothing', () => {
    const idle = simulate(parseConfig(yaml('evaluations'), 'x'), () => ({ spent: 0, score: 1 }), 1);
    expect(idle.status).toBe('finished');
    expect(budgetLeftUnspent(idle)).toBe(
      `the run ended having spent 0 of its 12 evaluations: its ${idle.rounds.flatMap((r) => r.episodes).length} episodes spent little each, so each stretch of them stopped at its cap of twice its plan; does the agent call "$FORKFLUSH_GRADE"?`,
    );
    const tokens = simulate(parseConfig(yaml('tokens'), 'x'), () => ({ spent: 0.5, score: 1 }), 1);
    expect(budgetLeftUnspent(tokens)).toMatch(/^the run ended having spent [\d.]+ of its 12 tokens: .*plan$/);
    expect(
      budgetLeftUnspent(simulate(parseConfig(yaml('tokens'), 'x'), (e) => ({ spent: e.allowance, score: 1 }), 1)),
    ).toBeNull();
  });

  it("is said in the GitHub run's status too, where nobody sees the CLI's warnings", () => {
    const idle = simulate(parseConfig(yaml('evaluations'), 'x'), () => ({ spent: 0, score: 1 }), 1);
    expect(issueComment(idle, 'finished')).toContain(
      '**Status:** finished; note: the run ended having spent 0 of its 12 evaluations',
    );
    const full = simulate(parseConfig(yaml('tokens'), 'x'), (e) => ({ spent: e.allowance, score: 1 }), 1);
    expect(issueComment(full, 'finished')).toContain('**Status:** finished  \n');
  });
});
