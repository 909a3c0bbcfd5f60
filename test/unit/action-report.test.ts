// What the worker Action reports (src/action/report.ts): its outputs and its job summary.
import { describe, expect, it } from 'vitest';
import type { JobOutcome } from '../../src/action/episode-job.js';
import { jobOutputs, jobSummary } from '../../src/action/report.js';
import { parseConfig } from '../../src/core/config.js';

const COMMIT = 'c0ffee1234567890abcdef1234567890abcdef12';

function outcome(over: Partial<JobOutcome['result']> = {}, attempt: JobOutcome['attempt'] = 'ran'): JobOutcome {
  return {
    run: 'issue-42',
    phase: 'opening',
    config: parseConfig(
      'grader:\n  command: sh grade.sh\nagent:\n  kind: command\n  command: ./agent\nbudget:\n  total: 10\n  unit: usd\n',
      'autoresearch.yml',
    ),
    attempt,
    layout: 1,
    episode: {
      id: 'r0.b1',
      round: 0,
      branch: 1,
      lineage: 0,
      base: 'b'.repeat(40),
      allowance: 2,
      context: 'fresh',
      contextFrom: null,
      directive: false,
      seed: 3,
    },
    result: {
      commit: COMMIT,
      score: 0.75,
      spent: 0.019380000000000001,
      exit: 'finished',
      protectedChanged: [],
      agentSeconds: 12.34,
      graderSeconds: 0.5,
      wallSeconds: 15,
      sandbox: 'bubblewrap 0.8.0',
      usage: { inputTokens: 3600, outputTokens: 240, costUsd: 0.01938, turns: 3 },
      ...over,
    },
  };
}

describe('the outputs', () => {
  it('tokens (in and out), cost in dollars, the agent version and the log file', () => {
    expect(
      jobOutputs(outcome(), { agentVersion: '2.1.332', logFile: '/runner/temp/forkflush-logs/x/agent.log' }),
    ).toEqual({
      score: '0.75',
      spent: '0.01938',
      exit: 'finished',
      commit: COMMIT,
      reason: '',
      tokens: '3840',
      cost: '0.01938',
      'agent-version': '2.1.332',
      'log-file': '/runner/temp/forkflush-logs/x/agent.log',
    });
  });

  it('are empty where nothing is known', () => {
    const o = outcome({ usage: undefined, score: null, reason: 'grader failed' });
    expect(jobOutputs(o)).toMatchObject({
      score: '',
      reason: 'grader failed',
      tokens: '',
      cost: '',
      'agent-version': '',
      'log-file': '',
    });
    const unpriced = outcome({ usage: { inputTokens: 10, outputTokens: 5, costUsd: null, turns: null } });
    expect(jobOutputs(unpriced)).toMatchObject({ tokens: '15', cost: '' });
  });
});

describe('the job summary', () => {
  const facts = {
    agentKind: 'claude-code',
    agentVersion: '2.1.332',
    logFile: '/runner/temp/forkflush-logs/issue-42-r0.b1/agent.log',
    transcriptLines: 7,
    artifact: {
      uploaded: true as const,
      name: 'forkflush-issue-42-r0.b1',
      id: 9,
      url: 'https://github.com/owner/repo/actions/runs/5/artifacts/9',
    },
    diffStat: [' notes.txt | 1 +', ' 1 file changed, 1 insertion(+)'],
    journal: [
      '- r0.b1: wrote notes',
      '- forkflush r0.b1 (opening, fresh context): score 0.75; spent 0.019 of 2 usd; ended: finished.',
    ],
    issue: 42,
    serverUrl: 'https://github.com',
    repository: 'owner/repo',
    runId: '5',
    runAttempt: '2',
  };

  it("keeps the episode's row, and adds what it used, the agent, the log, the changes, the journal and links", () => {
    const s = jobSummary(outcome(), facts);
    expect(s).toContain('### forkflush issue-42: episode r0.b1');
    expect(s).toContain(
      `| r0.b1 (round 0, branch 1) | opening | fresh context | 0.75 | 0.019 of 2 usd | finished | ${COMMIT.slice(0, 10)} |`,
    );
    expect(s).toContain('| tokens | 3,840 (3,600 in, 240 out) |');
    expect(s).toContain('| cost | $0.0194 |');
    expect(s).toContain('| turns | 3 |');
    expect(s).toContain('| agent | claude-code `2.1.332` |');
    expect(s).toContain('| time | agent 12.3 s, grader 0.5 s, episode 15 s |');
    expect(s).toContain('| sandbox | `bubblewrap 0.8.0` |');
    expect(s).toContain(
      '| log | transcript in the job log (7 lines, in a collapsed group); artifact [forkflush-issue-42-r0.b1](https://github.com/owner/repo/actions/runs/5/artifacts/9); on the runner: `/runner/temp/forkflush-logs/issue-42-r0.b1/agent.log` (redacted) |',
    );
    expect(s).toContain('**Changes**\n\n```text\n notes.txt | 1 +\n 1 file changed, 1 insertion(+)\n```');
    expect(s).toContain('**The journal’s new entries**\n\n```text\n- r0.b1: wrote notes\n- forkflush r0.b1');
    expect(s).toContain(
      '**Links**: [issue #42](https://github.com/owner/repo/issues/42) · ' +
        `[the commit](https://github.com/owner/repo/commit/${COMMIT}) · ` +
        '[the branch](https://github.com/owner/repo/tree/forkflush/issue-42/round-0/branch-1) · ' +
        '[this workflow run](https://github.com/owner/repo/actions/runs/5/attempts/2)',
    );
  });

  it('shows what the agent wrote as code: a journal cannot close its block, mention people or add links', () => {
    const s = jobSummary(outcome({ note: 'see @someone [x](http://evil)' }), {
      ...facts,
      journal: ['```', '@team look ![img](http://x/y.png)', '\u001b[31mred'],
    });
    expect(s).toContain('````text\n```\n@team look ![img](http://x/y.png)\nred\n````');
    expect(s).toContain('Note: `see @someone [x](http://evil)`');
    expect(s).not.toContain('\u001b');
  });

  it('says why there is no artifact, and what is not known', () => {
    const s = jobSummary(outcome({ usage: { inputTokens: 10, outputTokens: 5, costUsd: null, turns: null } }), {
      ...facts,
      agentVersion: null,
      artifact: { uploaded: false, name: 'n', why: 'ACTIONS_RESULTS_URL is not set' },
      diffStat: [],
      journal: [],
      issue: null,
    });
    expect(s).toContain('| cost | not reported |');
    expect(s).not.toContain('| turns |');
    expect(s).toContain('| agent | claude-code (version not known) |');
    expect(s).toContain('no artifact (`ACTIONS_RESULTS_URL is not set`)');
    expect(s).toContain('**Changes**: none');
    expect(s).not.toContain('journal’s new entries');
    expect(s).not.toContain('issue #');
  });

  it('names a cost forkflush priced itself', () => {
    const priced = outcome({
      usage: { inputTokens: 2100, outputTokens: 21, costUsd: 0.0028, turns: 1, pricedFrom: 'gpt-5-codex list prices' },
    });
    expect(jobSummary(priced, facts)).toContain('| cost | $0.0028 (priced by forkflush: `gpt-5-codex list prices`) |');
  });

  it('of an attempt that did not run: the result that stands, without an agent of its own', () => {
    const s = jobSummary(outcome({}, 'already-recorded'), { agentKind: 'claude-code' });
    expect(s).toContain('already has its result on its branch');
    expect(s).toContain('| agent | claude-code |');
    expect(s).not.toContain('**Links**');
  });
});
