// The `opencode` agent: `opencode run` (`opencode run --help` of 1.18.33; recorded outputs in
// test/fixtures/agents/opencode/).
// - `run --format json` reads the prompt from stdin; `--auto` approves what a permission would ask;
//   `--title` names the session (no model call for one); `-s <id>` continues one; `-m provider/model`.
// - Sessions live in SQLite under $XDG_DATA_HOME/opencode (opencode.db, -wal, -shm), its login
//   (`opencode auth login`) in auth.json beside it. Config comes from OPENCODE_CONFIG_CONTENT;
//   OPENCODE_DISABLE_PROJECT_CONFIG ignores a workspace's opencode.json (the agent can edit it).
// - A session runs its tools in the folder it was started in: a resumed one is moved first
//   (`opencode db "update session set directory=…"`).
// - stdout: JSON events with `sessionID`: step_start, tool_use, text, reasoning, step_finish {part:
//   {reason, tokens: {input (without the cached part), output (without reasoning), reasoning, cache:
//   {read, write}}, cost}} per model call, error {error: {name, data: {message, statusCode?,
//   responseBody?}}}. No summary. Its `steps` limit is soft; no token or money bound.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { count, isRecord, jsonLines, str } from '../core/json.js';
import { failureLine } from '../core/text.js';
import { addUse, type Tally } from '../core/usage.js';
import { followLog } from '../io/agent-reads.js';
import type { LoginFile } from '../io/logins.js';
import { PROVIDER_ENV, PROVIDER_HOSTS } from './model-apis.js';
import { type ConfigRoutes, defineSpec, type PlannedRoute } from './spec.js';
import { contentText, describeInput, eachEvent, type Lines } from './transcript.js';

/** In the context folder: opencode's data folder (its database and login). */
const DATA = 'data';

export const opencode = defineSpec<{ sessionId: string }>({
  kind: 'opencode',
  name: 'opencode',
  cli: {
    executable: 'opencode',
    package: 'opencode-ai',
    version: '1.18.33',
    installer: 'npm',
    secret: { name: 'ANTHROPIC_API_KEY', note: "or the key of opencode's provider, or OPENCODE_AUTH_CONTENT" },
  },
  // Its own switches and inline config, and the keys of the providers it knows.
  passEnv: ['OPENCODE_*', ...PROVIDER_ENV, 'GOOGLE_*', 'AWS_*'],
  egress: {
    // Its catalogue, and npm: it installs a provider's SDK package when the provider is first used.
    hosts: [...PROVIDER_HOSTS, 'models.dev', 'registry.npmjs.org'],
    // Its providers go through the proxy by its inline config instead (configRoutes).
    routes: [],
    configRoutes: inlineProviders,
    notProxied:
      'keys its built-in providers read from the environment (ANTHROPIC_API_KEY, ...) and its login (auth.json), whose endpoints come from its catalogue; a provider in OPENCODE_CONFIG_CONTENT with options.baseURL is proxied, its options.apiKey too',
  },

  session: { id: /^ses_[A-Za-z0-9]+$/ },
  async resume(e, _record, id) {
    // opencode's own database, asked by opencode (in the sandbox: the agent wrote it), and told
    // that the session now works in this workspace.
    const sql = `update session set directory = '${e.workdir.replaceAll("'", "''")}' where id = '${id}' returning id`;
    const r = await e.spawn(e.executable, ['db', sql, '--format', 'json'], {
      cwd: e.workdir,
      env: { ...e.env, ...opencodeEnv(e) },
      timeoutMs: 60_000,
      maxOutput: 64_000,
      signal: e.signal,
    });
    if (r.exitCode !== 0) return { unusable: `its database cannot be read (${failureLine(r.stderr || r.stdout)})` };
    if (!r.stdout.includes(id)) return { unusable: `session ${id} is not in its database` };
    return { sessionId: id };
  },

  async start(e, saved) {
    // The events, read from the log as they are printed: this episode's steps only.
    const run = emptyRun();
    const read = await followLog(e.logFile, (line) => addEvents(run, line));
    const model = e.agent.model ?? 'unknown';
    return {
      args: [
        ...['run', '--format', 'json', '--auto', '--title', e.episodeId],
        ...(saved ? ['-s', saved.sessionId] : []),
        ...(e.agent.model ? ['-m', e.agent.model] : []),
        ...e.agent.args,
      ],
      env: opencodeEnv(e),
      input: e.prompt,
      logins: opencodeLogin(e.contextDir),
      async spent(done) {
        await read(done !== undefined);
        // Its own cost where it priced the calls, else forkflush's table.
        const tally: Tally = {};
        if (run.steps > 0)
          addUse(tally, model, { ...run.tokens, ...(run.costUsd > 0 ? { costUsd: run.costUsd } : {}) });
        return { tally, turns: run.steps };
      },
      ending: () => ({ why: run.errors.at(-1) ?? null, status: run.status ?? null }),
      record: async () => {
        const id = run.sessionId ?? saved?.sessionId;
        return id ? { sessionId: id } : null;
      },
    };
  },

  transcript: (text, out, other) => eachEvent(text, other, (e, line) => opencodeEvent(out, e, line)),
  // Its last message, as the text parts it printed of it.
  finalMessage(stdout) {
    const parts = [...jsonLines(stdout)].flatMap((e) =>
      e.type === 'text' && isRecord(e.part) && typeof e.part.text === 'string' ? [e.part] : [],
    );
    const last = parts.at(-1)?.messageID;
    return parts.length === 0
      ? null
      : parts
          .filter((p) => p.messageID === last)
          .map((p) => p.text)
          .join('\n');
  },
});

