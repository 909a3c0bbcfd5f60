// The `gemini` agent: Gemini CLI headless (its docs ship in the package, bundle/docs/; recorded outputs of
// 0.61.0 in test/fixtures/agents/gemini/). No money bound of its own.
// - `gemini -p PROMPT -o json --approval-mode yolo --skip-trust`: one object {session_id, response, stats,
//   error?} (core/src/output/json-formatter.ts); `stats.models[name]` holds `api` {totalRequests, totalErrors},
//   `tokens` {prompt, candidates, cached, thoughts, tool} and `roles.main` (the agent loop), for this process
//   only. A fatal error prints {session_id, error: {type, message, code}} on stderr and exits with its code:
//   53 `model.maxSessionTurns`, 41 auth, 42 input, 55 untrusted folder.
// - GEMINI_CLI_HOME (`<context>/home`) holds .gemini/tmp/<slug>/chats/session-<time>-<id8>.jsonl (read by
//   gemini-session.ts), <slug> mapped from the absolute cwd in projects.json and checked against
//   tmp/<slug>/.project_root (core/src/config/projectRegistry.ts). `--resume <id>` looks in the current
//   folder's chats only; `--session-id` names a new session.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, realpath, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { count, isRecord, str } from '../core/json.js';
import { addUse, type Spent, type Tally } from '../core/usage.js';
import { anySet, hasLogin, type LoginFile } from '../io/logins.js';
import { contextTurns, isResumable, sessionFiles, tokenUse, usageFromSessions } from './gemini-session.js';
import { GEMINI } from './model-apis.js';
import { defineSpec, MAX_PROMPT_ARG } from './spec.js';
import type { Lines } from './transcript.js';

const EXIT_TURN_LIMIT = 53; // headless mode past `model.maxSessionTurns`
const KEYS = ['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_GENAI_USE_VERTEXAI=true'];

