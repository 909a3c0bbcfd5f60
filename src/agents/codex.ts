// The `codex` agent: `codex exec --json` (openai/codex docs/exec.md, codex-rs/exec/src/exec_events.rs,
// codex-rs/protocol/src/protocol.rs; recorded outputs of 0.171.0 in test/fixtures/agents/codex/).
// - CODEX_HOME (`<context>/home`) holds config.toml and sessions/YYYY/MM/DD/rollout-<time>-<thread
//   id>.jsonl; `codex exec resume <id>` continues a thread. Its SQLite indexes name rollouts by
//   absolute path (a copied context's: the original's), so the home is cut back to config.toml and
//   sessions/ before a resume and after every session.
// - stdout and the rollout are JSON lines (execEvents, addRolloutLine); the rollout's token_usage_record
//   is written as soon as a response ends. No turn or money limit of its own.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { isRecord, jsonLines, lastText, num, str } from '../core/json.js';
import { addUse, spentSince, type Tally } from '../core/usage.js';
import { GrowingFile, readFrom } from '../io/agent-reads.js';
import type { LoginFile } from '../io/logins.js';
import { BEARER, OPENAI } from './model-apis.js';
import { defineSpec, UUID } from './spec.js';
import { contentText, describeInput, eachEvent, type Lines } from './transcript.js';

/** Token counters as Codex keeps them: cumulative over the whole thread. `input` counts the cached part. */
type Tokens = { input: number; cached: number; output: number };

export const rollout = () => ({
  threadId: null as string | null,
  model: null as string | null,
  /** The running total, as last recorded. */
  totals: null as Tokens | null,
  /** The last token_count total: where Codex's counters start again when it resumes the thread. */
  resumeTotals: null as Tokens | null,
  /** Model responses: each one moves the running total on. */
  modelCalls: 0,
  /** The last task started has completed (or was aborted). */
  idle: true,
  /** The model's last output was a tool call: Codex will run it and ask the model again. */
  toolCallPending: false,
});
export type Rollout = ReturnType<typeof rollout>;
const TOOL_CALLS = new Set(['function_call', 'custom_tool_call', 'local_shell_call']);
// With a base URL Codex runs a provider of forkflush's own that reads OPENAI_API_KEY (configToml).
const CODEX_API_KEY = { name: 'CODEX_API_KEY', placeholderIn: 'OPENAI_API_KEY', headers: BEARER };