/** opencode's variables: its data in the context folder, its config forkflush's over the user's. */
function opencodeEnv(e: { contextDir: string; env: NodeJS.ProcessEnv; agent: { max_turns?: number | undefined } }) {
  return {
    XDG_DATA_HOME: join(e.contextDir, DATA),
    OPENCODE_CONFIG_CONTENT: JSON.stringify(configContent(e.env.OPENCODE_CONFIG_CONTENT, e.agent.max_turns)),
    OPENCODE_DISABLE_PROJECT_CONFIG: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_SHARE: '1',
    // Nothing of Claude Code's in the user's home (skills, CLAUDE.md) joins the conversation.
    OPENCODE_DISABLE_CLAUDE_CODE: '1',
  };
}

/**
 * The config forkflush runs opencode with: the user's inline config (OPENCODE_CONFIG_CONTENT, for
 * providers and models), no snapshots (a shadow git repository per session, in the context), no
 * auto-update, no sharing, and agent.max_turns as the build agent's step limit.
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

/** Where `opencode auth login` keeps its credentials ($XDG_DATA_HOME/opencode, else ~/.local/share/opencode). */
export function opencodeLogin(contextDir: string, env = process.env): LoginFile[] {
  const data = env.XDG_DATA_HOME || join(homedir(), '.local', 'share');
  return [{ from: join(data, 'opencode', 'auth.json'), to: join(contextDir, DATA, 'opencode', 'auth.json') }];
}

export interface OpencodeRun {
  sessionId: string | null;
  /** Model calls (step_finish events). */
  steps: number;
  /** All input (the cached and cache-written parts included), output with reasoning. */
  tokens: { input: number; cached: number; written: number; output: number; calls: number };
  /** As opencode priced the calls (0 for a model it has no prices for). */
  costUsd: number;
  errors: string[];
  /** The provider's status in the last error, if it gave one. */
  status?: number;
}

export function emptyRun(): OpencodeRun {
  return {
    sessionId: null,
    steps: 0,
    tokens: { input: 0, cached: 0, written: 0, output: 0, calls: 0 },
    costUsd: 0,
    errors: [],
  };
}

