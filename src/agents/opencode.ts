// The `opencode` agent: `opencode run` (its --help of 1.18.33; recorded outputs in test/fixtures/agents/opencode/).
// - `run --format json` reads the prompt from stdin; `--auto` approves what a permission would ask;
//   `--title` names the session (no model call for one); `-s <id>` continues one; `-m provider/model`.
// - Sessions (SQLite: opencode.db, -wal, -shm) and its login (`opencode auth login`: auth.json) live in
//   $XDG_DATA_HOME/opencode. A session runs its tools in the folder it was started in (resume moves it).
//   OPENCODE_DISABLE_PROJECT_CONFIG ignores a workspace's opencode.json (the agent can edit it).
// - stdout: JSON events with `sessionID`, a step_finish per model call (tokens.input without the
//   cached part, output without reasoning), no summary. Its `steps` limit is soft; no token or money bound.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { figure, isRecord, jsonLines, str } from '../core/json.js';
import { failureLine } from '../core/text.js';
import { addUse } from '../core/usage.js';
import { followLog } from '../io/agent-reads.js';
import type { LoginFile } from '../io/logins.js';
import { PROVIDER_ENV, PROVIDER_HOSTS } from './model-apis.js';
import { type ConfigRoutes, defineSpec, type Episode, type PlannedRoute } from './spec.js';
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
    // Its catalogue (OPENCODE_MODELS_URL's default in 1.18.33), and npm: it installs a provider's SDK
    // package when the provider is first used.
    hosts: [...PROVIDER_HOSTS, 'models.opencode.ai', 'registry.npmjs.org'],
    // Its providers go through the proxy by its inline config instead (configRoutes).
    routes: [],
    configRoutes: inlineProviders,
    notProxied:
      'keys its built-in providers read from the environment (ANTHROPIC_API_KEY, ...) and its login (auth.json), whose endpoints come from its catalogue; a provider in OPENCODE_CONFIG_CONTENT with options.baseURL is proxied, its options.apiKey too',
  },

  session: { id: /^ses_[A-Za-z0-9]+$/ },
  async resume(e, _record, id) {
    // opencode asks its database (in the sandbox: the agent wrote it) to move the session to this workspace.
    const sql = `update session set directory = '${e.workdir.replaceAll("'", "''")}' where id = '${id}' returning id`;
    const env = { ...e.env, ...opencodeEnv(e) };
    const options = { cwd: e.workdir, env, timeoutMs: 60_000, maxOutput: 64_000, signal: e.signal };
    const r = await e.spawn(e.executable, ['db', sql, '--format', 'json'], options);
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
        const cost = run.costUsd > 0 ? { costUsd: run.costUsd } : {};
        return { tally: run.steps > 0 ? addUse({}, model, { ...run.tokens, ...cost }) : {}, turns: run.steps };
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
    if (parts.length === 0) return null;
    const last = parts.at(-1)?.messageID;
    return parts.flatMap((p) => (p.messageID === last ? [p.text] : [])).join('\n');
  },
});