export const codex = defineSpec<{ threadId: string; rollout: string }>({
  kind: 'codex',
  name: 'Codex',
  cli: {
    executable: 'codex',
    package: '@openai/codex',
    version: '0.171.0',
    installer: 'npm',
    secret: { name: 'OPENAI_API_KEY', note: 'or CODEX_AUTH_JSON, the content of ~/.codex/auth.json' },
  },
  passEnv: ['OPENAI_*', 'CODEX_*', 'AZURE_OPENAI_*'],
  egress: {
    // auth.openai.com: its ChatGPT login's token endpoint (0.171.0).
    hosts: ['api.openai.com', 'chatgpt.com', 'auth.openai.com'],
    routes: [{ ...OPENAI, keys: [...OPENAI.keys, CODEX_API_KEY] }],
    notProxied: 'the ChatGPT login (auth.json), whose tokens Codex refreshes itself; Azure OpenAI keys',
  },
  login: {
    keys: ['OPENAI_API_KEY', 'CODEX_API_KEY'],
    other: ['OPENAI_BASE_URL', 'AZURE_OPENAI_API_KEY'],
    // A provider of its own (`--oss`, a profile, `-c model_provider=…`): its login is its own.
    args: /^(?:--oss|-p)$|^--profile|model_provider/,
    files: codexLogin,
    how:
      'set OPENAI_API_KEY (or CODEX_API_KEY), or log in with `codex login` (a ChatGPT plan: forkflush copies ' +
      '~/.codex/auth.json into each episode), or put that file in CODEX_AUTH_JSON',
  },

  session: { key: 'threadId', id: UUID },
  async resume(e, _record, threadId) {
    const file = (await rolloutFiles(e.home)).find((f) => rolloutThreadId(f) === threadId);
    if (!file) return { unusable: `the session file of thread ${threadId} is missing` };
    const why = rolloutProblem((await readFrom(file, 0, 4 * 1024 * 1024)).toString('utf8').split('\n')[0], threadId);
    return why ? { unusable: why } : { threadId, rollout: file };
  },

  async start(e, saved) {
    if (saved) await pruneHome(e.home);
    await mkdir(e.home, { recursive: true });
    await writeFile(join(e.home, 'config.toml'), configToml(e.env));
    const file = new GrowingFile(saved?.rollout ?? (async () => (await rolloutFiles(e.home)).at(-1) ?? null));
    const now = rollout();
    // To the end as it is now: a carried rollout, or what an episode wrote since the last poll, can pass one read.
    const poll = async () => {
      for await (const line of file.remaining()) addRolloutLine(now, line);
      return now;
    };
    const before = structuredClone(await poll());
    const model = () => e.agent.model ?? now.model ?? 'unknown';
    // Its own OpenAI provider sends no key from OPENAI_API_KEY (0.171.0); `codex exec` takes CODEX_API_KEY.
    const apiKey = !e.env.OPENAI_BASE_URL && !e.env.CODEX_API_KEY ? e.env.OPENAI_API_KEY : undefined;
    return {
      // Options before `resume`: a resumed session takes them again (docs/exec.md).
      args: [
        ...['exec', '--json', '--skip-git-repo-check', '-C', e.workdir],
        // Its own sandbox (bubblewrap) cannot start inside forkflush's; without that, it confines writes and
        // lets "$FORKFLUSH_GRADE" reach forkflush's socket (network_access).
        ...(e.confined
          ? ['--sandbox', 'danger-full-access']
          : ['--sandbox', 'workspace-write', '-c', 'sandbox_workspace_write.network_access=true']),
        ...['-c', 'approval_policy="never"'],
        ...(e.agent.model ? ['-m', e.agent.model] : []),
        ...e.agent.args,
        ...(saved ? ['resume', saved.threadId] : []),
        '-',
      ],
      env: { CODEX_HOME: e.home, ...(apiKey ? { CODEX_API_KEY: apiKey } : {}) },
      input: e.prompt,
      watch: e.unit === 'tokens' || e.unit === 'usd',
      async spent(run) {
        await poll().catch(() => now);
        // turn.completed, or the rollout's (a session stopped mid-turn); a rollout with neither yet: nothing spent.
        const totals = (run && execEvents(run.stdout).usage) || now.totals;
        if (!totals && !file.path) return null;
        const notes: string[] = [];
        if (run?.stopped)
          notes.push('usage as Codex recorded it up to the stop (an answer cut off by it is not counted)');
        if (run && e.unit === 'usd')
          notes.push(
            'Codex reports tokens, not dollars: priced with forkflush prices and checked after each model response',
          );
        const turns = file.path ? now.modelCalls - before.modelCalls : null;
        return spentSince(tally(model(), before.resumeTotals), tally(model(), totals), { turns, notes });
      },
      noUsage: () => 'Codex recorded no session: usage unknown',
      // At the turn limit and the model has asked for a tool: the next thing Codex does is ask it again.
      bounds: async () => {
        await poll();
        const max = e.agent.max_turns;
        const atLimit = max !== undefined && now.modelCalls - before.modelCalls >= max;
        return atLimit && now.toolCallPending && !now.idle ? `used its ${max} model turns (agent.max_turns)` : null;
      },
      ending: (run) => ({ why: execEvents(run.stdout).error?.split('\n')[0] ?? null }),
      async record(run) {
        const thread = run && (now.threadId ?? execEvents(run.stdout).threadId);
        if (!thread || !file.path) return null;
        return { threadId: thread, totals: now.totals, modelCalls: now.modelCalls, model: model() };
      },
      // No conversation recorded: the context stays empty, so the next episode starts clean.
      async after() {
        if (now.threadId && file.path) await pruneHome(e.home);
        else if (!saved) await rm(e.home, { recursive: true, force: true });
      },
    };
  },

  transcript(text, out, other) {
    const started = new Set<string>();
    eachEvent(text, other, (e) => codexEvent(out, e, started));
  },
  finalMessage: (stdout) =>
    lastText(
      stdout,
      (e) => e.type === 'item.completed' && isRecord(e.item) && e.item.type === 'agent_message' && e.item.text,
    ),
});

