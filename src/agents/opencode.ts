// The `opencode` agent: opencode (npm opencode-ai, pinned 1.18.33 in scripts/install-agent-clis.mjs),
// one `opencode run` per episode.
//
// The CLI facts this builds on (`opencode run --help` of 1.18.33, and its behaviour recorded in
// test/fixtures/agents/opencode/):
// - `opencode run --format json` reads the prompt from stdin when stdin is not a terminal (an
//   argument with a space would be sent in quotes), runs it and exits; `--auto` approves what a
//   permission would ask; `--title` names the session (saving a model call for a title);
//   `-s <id>` continues a session with its whole history; `-m provider/model` picks the model.
// - Its conversations live in a SQLite database under $XDG_DATA_HOME/opencode (opencode.db, with
//   -wal and -shm: copied together they are the conversation). Config comes from
//   OPENCODE_CONFIG_CONTENT; OPENCODE_DISABLE_PROJECT_CONFIG keeps a workspace's opencode.json
//   (which the agent can edit) from reconfiguring later episodes.
// - A session keeps the folder it was started in and runs its tools there: resumed from another
//   worktree, it must be moved first (`opencode db "update session set directory=…"`), or its
//   tools write into the old worktree and the run hangs.
// - Its own `steps` limit is soft (tools still run), and it has no token or money bound:
//   forkflush watches the step_finish events as they are printed and stops the session itself.
// - Its login (`opencode auth login`) is $XDG_DATA_HOME/opencode/auth.json; OPENCODE_AUTH_CONTENT
//   holds the same inline.
import { writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../core/config.js';
import type { AgentUsage } from '../core/state.js';
import { failureLine } from '../core/text.js';
import { readRegular } from '../io/agent-files.js';
import type { AgentFactory, AgentOutcome, AgentSession } from './agent.js';
import { AGENT_CLIS } from './clis.js';
import { addEvents, emptyRun, type OpencodeRun } from './opencode-output.js';
import { priceTokens } from './pricing.js';
import {
  defineAgent,
  GrowingFile,
  installLogins,
  isRecord,
  type LoginFile,
  launch,
  openContext,
  removeLogins,
  sizeOf,
  spendOf,
  stopExit,
} from './session.js';

const SESSION_FILE = 'session.json';
/** In the context folder: opencode's data folder (its database and login). */
const DATA = 'data';

interface SavedSession {
  agent: 'opencode';
  sessionId: string;
}

export const opencodeAgent: AgentFactory = (agent) =>
  defineAgent({
    kind: 'opencode',
    maxTurns: agent.max_turns,
    // Its own switches and inline config, and the keys of the providers it knows.
    passEnv: [
      'OPENCODE_*',
      'ANTHROPIC_*',
      'OPENAI_*',
      'GEMINI_*',
      'GOOGLE_*',
      'OPENROUTER_*',
      'GROQ_*',
      'MISTRAL_*',
      'DEEPSEEK_*',
      'XAI_*',
      'AZURE_*',
      'AWS_*',
    ],
    run: (s) => runOpencode(agent, s),
  });

async function runOpencode(agent: Config['agent'], s: AgentSession): Promise<AgentOutcome> {
  const notes: string[] = [];
  const executable = agent.command ?? AGENT_CLIS.opencode.executable;
  const env = opencodeEnv(s, agent);
  const ctx = await openContext(s.contextDir, 'opencode', (entries) => savedSession(s, executable, env, entries));
  if (ctx.note) notes.push(ctx.note);
  const logins = await installLogins(opencodeLogin(s.contextDir), process.env);

  // The events, read from the log as they are printed: this episode's steps only.
  const log = new GrowingFile(s.logFile, await sizeOf(s.logFile));
  const run = emptyRun();
  const read = async () => {
    for (const line of await log.lines()) addEvents(run, line);
  };
  const {
    run: r,
    overrun,
    notes: watchNotes,
  } = await launch(s, {
    executable,
    args: [
      'run',
      '--format',
      'json',
      '--auto',
      '--title',
      s.episodeId,
      ...(ctx.carried ? ['-s', ctx.carried.sessionId] : []),
      ...(agent.model ? ['-m', agent.model] : []),
      ...agent.args,
    ],
    env,
    input: s.prompt,
    maxTurns: agent.max_turns,
    after: () => removeLogins(logins),
    meter: async () => {
      await read();
      return { ...usageOf(run, agent.model), turns: run.steps };
    },
  });
  notes.push(...watchNotes);
  for await (const line of log.remaining()) addEvents(run, line);

  const sessionId = run.sessionId ?? ctx.carried?.sessionId ?? null;
  if (sessionId) await writeRecord(s.contextDir, { agent: 'opencode', sessionId });
  const usage = usageOf(run, agent.model);
  const exit = stopExit(r, s.deadlineIsBudget) ?? (r.spawnError || r.exitCode !== 0 ? 'crash' : 'finished');
  if (r.stopped === 'budget' && overrun) notes.push(`stopped by forkflush: ${overrun}`);
  if (exit === 'crash' && r.stopped === null) {
    const why = r.spawnError ?? run.errors.at(-1) ?? (failureLine(r.stderr) || `exit code ${r.exitCode}`);
    notes.push(`opencode exited with ${r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`}: ${why}`);
  }
  return {
    exit,
    reportedSpend: spendOf(s, usage),
    usage,
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
    seconds: r.ms / 1000,
  };
}

/** The episode's usage: opencode's own cost where it priced the calls, else forkflush's table. */
function usageOf(run: OpencodeRun, model: string | undefined): AgentUsage {
  const tokens = { inputTokens: run.inputTokens, outputTokens: run.outputTokens, turns: run.steps };
  if (run.costUsd > 0 || run.steps === 0) return { ...tokens, costUsd: run.costUsd };
  const priced = priceTokens(model?.split('/').at(-1), {
    input: run.inputTokens,
    cachedInput: run.cachedInputTokens,
    cacheWrite: run.cacheWriteTokens,
    output: run.outputTokens,
  });
  return { ...tokens, costUsd: priced.costUsd, pricedFrom: priced.pricedFrom };
}

/** opencode's variables: its data in the context folder, its config forkflush's over the user's. */
function opencodeEnv(s: AgentSession, agent: Config['agent']): Record<string, string> {
  return {
    XDG_DATA_HOME: join(s.contextDir, DATA),
    OPENCODE_CONFIG_CONTENT: JSON.stringify(configContent(s.env.OPENCODE_CONFIG_CONTENT, agent.max_turns)),
    OPENCODE_DISABLE_PROJECT_CONFIG: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_SHARE: '1',
    // Nothing of Claude Code's in the user's home (skills, CLAUDE.md) joins the conversation.
    OPENCODE_DISABLE_CLAUDE_CODE: '1',
  };
}

/**
 * The config forkflush runs opencode with: the user's inline config (OPENCODE_CONFIG_CONTENT, for
 * providers and models), with no snapshots (a shadow git repository per session, in the context),
 * no auto-update, no sharing, and agent.max_turns as the build agent's step limit.
 */
export function configContent(userConfig: string | undefined, maxTurns: number | undefined): Record<string, unknown> {
  let user: Record<string, unknown> = {};
  try {
    const parsed: unknown = userConfig ? JSON.parse(userConfig) : {};
    if (isRecord(parsed)) user = parsed;
  } catch {
    // Not JSON: opencode would refuse it too; the episode runs with forkflush's settings alone.
  }
  const agents = isRecord(user.agent) ? user.agent : {};
  const build = isRecord(agents.build) ? agents.build : {};
  return {
    ...user,
    snapshot: false,
    autoupdate: false,
    share: 'disabled',
    ...(maxTurns ? { agent: { ...agents, build: { ...build, steps: maxTurns } } } : {}),
  };
}

/** The session the context holds, moved to this episode's workspace; or why it cannot be resumed. */
async function savedSession(
  s: AgentSession,
  executable: string,
  env: Record<string, string>,
  entries: string[],
): Promise<SavedSession | { unusable: string }> {
  if (!entries.includes(SESSION_FILE)) return { unusable: `${SESSION_FILE} is missing` };
  let record: unknown;
  try {
    record = JSON.parse((await readRegular(join(s.contextDir, SESSION_FILE))) ?? '');
  } catch {
    return { unusable: `${SESSION_FILE} is not JSON` };
  }
  const id = isRecord(record) ? record.sessionId : null;
  if (typeof id !== 'string' || !/^ses_[A-Za-z0-9]+$/.test(id))
    return { unusable: `${SESSION_FILE} names no session id` };
  // opencode's own database, asked by opencode (in the sandbox: the agent wrote it), and told
  // that the session now works in this workspace.
  const sql = `update session set directory = '${s.workdir.replaceAll("'", "''")}' where id = '${id}' returning id`;
  const r = await s.spawn(executable, ['db', sql, '--format', 'json'], {
    cwd: s.workdir,
    env: { ...s.env, ...env },
    timeoutMs: 60_000,
    maxOutput: 64_000,
    signal: s.signal,
  });
  if (r.exitCode !== 0) return { unusable: `its database cannot be read (${failureLine(r.stderr || r.stdout)})` };
  if (!r.stdout.includes(id)) return { unusable: `session ${id} is not in its database` };
  return { agent: 'opencode', sessionId: id };
}

async function writeRecord(contextDir: string, record: SavedSession): Promise<void> {
  await writeFile(join(contextDir, SESSION_FILE), `${JSON.stringify(record, null, 2)}\n`);
}

/** Where `opencode auth login` keeps its credentials ($XDG_DATA_HOME/opencode, else ~/.local/share/opencode). */
export function opencodeLogin(contextDir: string, env = process.env): LoginFile[] {
  const data = env.XDG_DATA_HOME || join(homedir(), '.local', 'share');
  return [{ from: join(data, 'opencode', 'auth.json'), to: join(contextDir, DATA, 'opencode', 'auth.json') }];
}
