// The `aider` agent: aider (the PyPI package aider-chat), one `--message-file` run per episode.
//
// The aider facts this builds on (repository Aider-AI/aider; aider cannot be installed on
// forkflush's development machine, so test/agents/aider.test.ts runs a fake built from them,
// test/fixtures/agents/aider/fake-aider.mjs):
// - `aider --message-file F` sends one message, processes the reply (edits, up to 3 reflections)
//   and exits; `--yes-always` answers every confirmation yes, except the model's shell commands,
//   which need an explicit yes and are therefore never run (aider/io.py confirm_ask,
//   base_coder.py handle_shell_commands). Options: aider/website/docs/config/options.md.
// - The conversation is the chat history markdown, by default `.aider.chat.history.md` in the git
//   root; `--chat-history-file F --restore-chat-history` continues the conversation saved in F.
//   Keeping F in the context folder keeps it out of the workspace, whose every file forkflush
//   commits, and lets forkflush carry, copy or drop it like any other context.
// - aider has no turn or money limit: forkflush reads the usage line aider prints after each model
//   call ("Tokens: … sent, … received. Cost: $X message, $Y session.") as it goes, and stops the
//   run when it passes agent.max_turns or the allowance (after the call that passed it).
// - aider exits 0 even when every model call failed (issue Aider-AI/aider#5552): a run without a
//   single usage line is a crash.
// - aider keeps its repo map cache `.aider.tags.cache.v{3,4}` in the git root
//   (aider/repomap.py); with --no-gitignore (aider would otherwise edit the project's
//   .gitignore), `.aider*` is added to the repository's own exclude file instead, so the cache is
//   never committed.

import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../core/config.js';
import { failureLine } from '../core/text.js';
import { readRegular } from '../io/agent-files.js';
import { Git } from '../io/git.js';
import type { AgentAdapter, AgentFactory, AgentOutcome, AgentSession } from './agent.js';
import { type AiderOutput, aiderUsage, parseAiderOutput } from './aider-output.js';
import { AGENT_CLIS } from './clis.js';
import { defineAgent, GrowingFile, launch, openContext, readFrom, sizeOf, spendOf, stopExit } from './session.js';

/** What forkflush keeps in the context folder. */
export const HISTORY_FILE = 'aider.chat.history.md';
const INPUT_HISTORY_FILE = 'aider.input.history';
const SESSION_FILE = 'session.json';
const EXCLUDE = '.aider*';
/** aider talks to any provider LiteLLM knows: the usual providers' keys and endpoints. */
const PASS_ENV = [
  'AIDER_*',
  'OPENAI_*',
  'ANTHROPIC_*',
  'GEMINI_*',
  'DEEPSEEK_*',
  'OPENROUTER_*',
  'GROQ_*',
  'MISTRAL_*',
  'COHERE_*',
  'XAI_*',
  'AZURE_*',
  'OLLAMA_*',
];

export const aiderAgent: AgentFactory = (agent) => aiderAdapter(agent);

export function aiderAdapter(agent: Config['agent']): AgentAdapter {
  return defineAgent({ kind: 'aider', passEnv: PASS_ENV, maxTurns: agent.max_turns, run: (s) => runAider(agent, s) });
}

