// What the app checks of the worker workflow before a run (src/core/worker-workflow.ts).
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { workerTimeoutProblem } from '../../src/core/worker-workflow.js';

const config = (agentTimeout: number, setup = '') =>
  parseConfig(
    `grader: {command: g, timeout: 300}\nagent: {command: a, timeout: ${agentTimeout}}\nbudget: {total: 10}\n${setup}`,
    'x.yml',
  );
const workflow = (timeout: string | null, uses = 'acme/forkflush@v0.1.0') =>
  `on: workflow_dispatch\njobs:\n  episode:\n    runs-on: ubuntu-latest\n${timeout === null ? '' : `    timeout-minutes: ${timeout}\n`}    steps:\n      - uses: actions/setup-node@v5\n      - uses: ${uses}\n`;

describe("the worker job's timeout", () => {
  it('is a problem when shorter than an episode may take (agent, two gradings, two setups), with the value to set', () => {
    // 3600 + 2 × 300 seconds: 70 minutes.
    expect(workerTimeoutProblem(workflow('70'), config(3600))).toBeNull();
    expect(workerTimeoutProblem(workflow('69'), config(3600))).toBe(
      'the job `episode` of `.github/workflows/forkflush.yml` has `timeout-minutes: 69`, but an episode may take 70 minutes ' +
        '(agent.timeout, 2 × grader.timeout): Actions would cancel an episode that uses its time before it is graded, and the ' +
        'run would stop there, as at a cancel in the Actions tab. Set `timeout-minutes: 100` (README, "On GitHub"), or lower agent.timeout.',
    );
    // With a setup of 600 s: 90 minutes.
    const withSetup = config(3600, 'setup: {commands: [npm ci], timeout: 600}\n');
    expect(workerTimeoutProblem(workflow('80'), withSetup)).toMatch(
      /may take 90 minutes \(agent\.timeout, 2 × grader\.timeout, 2 × setup\.timeout\)/,
    );
  });

  it("takes GitHub's 360 minutes for a job without timeout-minutes", () => {
    expect(workerTimeoutProblem(workflow(null), config(3600))).toBeNull();
    const long = workerTimeoutProblem(workflow(null), config(6 * 3600));
    expect(long).toMatch(/has `timeout-minutes: 360`/);
    expect(long).toMatch(
      /GitHub-hosted runners stop every job at 360 minutes: only a self-hosted runner takes more\)\.$/,
    );
  });

  it('counts the install of an agent CLI the Action makes, up to its timeout', () => {
    const cli = parseConfig(
      'grader: {command: g, timeout: 300}\nagent: {kind: codex, timeout: 3600}\nbudget: {total: 10, unit: usd}\n',
      'x.yml',
    );
    expect(workerTimeoutProblem(workflow('75'), cli)).toMatch(
      /may take 80 minutes \(agent\.timeout, 2 × grader\.timeout, installing the agent CLI\)/,
    );
    expect(workerTimeoutProblem(workflow('80'), cli)).toBeNull();
  });

  it('says nothing where it cannot know: an expression, no forkflush step, a workflow that is not there or not YAML', () => {
    const expression = ['$', '{{ inputs.minutes }}'].join('');
    expect(workerTimeoutProblem(workflow(expression), config(3600))).toBeNull();
    expect(workerTimeoutProblem(workflow('5', 'actions/checkout@v5'), config(3600))).toBeNull();
    expect(workerTimeoutProblem(null, config(3600))).toBeNull();
    expect(workerTimeoutProblem('jobs: [', config(3600))).toBeNull();
  });
});
