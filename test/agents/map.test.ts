// forkflush map with each real agent kind as its judge: a short run of the real CLI against the
// scripted model server, then a map whose specs and triplet answers are the real CLI's final
// messages, in forkflush's sandbox. Not aider: it writes its repository map's cache into the folder
// it reads, and the judge's is read-only (README, "Idea maps"). The model says the
// same thing every time, "... b", so each spec is that message and each judgment is "b".
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWith } from '../integration/cli-io.js';
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
  { h: opencodeHarness, command: OPENCODE, model: 'mock/mock-model' },
];

const SAID = 'Both solutions write the number 7 into value.txt and do nothing else.\nb';

/** A task repository whose agent and judge are the kind, with a single run of three episodes. */
function taskRepo(k: Kind, episode: number): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), `forkflush-map-${k.h.kind}-`)));
  writeFileSync(join(dir, 'grade.sh'), 'cat value.txt 2>/dev/null || echo 0\n');
  writeFileSync(join(dir, 'value.txt'), '0');
  writeFileSync(join(dir, 'TASK.md'), 'Make the number in value.txt as large as you can.\n');
  writeFileSync(join(dir, 'NOTES.md'), '# Notes\n');
  mkdirSync(join(dir, '.github'));
  const env = Object.keys(agentEnv(k));
  const agent = `{kind: ${k.h.kind}, command: ${JSON.stringify(k.command)}${k.model ? `, model: ${k.model}` : ''}, timeout: 120, env: [${env.join(', ')}]}`;
  writeFileSync(
    join(dir, '.github', 'autoresearch.yml'),
    [
      'grader: {command: sh grade.sh, protected: [grade.sh], timeout: 10}',
      `agent: ${agent}`,
      `budget: {total: ${3 * episode}, unit: tokens, episode: ${episode}}`,
      'strategy: single-run',
      // The judge is the task's agent; a few questions, and a budget with room for them.
      `map: {triplets: 10, budget: ${100 * episode}}`,
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

/** The harness's variables for the agent, but those that point into the harness's own folder. */
function agentEnv(k: Kind): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(k.h.env()).filter(([, v]) => !String(v).startsWith(k.h.root())));
}

describe.each(KINDS.map((k) => [k.h.kind, k] as const))('%s as the map judge', (_kind, k) => {
  const saved: Record<string, string | undefined> = {};
  let dir = '';
  const episode = Math.round(1.7 * k.h.workCalls * (k.h.perCall.input + k.h.perCall.output));

  beforeAll(async () => {
    await k.h.start();
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

  it('writes each spec and answers each triplet in its final message', async () => {
    const run = await cliWith(['run', dir], { env: { ...process.env } });
    expect(run.code, run.err).toBe(0);
    k.h.model.answer(SAID);
    const before = k.h.model.calls().length;
    const r = await cliWith(['map', dir, '--json'], { env: { ...process.env } });
    expect(r.code, r.err).toBe(0);
    const map = JSON.parse(r.out);
    expect(map.points.length).toBeGreaterThanOrEqual(3);
    expect(map.calls.spec).toEqual({ made: map.points.length, cached: 0, failed: 0 });
    expect(map.judgments).toBe(10);
    for (const t of map.triplets) expect(t.answer).toBe('b');
    expect(map.judge.kind).toBe(k.h.kind);
    // The prompts the model got: a spec's and a triplet's, with the specs it wrote quoted.
    const prompts = k.h.model
      .calls()
      .slice(before)
      .flatMap((c) => c.prompts);
    expect(prompts.some((p) => p.includes('Write a functional specification of the solution'))).toBe(true);
    expect(prompts.some((p) => p.includes('Which of A and B takes an approach closer') && p.includes(SAID))).toBe(true);
    const report = readFileSync(join(dir, '.forkflush', map.target.id, 'report.md'), 'utf8');
    expect(report).toContain('## Idea map');
  }, 900_000);
});