const tally = (model: string, t: Tokens | null): Tally => (t ? addUse({}, model, t) : {});

/** Where `codex login` leaves a ChatGPT login ($CODEX_HOME, else ~/.codex), and its secret form. */
function codexLogin(episodeHome: string): LoginFile[] {
  const home = process.env.CODEX_HOME || join(homedir(), '.codex');
  return [{ from: join(home, 'auth.json'), fromEnv: 'CODEX_AUTH_JSON', to: join(episodeHome, 'auth.json') }];
}

/** config.toml: with OPENAI_BASE_URL, a provider of forkflush's there (0.171.0 ignores the variable itself). */
function configToml(env: NodeJS.ProcessEnv): string {
  const lines = ['# Written by forkflush for each episode (CODEX_HOME is the episode context folder).'];
  const base = env.OPENAI_BASE_URL?.trim();
  if (base) lines.push('model_provider = "forkflush"');
  // No metrics (to ab.chatgpt.com) and no plugins (fetched from github.com and chatgpt.com): hosts
  // its sandbox refuses, in every episode's note (0.171.0).
  lines.push('', '[analytics]', 'enabled = false', '', '[features]', 'plugins = false');
  if (base)
    lines.push(
      '',
      '[model_providers.forkflush]',
      'name = "OpenAI Responses API at OPENAI_BASE_URL"',
      `base_url = ${JSON.stringify(base)}`,
      'wire_api = "responses"',
      env.OPENAI_API_KEY ? 'env_key = "OPENAI_API_KEY"' : 'requires_openai_auth = true',
    );
  return `${lines.join('\n')}\n`;
}

/** Removes Codex's derived state (SQLite indexes, caches, locks), keeping config.toml and sessions/. */
async function pruneHome(home: string): Promise<void> {
  const derived = (await readdir(home).catch(() => [])).filter((x) => x !== 'sessions' && x !== 'config.toml');
  await Promise.all(derived.map((x) => rm(join(home, x), { recursive: true, force: true })));
}

/** Every rollout-*.jsonl under the home's sessions folder, oldest first. */
async function rolloutFiles(home: string): Promise<string[]> {
  const entries = await readdir(join(home, 'sessions'), { recursive: true }).catch(() => [] as string[]);
  const rollouts = entries.filter((x) => /(^|\/)rollout-[^/]*\.jsonl$/.test(x));
  return rollouts.map((x) => join(home, 'sessions', x)).sort();
}

/** The thread id in a rollout file's name: rollout-<time>-<uuid>.jsonl. */
export function rolloutThreadId(path: string): string | null {
  const m = /(?:^|\/)rollout-.+-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$/i.exec(path);
  return m ? (m[1] as string) : null;
}

/** Whether a rollout's first line is that of `threadId`: why not, or null when it is. */
export function rolloutProblem(firstLine: string | undefined, threadId: string): string | null {
  if (!firstLine?.trim()) return 'its session file is empty';
  const [item] = jsonLines(firstLine);
  if (!item) return 'its session file does not start with a JSON line';
  if (item.type !== 'session_meta') return 'its session file does not start with the session metadata';
  const id = isRecord(item.payload) ? item.payload.id : undefined;
  return id === threadId ? null : `its session file belongs to thread ${String(id)}, not ${threadId}`;
}

/** Codex's usage object (snake_case) as Tokens. */
function readTokens(v: unknown): Tokens | null {
  if (!isRecord(v)) return null;
  const [input, output] = [num(v.input_tokens), num(v.output_tokens)];
  return input === null || output === null ? null : { input, cached: num(v.cached_input_tokens) ?? 0, output };
}

/** Folds one line of a rollout into the summary (updated in place). */
export function addRolloutLine(s: Rollout, line: string): Rollout {
  const [item] = jsonLines(line);
  const p = isRecord(item?.payload) ? item.payload : null;
  if (!item || !p) return s;
  if (item.type === 'session_meta' && typeof p.id === 'string') s.threadId ??= p.id;
  else if (item.type === 'turn_context' && typeof p.model === 'string') s.model = p.model;
  else if (item.type === 'response_item' && TOOL_CALLS.has(p.type as string)) s.toolCallPending = true;
  else if (item.type === 'response_item' && p.type === 'message' && p.role === 'assistant') s.toolCallPending = false;
  else if (item.type === 'event_msg' && p.type === 'task_started') s.idle = false;
  else if (item.type === 'event_msg' && (p.type === 'task_complete' || p.type === 'turn_aborted')) s.idle = true;
  else if (item.type === 'event_msg' && p.type === 'token_count') {
    const t = readTokens(isRecord(p.info) ? p.info.total_token_usage : null);
    addTotals(s, t);
    if (t) s.resumeTotals = t;
  } else if (item.type === 'token_usage_record') addTotals(s, readTokens(p.thread_token_usage));
  return s;
}