export const gemini = defineSpec<{ sessionId: string; before: Set<string> }>({
  kind: 'gemini',
  name: 'Gemini CLI',
  cli: {
    executable: 'gemini',
    package: '@google/gemini-cli',
    version: '0.61.0',
    installer: 'npm',
    secret: { name: 'GEMINI_API_KEY', note: 'or GEMINI_OAUTH_CREDS, the content of ~/.gemini/oauth_creds.json' },
  },
  // Its key and endpoint (GEMINI_*), and Vertex AI's project, location and credentials (GOOGLE_*).
  passEnv: ['GEMINI_*', 'GOOGLE_*'],
  egress: {
    // Login with Google's token endpoints (0.61.0): oauth2.googleapis.com, cloudcode-pa.googleapis.com.
    hosts: [
      'generativelanguage.googleapis.com',
      'cloudcode-pa.googleapis.com',
      'oauth2.googleapis.com',
      'www.googleapis.com',
    ],
    routes: [GEMINI],
    notProxied:
      "Login with Google (oauth_creds.json), whose token the CLI refreshes itself; Vertex AI's Google Cloud credentials",
  },
  login: {
    keys: KEYS,
    files: geminiLogin,
    how:
      'set GEMINI_API_KEY, or log in with Google in `gemini` (forkflush copies ~/.gemini/oauth_creds.json into ' +
      'each episode), or put that file in GEMINI_OAUTH_CREDS, or use Vertex AI (GOOGLE_GENAI_USE_VERTEXAI=true)',
  },

  session: { id: /^[A-Za-z0-9_-]+$/ },
  async resume(e, _record, id) {
    const dir = join(e.home, '.gemini');
    const files = await sessionFiles(dir, id);
    if (files.length === 0)
      return { unusable: `session ${id} is not in the context folder (no session file under home/.gemini/tmp)` };
    // Resuming across a minute boundary leaves a stub file with the same id: keep the real one.
    const best = files.reduce((a, b) => (b.record.messages.length > a.record.messages.length ? b : a));
    if (best.record.sessionId !== id) return { unusable: `the session file of ${id} is unreadable` };
    if (!isResumable(best.record.messages)) return { unusable: `conversation ${id} held no prompt yet` };
    const chats = join(dir, 'tmp', await projectSlug(dir, await realpath(e.workdir)), 'chats');
    await mkdir(chats, { recursive: true });
    for (const f of files) if (f !== best && !isResumable(f.record.messages)) await rm(f.path, { force: true });
    if (dirname(best.path) !== chats) await rename(best.path, join(chats, basename(best.path)));
    return { sessionId: id, before: new Set(files.flatMap((f) => [...f.record.written.keys()])) };
  },

  async start(e, saved) {
    const dir = join(e.home, '.gemini');
    const id = saved?.sessionId ?? randomUUID();
    await mkdir(dir, { recursive: true });
    // Login with Google (the runner copies its OAuth files in) when no key and no Vertex AI is set.
    const login = !anySet(KEYS, e.env) && hasLogin(geminiLogin(e.home), process.env);
    const vertex = e.env.GOOGLE_GENAI_USE_VERTEXAI === 'true';
    // The settings forkflush owns in the CLI's home: quiet offline, the auth it runs with, the turn limit.
    const settings = {
      // With GOOGLE_GEMINI_BASE_URL set the CLI would guess the "gateway" auth type, which headless rejects.
      security: { auth: { selectedType: login ? 'oauth-personal' : vertex ? 'vertex-ai' : 'gemini-api-key' } },
      model: { maxSessionTurns: e.agent.max_turns ?? -1 },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false, sessionRetention: { enabled: false } },
      telemetry: { enabled: false, logPrompts: false },
      privacy: { usageStatisticsEnabled: false },
      ide: { enabled: false },
    };
    await writeFile(join(dir, 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`);
    // A lock left by a killed run would make the next one wait for it to go stale.
    await rm(join(dir, 'projects.json.lock'), { recursive: true, force: true });
    const viaStdin = Buffer.byteLength(e.prompt) > MAX_PROMPT_ARG;
    return {
      args: [
        ...(e.agent.model ? ['--model', e.agent.model] : []),
        ...(saved ? ['--resume', id] : ['--session-id', id]),
        ...['--skip-trust', '--approval-mode', 'yolo', '--output-format', 'json'],
        ...e.agent.args,
        // Headless mode puts stdin before the -p text: a long prompt goes there, with a blank -p.
        ...['--prompt', viaStdin ? ' ' : e.prompt],
      ],
      env: { GEMINI_CLI_HOME: e.home, GEMINI_TELEMETRY_ENABLED: 'false' },
      input: viaStdin ? e.prompt : '',
      pollMs: 1000,
      watch: e.unit === 'tokens' || e.unit === 'usd',
      async spent(run): Promise<Spent> {
        const stats = run ? usageFromStats((parseResult(run.stdout) ?? parseResult(run.stderr))?.stats) : null;
        if (stats) return stats;
        // No result (killed, or a fatal error): what the session file recorded. The CLI creates it
        // before its first model call, so without one nothing was spent.
        const found = (await sessionFiles(dir, id)).map((f) => f.record).filter((r) => r.sessionId === id);
        const note = found.length
          ? "usage read from the session file: the agent loop's model calls only, without the CLI's helper calls"
          : 'gemini recorded no conversation: it stopped before its first model call';
        return { ...usageFromSessions(found, saved?.before), ...(run ? { notes: [note] } : { turns: null }) };
      },
      ending(run) {
        if (run.stopped === null && run.exitCode === EXIT_TURN_LIMIT)
          return { exit: 'budget', note: `stopped at agent.max_turns (${e.agent.max_turns})` };
        return { why: (parseResult(run.stdout) ?? parseResult(run.stderr))?.error?.message ?? null };
      },
      record: async () => ({ sessionId: id, updated: new Date().toISOString() }),
    };
  },

  transcript: geminiLog,
  finalMessage: (stdout) => parseResult(stdout)?.response ?? null,
  contextTranscript: contextTurns,
});

/** Where Login with Google leaves its OAuth files ($GEMINI_CLI_HOME, else ~, then .gemini/), and the credentials' secret form. */
function geminiLogin(episodeHome: string): LoginFile[] {
  const [from, to] = [join(process.env.GEMINI_CLI_HOME || homedir(), '.gemini'), join(episodeHome, '.gemini')];
  return [
    { from: join(from, 'oauth_creds.json'), to: join(to, 'oauth_creds.json'), fromEnv: 'GEMINI_OAUTH_CREDS' },
    { from: join(from, 'google_accounts.json'), to: join(to, 'google_accounts.json') },
  ];
}

/** The slug the CLI will use for `workdir`: the one projects.json maps it to when its markers agree, else a new one, registered. */
async function projectSlug(dir: string, workdir: string): Promise<string> {
  const registry = join(dir, 'projects.json');
  const parsed: unknown = await readFile(registry, 'utf8')
    .then(JSON.parse)
    .catch(() => null);
  const projects = (isRecord(parsed) && isRecord(parsed.projects) ? parsed.projects : {}) as Record<string, string>;
  const bases = [join(dir, 'tmp'), join(dir, 'history')];
  const owner = async (base: string, slug: string) =>
    (await readFile(join(base, slug, '.project_root'), 'utf8').catch(() => undefined))?.trim();
  const known = projects[workdir];
  if (known && /^[a-z0-9-]+$/.test(known)) {
    const owners = await Promise.all(bases.map((b) => owner(b, known)));
    if (owners.every((o) => o === undefined || o === workdir)) return known;
  }
  const taken = new Set(Object.values(projects));
  const folder = basename(workdir).toLowerCase();
  const name = folder.match(/[a-z0-9]+/g)?.join('-') || 'project';
  let slug = `ff-${name}`;
  for (let n = 1; taken.has(slug) || bases.some((b) => existsSync(join(b, slug))); n++) slug = `ff-${name}-${n}`;
  await mkdir(join(dir, 'tmp', slug), { recursive: true });
  await writeFile(join(dir, 'tmp', slug, '.project_root'), workdir);
  projects[workdir] = slug;
  const tmp = `${registry}.${randomUUID()}.tmp`;
  await writeFile(tmp, JSON.stringify({ projects }, null, 2));
  await rename(tmp, registry);
  return slug;
}

/** This process's usage from a result's `stats`: every model (the router too), turns of the agent loop only. */
export function usageFromStats(stats: unknown): Spent | null {
  if (!isRecord(stats) || !isRecord(stats.models)) return null;
  const tally: Tally = {};
  let turns = 0;
  for (const [model, m] of Object.entries(stats.models)) {
    if (!isRecord(m) || !isRecord(m.tokens)) return null;
    addUse(tally, model, tokenUse({ ...m.tokens, input: m.tokens.prompt, output: m.tokens.candidates }));
    const main = isRecord(m.roles) && isRecord(m.roles.main) ? m.roles.main : null;
    if (main) turns += count(main.totalRequests) - count(main.totalErrors);
  }
  return { tally, turns };
}

/** The CLI's result in its output (stdout, or stderr for a fatal error): the last pretty-printed object with a session_id, stats or error. */
export function parseResult(text: string) {
  return jsonBlocks(text).map(readResult).findLast(Boolean) ?? null;
}

/** What a result (an object with a session_id, stats or error) says; null for any other value. */
function readResult(v: unknown) {
  if (!isRecord(v) || !('session_id' in v || 'stats' in v || 'error' in v)) return null;
  const e = isRecord(v.error) ? v.error : null;
  return {
    ...(typeof v.session_id === 'string' ? { sessionId: v.session_id } : {}),
    ...(typeof v.response === 'string' ? { response: v.response } : {}),
    ...('stats' in v ? { stats: v.stats } : {}),
    ...(e ? { error: { type: str(e.type) ?? 'Error', message: str(e.message) ?? JSON.stringify(e) } } : {}),
    ...(Array.isArray(v.warnings) ? { warnings: v.warnings.filter((w): w is string => typeof w === 'string') } : {}),
  };
}

/** Objects printed with JSON.stringify(x, null, 2): a line "{" (or "[ERROR] {") to the first line "}" that closes one; the other lines, not blank, go to `other`. */
function jsonBlocks(text: string, other: string[] = []): unknown[] {
  const lines = text.split('\n');
  const blocks: unknown[] = [];
  scan: for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (/^(?:\[[A-Z]+\] )?\{$/.test(line))
      for (let j = lines.indexOf('}', i + 1); j > i; j = lines.indexOf('}', j + 1)) {
        // A "}" that does not parse closes a nested object: try the next one.
        try {
          blocks.push(JSON.parse(['{', ...lines.slice(i + 1, j + 1)].join('\n')));
          i = j;
          continue scan;
        } catch {}
      }
    if (line.trim() !== '') other.push(line);
  }
  return blocks;
}

/** The log: the answer, each model's calls and tokens, each tool's calls, errors and warnings; the rest is other output. */
function geminiLog(text: string, out: Lines, other: string[]): void {
  // Block by block: a fatal error is printed twice (plain and "[ERROR] ").
  for (const block of jsonBlocks(text, other)) {
    const r = readResult(block);
    if (!r) continue;
    if (r.response) out.add('assistant', r.response);
    const stats = isRecord(r.stats) ? r.stats : {};
    for (const [model, m] of Object.entries(isRecord(stats.models) ? stats.models : {})) {
      if (!isRecord(m)) continue;
      const api = isRecord(m.api) ? m.api : {};
      const t = isRecord(m.tokens) ? m.tokens : {};
      const failed = count(api.totalErrors);
      const calls = `${count(api.totalRequests)} calls${failed > 0 ? ` (${failed} failed)` : ''}`;
      out.add(`model ${model}`, `${calls}, ${count(t.prompt)} in, ${count(t.candidates) + count(t.thoughts)} out`);
    }
    const tools = isRecord(stats.tools) && isRecord(stats.tools.byName) ? stats.tools.byName : {};
    for (const [tool, t] of Object.entries(tools))
      if (isRecord(t))
        out.add(`tool ${tool}`, `${count(t.count)} calls${count(t.fail) > 0 ? `, ${count(t.fail)} failed` : ''}`);
    if (r.error) out.add('error', `${r.error.type}: ${r.error.message}`);
    for (const w of r.warnings ?? []) out.add('warning', w);
  }
}