/** Adds the events of some output lines to a run (other lines, stderr's, are skipped). */
export function addEvents(run: OpencodeRun, text: string): OpencodeRun {
  for (const e of jsonLines(text)) {
    if (typeof e.sessionID === 'string') run.sessionId ??= e.sessionID;
    if (e.type === 'step_finish' && isRecord(e.part)) {
      const t = isRecord(e.part.tokens) ? e.part.tokens : {};
      const cache = isRecord(t.cache) ? t.cache : {};
      run.steps++;
      run.tokens.calls++;
      run.tokens.input += count(t.input) + count(cache.read) + count(cache.write);
      run.tokens.cached += count(cache.read);
      run.tokens.written += count(cache.write);
      run.tokens.output += count(t.output) + count(t.reasoning);
      run.costUsd += count(e.part.cost);
    } else if (e.type === 'error' && isRecord(e.error)) {
      const data = isRecord(e.error.data) ? e.error.data : {};
      const message = str(data.message) ?? '';
      if (typeof data.statusCode === 'number') run.status = data.statusCode;
      // The message of the API's error body ({"error": {"message": …}}), if it has one.
      const [b] = typeof data.responseBody === 'string' ? jsonLines(data.responseBody) : [];
      const body = b ? (str(isRecord(b.error) ? b.error.message : null) ?? str(b.message)) : null;
      run.errors.push(
        `${str(e.error.name) ?? 'error'}: ${body && !message.includes(body) ? `${message} (${body})` : message}`.slice(
          0,
          400,
        ),
      );
    }
  }
  return run;
}

function opencodeEvent(out: Lines, e: Record<string, unknown>, line: string): void {
  const part = isRecord(e.part) ? e.part : {};
  const state = isRecord(part.state) ? part.state : {};
  if (e.type === 'text') out.add('assistant', contentText(part.text));
  else if (e.type === 'reasoning') out.add('thinking', contentText(part.text));
  else if (e.type === 'tool_use') {
    out.add(`tool ${str(part.tool) ?? '?'}`, describeInput(state.input));
    if (state.status === 'error') out.add('result (error)', contentText(state.error) || '(no message)');
    else if (state.status === 'completed') out.add('result', contentText(state.output) || '(empty)');
  } else if (e.type === 'step_finish' && !['stop', 'tool-calls', null].includes(str(part.reason)))
    // The normal ends of a step (an answer, tool calls) say nothing new; others do (a filter, a limit).
    out.add('stop', str(part.reason) as string);
  else if (e.type === 'error') for (const message of addEvents(emptyRun(), line).errors) out.add('error', message);
}

/**
 * The providers of its inline config (OPENCODE_CONFIG_CONTENT) with a base URL of their own: each
 * goes through a route, its literal key (not `{env:...}` or `{file:...}`) behind a placeholder.
 */
function inlineProviders(env: NodeJS.ProcessEnv, placeholder: () => string): ConfigRoutes | null {
  let config: unknown;
  try {
    config = JSON.parse(env.OPENCODE_CONFIG_CONTENT ?? '');
  } catch {
    return null;
  }
  const providers = isRecord(config) && isRecord(config.provider) ? config.provider : null;
  if (!providers) return null;
  const routes: PlannedRoute[] = [];
  const names = new Map<string, string>();
  for (const [id, p] of Object.entries(providers)) {
    const options = isRecord(p) && isRecord(p.options) ? p.options : null;
    const base = typeof options?.baseURL === 'string' ? options.baseURL : null;
    if (!options || !base) continue;
    const name = `opencode-${routes.length}`;
    const key = typeof options.apiKey === 'string' && !/^\{(env|file):/.test(options.apiKey) ? options.apiKey : null;
    const p0 = key ? placeholder() : null;
    routes.push({
      name,
      upstream: base,
      keys:
        key && p0
          ? [{ placeholder: p0, value: key, headers: ['authorization', 'x-api-key', 'x-goog-api-key', 'api-key'] }]
          : [],
    });
    names.set(id, name);
    if (p0) options.apiKey = p0;
  }
  if (routes.length === 0) return null;
  return {
    routes,
    env(urls) {
      for (const [id, name] of names)
        (providers[id] as { options: Record<string, unknown> }).options.baseURL = urls[name];
      return { OPENCODE_CONFIG_CONTENT: JSON.stringify(config) };
    },
  };
}