/** A running total that went up is one more model response; the same one again is not, nor one that went down. */
function addTotals(s: Rollout, t: Tokens | null): void {
  const p = s.totals;
  if (!t || (p && t.input === p.input && t.output === p.output && t.cached === p.cached)) return;
  if (!p || (t.input >= p.input && t.output >= p.output && t.cached >= p.cached)) s.modelCalls += 1;
  s.totals = t;
}

/** The facts of `codex exec --json` stdout: the thread, the last running total, the last failure. */
export function execEvents(stdout: string) {
  const out = { threadId: null as string | null, usage: null as Tokens | null, error: null as string | null };
  for (const e of jsonLines(stdout)) {
    if (e.type === 'thread.started') out.threadId = str(e.thread_id);
    else if (e.type === 'turn.completed') out.usage = readTokens(e.usage) ?? out.usage;
    else if (e.type === 'turn.failed' && isRecord(e.error) && typeof e.error.message === 'string')
      out.error = e.error.message;
    // Codex also reports its retries here: only a failure is worth keeping.
    else if (e.type === 'error' && typeof e.message === 'string' && !/^Reconnecting\b/.test(e.message))
      out.error = e.message;
  }
  return out;
}

function codexEvent(out: Lines, e: Record<string, unknown>, started: Set<string>): void {
  if (e.type === 'thread.started') out.add('start', `Codex thread ${str(e.thread_id) ?? '?'}`);
  else if (e.type === 'turn.completed') {
    const t = readTokens(e.usage);
    out.add('turn done', t ? `${t.input} in, ${t.output} out (thread totals)` : 'no usage');
  } else if (e.type === 'turn.failed')
    out.add('turn failed', contentText(isRecord(e.error) ? e.error.message : e.error));
  else if (e.type === 'error') out.add('error', contentText(e.message));
  if (!/^item\.(started|completed|updated)$/.test(String(e.type)) || !isRecord(e.item)) return;
  const item = e.item;
  const id = str(item.id) ?? '';
  const done = e.type === 'item.completed';
  const first = !started.has(id);
  started.add(id);
  if (item.type === 'agent_message' && done) out.add('assistant', contentText(item.text));
  else if (item.type === 'reasoning' && done) out.add('thinking', contentText(item.text));
  else if (item.type === 'command_execution') {
    if (first) out.add('tool shell', describeInput(item.command));
    const code = num(item.exit_code);
    if (done)
      out.add(code === null ? 'result' : `result (exit ${code})`, contentText(item.aggregated_output) || '(no output)');
  } else if (item.type === 'file_change' && done) {
    const changes = Array.isArray(item.changes) ? item.changes.filter(isRecord) : [];
    const files = changes.map((c) => `${str(c.path) ?? '?'}${str(c.kind) ? ` (${c.kind})` : ''}`).join(', ');
    out.add('tool edit', files || 'files');
    if (item.status === 'failed') out.add('result (error)', 'the change was not applied');
  } else if (item.type === 'mcp_tool_call') {
    if (first) out.add(`tool ${str(item.server) ?? 'mcp'}.${str(item.tool) ?? '?'}`, describeInput(item.arguments));
    const error = isRecord(item.error) ? item.error.message : null;
    if (done && error) out.add('result (error)', contentText(error));
    else if (done)
      out.add('result', contentText(isRecord(item.result) ? item.result.content : item.result) || '(empty)');
  } else if (item.type === 'web_search' && done) out.add('tool web_search', contentText(item.query));
  else if (item.type === 'todo_list' && done && Array.isArray(item.items)) {
    const items = item.items.filter(isRecord);
    out.add('plan', `${items.filter((i) => i.completed === true).length} of ${items.length} done`);
  } else if (item.type === 'error' && done) out.add('warning', contentText(item.message));
}
