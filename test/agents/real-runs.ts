// What the whole-run suite (whole-runs.test.ts) uses: each real agent kind with the
// command that starts its CLI, a task repository for it, and the variables that point it at its
// mock model.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { aiderHarness, FAKE_AIDER } from './contract/aider.js';
import { CLAUDE, claudeHarness } from './contract/claude-code.js';
import { CODEX, codexHarness } from './contract/codex.js';
import { COPILOT, copilotHarness } from './contract/copilot.js';
import { GEMINI, MODEL as GEMINI_MODEL, geminiHarness } from './contract/gemini.js';
import type { AgentHarness } from './contract/harness.js';
import { OPENCODE, opencodeHarness } from './contract/opencode.js';
import { QWEN, qwenHarness } from './contract/qwen-code.js';

export interface Kind {
  h: AgentHarness;
  command: string;
  model?: string;
}

export const KINDS: Kind[] = [
  { h: claudeHarness, command: CLAUDE },
  { h: codexHarness, command: CODEX, model: 'gpt-5-codex' },
  { h: copilotHarness, command: COPILOT },
  { h: geminiHarness, command: GEMINI, model: GEMINI_MODEL },
  { h: aiderHarness, command: FAKE_AIDER, model: 'openai/gpt-5-mini' },
  { h: opencodeHarness, command: OPENCODE, model: 'mock/mock-model' },
  { h: qwenHarness, command: QWEN, model: 'gpt-5-mini' },
];

/** One episode's tokens for the kind: its calls, and room to spare so that it ends by itself. */
export const episodeTokens = (k: Kind) => Math.round(1.7 * k.h.workCalls * (k.h.perCall.input + k.h.perCall.output));

/**
 * The harness's variables for the agent, but those that point into the harness's own folder (Claude
 * Code's scratch folder): in a run the agent is the sandbox's user, and its /tmp is its episode's own.
 */
export function agentEnv(k: Kind): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(k.h.env()).filter(([, v]) => !String(v).startsWith(k.h.root())));
}

/**
 * A committed task repository for the kind whose grader reads value.txt (the model writes 7 there),
 * configured by the grader and agent lines and then `more` (budget, strategy, map).
 */
export function taskRepo(k: Kind, suite: string, more: string[]): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), `forkflush-${suite}-${k.h.kind}-`)));
  writeFileSync(join(dir, 'grade.sh'), 'cat value.txt 2>/dev/null || echo 0\n');
  writeFileSync(join(dir, 'value.txt'), '0');
  writeFileSync(join(dir, 'TASK.md'), 'Make the number in value.txt as large as you can.\n');
  writeFileSync(join(dir, 'NOTES.md'), '# Notes\n');
  mkdirSync(join(dir, '.github'));
  const env = Object.keys(agentEnv(k));
  const agent = `{kind: ${k.h.kind}, command: ${JSON.stringify(k.command)}${k.model ? `, model: ${k.model}` : ''}, timeout: 120, env: [${env.join(', ')}]}`;
  writeFileSync(
    join(dir, '.github', 'autoresearch.yml'),
    ['grader: {command: sh grade.sh, protected: [grade.sh], timeout: 10}', `agent: ${agent}`, ...more, ''].join('\n'),
  );
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, stdio: 'ignore' });
  git('init', '-q', '--initial-branch=main');
  git('add', '-A');
  git('commit', '-qm', 'task');
  return dir;
}

/**
 * Runs `body` on a task repository for the kind (configured by `more(episode tokens)`) with its
 * mock model started, writing 7 into value.txt, and the CLI's environment: this process's and the
 * harness's variables (the runner gives the agent what its allowlist lets through). The mock is
 * stopped after.
 */
export async function withTask(
  k: Kind,
  suite: string,
  more: (episode: number) => string[],
  body: (dir: string, env: NodeJS.ProcessEnv) => Promise<void>,
): Promise<void> {
  await k.h.start();
  try {
    k.h.model.work('value.txt', '7');
    await body(taskRepo(k, suite, more(episodeTokens(k))), { ...process.env, ...agentEnv(k) });
  } finally {
    await k.h.stop();
  }
}