/** opencode's variables: its data in the context folder, its config forkflush's over the user's. */
function opencodeEnv(e: Episode) {
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

/** The user's inline config with no auto-update, sharing or snapshots (each a shadow git repository in the context). */
export function configContent(userConfig: string | undefined, maxTurns: number | undefined): Record<string, unknown> {
  const user = parseConfig(userConfig);
  const agents = isRecord(user.agent) ? user.agent : {};
  const build = isRecord(agents.build) ? agents.build : {};
  const agent = { ...agents, build: { ...build, steps: maxTurns } };
  return { ...user, snapshot: false, autoupdate: false, share: 'disabled', ...(maxTurns ? { agent } : {}) };
}

/** Where `opencode auth login` keeps its credentials ($XDG_DATA_HOME/opencode, else ~/.local/share/opencode). */
function opencodeLogin(contextDir: string, env = process.env): LoginFile[] {
  const data = env.XDG_DATA_HOME || join(homedir(), '.local', 'share');
  return [{ from: join(data, 'opencode', 'auth.json'), to: join(contextDir, DATA, 'opencode', 'auth.json') }];
}

/** OPENCODE_CONFIG_CONTENT as an object; none, or not JSON (opencode would refuse it too): {}. */
function parseConfig(text: string | undefined): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text ?? '');
    return isRecord(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

export const emptyRun = () => ({
  sessionId: null as string | null,
  /** Model calls (step_finish events). */
  steps: 0,
  /** All input (the cached and cache-written parts included), output with reasoning. */
  tokens: { input: 0, cached: 0, written: 0, output: 0, calls: 0 },
  /** As opencode priced the calls (0 for a model it has no prices for). */
  costUsd: 0,
  errors: [] as string[],
  /** The provider's status in the last error, if it gave one. */
  status: undefined as number | undefined,
});

/** Adds the events of some output lines to a run (other lines, stderr's, are skipped). */
export function addEvents(run: ReturnType<typeof emptyRun>, text: string) {
  for (const e of jsonLines(text)) {
    if (typeof e.sessionID === 'string') run.sessionId ??= e.sessionID;
    if (e.type === 'step_finish' && isRecord(e.part)) {
      const t = isRecord(e.part.tokens) ? e.part.tokens : {};
      const cache = isRecord(t.cache) ? t.cache : {};
      run.steps++;
      run.tokens.calls++;
      // A total that cannot be is a count opencode clamped (it shows none below zero): the spend is unknown.
      const clamped = Number.isNaN(figure(t.total)) ? Number.NaN : 0;
      run.tokens.input += figure(t.input) + figure(cache.read) + figure(cache.write) + clamped;
      run.tokens.cached += figure(cache.read);
      run.tokens.written += figure(cache.write);
      run.tokens.output += figure(t.output) + figure(t.reasoning);
      run.costUsd += figure(e.part.cost);
    } else if (e.type === 'error' && isRecord(e.error)) {
      const data = isRecord(e.error.data) ? e.error.data : {};
      const message = str(data.message) ?? '';
      if (typeof data.statusCode === 'number') run.status = data.statusCode;
      // The message of the API's error body ({"error": {"message": …}}), if it has one.
      const [b] = typeof data.responseBody === 'string' ? jsonLines(data.responseBody) : [];
      const body = b ? (str(isRecord(b.error) ? b.error.message : null) ?? str(b.message)) : null;
      const said = body && !message.includes(body) ? `${message} (${body})` : message;
      run.errors.push(`${str(e.error.name) ?? 'error'}: ${said}`.slice(0, 400));
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

/** Inline providers with a baseURL: each gets a route, and a literal apiKey (not {env:…}, {file:…}) a placeholder. */
function inlineProviders(env: NodeJS.ProcessEnv, placeholder: () => string): ConfigRoutes | null {
  const config = parseConfig(env.OPENCODE_CONFIG_CONTENT);
  if (!isRecord(config.provider)) return null;
  const routes: PlannedRoute[] = [];
  const routeOf = new Map<Record<string, unknown>, string>();
  for (const p of Object.values(config.provider)) {
    const options = isRecord(p) && isRecord(p.options) ? p.options : null;
    const base = typeof options?.baseURL === 'string' ? options.baseURL : null;
    if (!options || !base) continue;
    const name = `opencode-${routes.length}`;
    const key = typeof options.apiKey === 'string' && !/^\{(env|file):/.test(options.apiKey) ? options.apiKey : null;
    const headers = ['authorization', 'x-api-key', 'x-goog-api-key', 'api-key'];
    const keys = key ? [{ placeholder: placeholder(), value: key, headers }] : [];
    routes.push({ name, upstream: base, keys });
    routeOf.set(options, name);
    if (keys[0]) options.apiKey = keys[0].placeholder;
  }
  if (routes.length === 0) return null;
  return {
    routes,
    env(urls) {
      for (const [options, name] of routeOf) options.baseURL = urls[name];
      return { OPENCODE_CONFIG_CONTENT: JSON.stringify(config) };
    },
  };
}
