// forkflush compare and probe with each real agent kind: whole runs of the real CLIs (aider: the
// fake, see contract/aider.ts) against the scripted model server, in forkflush's sandbox, with
// tiny budgets. The model writes the same value every time, so every run scores the same: the
// compare's runs are all at equal spend, and the probe finds that the runs agree.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWith } from '../integration/cli-io.js';
import { aiderHarness, FAKE_AIDER } from './contract/aider.js';
import { CLAUDE, claudeHarness } from './contract/claude-code.js';
import { CODEX, codexHarness } from './contract/codex.js';
import { COPILOT, copilotHarness } from './contract/copilot.js';
import { GEMINI, MODEL as GEMINI_MODEL, geminiHarness } from './contract/gemini.js';
import type { AgentHarness } from './contract/harness.js';
import { OPENCODE, opencodeHarness } from './contract/opencode.js';

interface Kind {
  h: AgentHarness;
  command: string;
  model?: string;
}

const KINDS: Kind[] = [
  { h: claudeHarness, command: CLAUDE },
  { h: codexHarness, command: CODEX, model: 'gpt-5-codex' },
  { h: copilotHarness, command: COPILOT },
  { h: geminiHarness, command: GEMINI, model: GEMINI_MODEL },
  { h: aiderHarness, command: FAKE_AIDER, model: 'openai/gpt-5-mini' },
  { h: opencodeHarness, command: OPENCODE, model: 'mock/mock-model' },
];

/** A task repository whose grader reads value.txt, for the agent kind, with episodes of `episode` tokens. */
function taskRepo(k: Kind, episode: number): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), `forkflush-compare-${k.h.kind}-`)));
  writeFileSync(join(dir, 'grade.sh'), 'cat value.txt 2>/dev/null || echo 0\n');
  writeFileSync(join(dir, 'value.txt'), '0');
  writeFileSync(join(dir, 'TASK.md'), 'Make the number in value.txt as large as you can.\n');
  writeFileSync(join(dir, 'NOTES.md'), '# Notes\n');
  mkdirSync(join(dir, '.github'));
  const env = Object.keys(agentEnv(k));
  writeFileSync(
    join(dir, '.github', 'autoresearch.yml'),
    [
      'grader: {command: sh grade.sh, protected: [grade.sh], timeout: 10}',
      `agent: {kind: ${k.h.kind}, command: ${JSON.stringify(k.command)}${k.model ? `, model: ${k.model}` : ''}, timeout: 120, env: [${env.join(', ')}]}`,
      // Four episodes' worth: K = 2 branches of one episode each in two fork rounds (the opening, at 0.5).
      `budget: {total: ${4 * episode}, unit: tokens, episode: ${episode}}`,
      'fork: {branches: 2, at: [0.5], branch_budget: 0.25}',
      '',
    ].join('\n'),
  );
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, stdio: 'ignore' });
  git('init', '-q', '--initial-branch=main');
  git('add', '-A');
  git('commit', '-qm', 'task');
  return dir;
}

/**
 * The harness's variables for the agent, but those that point into the harness's own folder (Claude
 * Code's scratch folder): in a run the agent is the sandbox's user, and its /tmp is its episode's own.
 */
function agentEnv(k: Kind): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(k.h.env()).filter(([, v]) => !String(v).startsWith(k.h.root())));
}

describe.each(KINDS.map((k) => [k.h.kind, k] as const))('%s: compare and probe', (_kind, k) => {
  const saved: Record<string, string | undefined> = {};
  let dir = '';
  // One episode: its calls, and room to spare so that it ends by itself.
  const episode = Math.round(1.7 * k.h.workCalls * (k.h.perCall.input + k.h.perCall.output));

  beforeAll(async () => {
    await k.h.start();
    // The runner gives the agent this process's environment, through the allowlist.
    for (const [name, value] of Object.entries(agentEnv(k))) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
    k.h.model.work('value.txt', '7');
    dir = taskRepo(k, episode);
  });
  afterAll(async () => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    await k.h.stop();
  });

  it('compares fork-and-flush with single-run at equal spend', async () => {
    const r = await cliWith(
      [
        'compare',
        dir,
        '--strategies',
        'fork-and-flush,single-run',
        '--seeds',
        '1',
        '--branches',
        '2',
        '--concurrency',
        '3',
        '--seed',
        '1',
        '--json',
      ],
      { env: { ...process.env } },
    );
    expect(r.code, `${r.err}`).toBe(0);
    const results = JSON.parse(r.out);
    expect(results.runs).toHaveLength(2);
    for (const run of results.runs) {
      expect(run, JSON.stringify(run)).toMatchObject({ status: 'finished', best: 7, spendOk: true });
      expect(run.episodes).toBeGreaterThanOrEqual(3);
    }
    expect(results.summary.map((s: { strategy: string; mean: number }) => [s.strategy, s.mean])).toEqual([
      ['fork-and-flush', 7],
      ['single-run', 7],
    ]);
    expect(results.comparisons[0].paired).toMatchObject({ pairs: 1, ties: 1 });
    const folder = readdirSync(join(dir, '.forkflush')).find((n) => n.startsWith('compare-')) as string;
    const report = readFileSync(join(dir, '.forkflush', folder, 'report.md'), 'utf8');
    expect(report).toContain('Every run spent its budget');
  }, 600_000);

  it('probes: the runs agree, so there is little to gain', async () => {
    const r = await cliWith(['probe', dir, '--runs', '2', '--seed', '1', '--concurrency', '2', '--json'], {
      env: { ...process.env },
    });
    expect(r.code, r.err).toBe(0);
    const out = JSON.parse(r.out);
    expect(out.runs.map((x: { best: number }) => x.best)).toEqual([7, 7]);
    expect(out.probe).toMatchObject({ improved: 2, range: 0, recommendation: 'little to gain' });
    expect(out.probe.next).toBe(`forkflush run ${dir} --strategy single-run`);
  }, 600_000);
});