async function runAider(agent: Config['agent'], s: AgentSession): Promise<AgentOutcome> {
  const notes: string[] = [];
  await mkdir(s.contextDir, { recursive: true });
  const ctx = await openContext(s.contextDir, 'aider', (entries) => savedHistory(s.contextDir, entries));
  if (ctx.note) notes.push(ctx.note);
  const excluded = await excludeAiderFiles(s.workdir);
  if (excluded) notes.push(excluded);

  const history = join(s.contextDir, HISTORY_FILE);
  const args = [
    '--message-file',
    s.promptFile,
    '--yes-always',
    '--chat-history-file',
    history,
    '--input-history-file',
    join(s.contextDir, INPUT_HISTORY_FILE),
    ...(ctx.carried ? ['--restore-chat-history'] : []),
    '--no-gitignore',
    '--no-auto-commits',
    '--no-analytics',
    '--no-check-update',
    '--no-show-release-notes',
    '--no-show-model-warnings',
    '--no-detect-urls',
    '--no-pretty',
    '--no-fancy-input',
    ...(agent.model ? ['--model', agent.model] : []),
    ...agent.args,
  ];

  // aider has no bound but wall time: its usage lines, read from the log as it grows.
  const log = new GrowingFile(s.logFile, await sizeOf(s.logFile));
  let text = '';
  const {
    run: r,
    overrun,
    notes: watchNotes,
  } = await launch(s, {
    executable: agent.command ?? AGENT_CLIS.aider.executable,
    args,
    env: {},
    maxTurns: agent.max_turns,
    meter: async () => {
      const lines = await log.lines();
      if (lines.length > 0) text += `${lines.join('\n')}\n`;
      const output = parseAiderOutput(text);
      return { ...aiderUsage(output, agent.model), turns: output.calls.length };
    },
  });
  notes.push(...watchNotes);

  const last = await log.lines();
  if (last.length > 0) text += `${last.join('\n')}\n`;
  // What is left of a line the log did not end yet.
  text += (await readFrom(s.logFile, log.offset)).toString('utf8');
  const output: AiderOutput = parseAiderOutput(text);
  const usage = aiderUsage(output, agent.model);
  const lastError = output.errors.at(-1);
  const exit =
    stopExit(r, s.deadlineIsBudget) ??
    (r.spawnError || r.exitCode !== 0 || output.calls.length === 0 ? 'crash' : 'finished');
  if (r.stopped === 'budget' && overrun) notes.push(`stopped because ${overrun}`);
  if (r.stopped === null) {
    if (r.spawnError || r.exitCode !== 0) {
      const why = r.spawnError ?? lastError?.message ?? failureLine(r.stderr);
      notes.push(`aider exited with ${r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`}: ${why.slice(0, 300)}`);
    } else if (output.calls.length === 0) {
      notes.push(
        `aider made no successful model call (it exits 0 all the same): ${(lastError?.message ?? 'it printed no usage line').slice(0, 300)}`,
      );
    } else if (lastError && lastError.afterCalls === output.calls.length) {
      notes.push(`aider's last model call failed: ${lastError.message.slice(0, 300)}`);
    }
  }
  if (usage.pricedFrom && !output.model && !agent.model)
    notes.push('aider named no model; priced at the dearest known');

  if ((await sizeOf(history)) > 0) {
    const episodes = ctx.carried?.episodes ?? [];
    await writeFile(
      join(s.contextDir, SESSION_FILE),
      `${JSON.stringify({ agent: 'aider', historyFile: HISTORY_FILE, episodes: [...episodes, s.episodeId] }, null, 2)}\n`,
    );
  }
  return {
    exit,
    reportedSpend: spendOf(s, usage),
    usage,
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
    seconds: r.ms / 1000,
  };
}

/** The chat history an earlier episode left (and the episodes it holds), or why it cannot go on. */
async function savedHistory(
  contextDir: string,
  entries: string[],
): Promise<{ episodes: string[] } | { unusable: string }> {
  if (!entries.includes(HISTORY_FILE)) return { unusable: `${HISTORY_FILE} is missing` };
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(await readFrom(join(contextDir, HISTORY_FILE), 0));
  } catch {
    return { unusable: `${HISTORY_FILE} is not UTF-8 text` };
  }
  let saved: { episodes?: unknown } = {};
  try {
    saved = JSON.parse((await readRegular(join(contextDir, SESSION_FILE))) ?? '{}') as { episodes?: unknown };
  } catch {
    // No record of the episodes: the history is what counts.
  }
  const episodes = Array.isArray(saved.episodes)
    ? saved.episodes.filter((e): e is string => typeof e === 'string')
    : [];
  return { episodes };
}

/** Adds `.aider*` to the repository's exclude file (not committed); a note if that failed. */
async function excludeAiderFiles(workdir: string): Promise<string | undefined> {
  const git = new Git(workdir);
  const r = await git.exec(['rev-parse', '--git-path', 'info/exclude'], { check: false });
  if (r.exitCode !== 0) return undefined; // Not a git repository: nothing forkflush commits.
  const file = resolve(workdir, r.stdout.trim());
  try {
    const text = await readFile(file, 'utf8').catch(() => '');
    if (text.split('\n').some((l) => l.trim() === EXCLUDE)) return undefined;
    await mkdir(dirname(file), { recursive: true });
    const sep = text === '' || text.endsWith('\n') ? '' : '\n';
    await writeFile(
      file,
      `${text}${sep}# forkflush, aider agent: aider's files in the git root (repo map cache)\n${EXCLUDE}\n`,
    );
    return undefined;
  } catch (e) {
    return `could not add ${EXCLUDE} to ${file} (${(e as Error).message}): aider's cache may be committed`;
  }
}
