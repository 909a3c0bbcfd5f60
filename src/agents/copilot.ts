// The `copilot` agent: GitHub Copilot CLI (`copilot --help`, `copilot help environment|providers|limits`
// of 1.0.102; recorded outputs in test/fixtures/agents/copilot/).
// - `--prompt=<text>` runs one prompt (stdin works the same). COPILOT_HOME holds session-state/<id>/events.jsonl:
//   session.start first, session.usage_record per model call, assistant.turn_start a turn (summarizeEvents).
// - `-C <dir>` works in that folder, else in the one the session was recorded in.
// - `--usage-output-file F` writes the session's cumulative usage on exit (SIGTERM too; parseUsageFile).
// - `--max-ai-credits N` (minimum 30, soft) caps GitHub-hosted models. With COPILOT_PROVIDER_BASE_URL
//   (bring your own key) there are no credits and no bound of its own.
// - It logs in with COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN; it only ever gets the first.
import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { count, figure, isRecord, jsonLines, lastText, num, str } from '../core/json.js';
import { addUse, spentSince, sumTallies, type Tally } from '../core/usage.js';
import { GrowingFile, MAX_AGENT_FILE_BYTES, readFrom, readRegular, sizeOf } from '../io/agent-reads.js';
import { BEARER } from './model-apis.js';
import { defineSpec, MAX_PROMPT_ARG, UUID } from './spec.js';
import { contentText, describeInput, eachEvent, type Lines } from './transcript.js';

/** A session's usage: tokens per model, and AI credits (nano-AIU; 0 in bring-your-own-key mode). */
export interface Totals {
  models: Tally;
  nanoAiu: number;
}

const NANO_AIU_PER_CREDIT = 1e9;
const USD_PER_CREDIT = 0.01;
/** The smallest `--max-ai-credits` the CLI takes (`copilot help limits`). */
const MIN_AI_CREDITS = 30;

export const copilot = defineSpec<Totals & { sessionId: string; episodes: string[] }>({
  kind: 'copilot',
  name: 'Copilot CLI',
  cli: {
    executable: 'copilot',
    package: '@github/copilot',
    version: '1.0.102',
    installer: 'npm',
    secret: { name: 'COPILOT_GITHUB_TOKEN', note: 'a fine-grained token with the Copilot Requests permission' },
  },
  // Its own login and bring-your-own-key providers; never GITHUB_TOKEN or GH_TOKEN (forge credentials).
  passEnv: ['COPILOT_*'],
  egress: {
    // api.github.com: where 1.0.102 trades its GitHub login for Copilot tokens.
    hosts: ['api.github.com', '*.githubcopilot.com'],
    routes: [
      {
        name: 'provider',
        baseUrl: ['COPILOT_PROVIDER_BASE_URL'],
        upstream: null,
        keys: [
          { name: 'COPILOT_PROVIDER_BEARER_TOKEN', headers: BEARER },
          // The header follows COPILOT_PROVIDER_TYPE: openai (a bearer token), anthropic, azure.
          { name: 'COPILOT_PROVIDER_API_KEY', headers: ['authorization', 'x-api-key', 'api-key'] },
        ],
      },
    ],
    notProxied:
      'its GitHub login (COPILOT_GITHUB_TOKEN), which the CLI trades with GitHub for Copilot tokens itself; COPILOT_PROVIDER_API_KEY_COMMAND and keys in COPILOT_PROVIDER_HEADERS',
  },
  login: {
    keys: ['COPILOT_GITHUB_TOKEN'],
    other: ['COPILOT_PROVIDER_BASE_URL'],
    lacks: 'login',
    how:
      'set COPILOT_GITHUB_TOKEN (a fine-grained personal access token with the "Copilot Requests" permission), ' +
      'or COPILOT_PROVIDER_BASE_URL for a model provider of your own. GH_TOKEN and GITHUB_TOKEN never reach an ' +
      "agent (they are forge credentials), nor does `copilot login`'s own",
  },

  session: { id: UUID },
  async resume(e, record, id) {
    const events = await readRegular(eventsPath(e.home, id), MAX_AGENT_FILE_BYTES);
    if (events === null) return { unusable: `session ${id} is unknown: its events.jsonl is missing` };
    const bad = eventsFileProblem(events, id);
    if (bad) return { unusable: `session ${id} is corrupt: ${bad}` };
    const episodes = Array.isArray(record.episodes) ? record.episodes.filter((x) => typeof x === 'string') : [];
    return { sessionId: id, ...readTotals(record.totals), episodes };
  },

  async start(e, saved) {
    await mkdir(e.home, { recursive: true });
    const id = saved?.sessionId ?? randomUUID();
    const eventsFile = eventsPath(e.home, id);
    const offset = saved ? await sizeOf(eventsFile) : 0;
    const usageOut = join(dirname(e.usageFile), 'copilot-usage.json');
    await rm(usageOut, { force: true });
    const capped = !e.env.COPILOT_PROVIDER_BASE_URL && e.unit === 'usd';
    const credits = capped ? Math.max(MIN_AI_CREDITS, Math.ceil(e.allowance / USD_PER_CREDIT)) : undefined;
    // `--prompt=` (not `-p <text>`) so that a prompt starting with "-" is not taken for an option.
    const viaStdin = Buffer.byteLength(e.prompt) > MAX_PROMPT_ARG;
    const events = new GrowingFile(eventsFile, offset);
    const seen: Record<string, unknown>[] = [];
    const before: Totals = saved ?? { models: {}, nanoAiu: 0 };
    /** The session's totals after this episode, for the record; the AI credits this episode used (ending). */
    let cumulative: Totals | null = null;
    let ownNanoAiu = 0;
    return {
      args: [
        ...(viaStdin ? [] : [`--prompt=${e.prompt}`]),
        ...['--allow-all-tools', '--no-ask-user', '--no-auto-update', '--output-format', 'json'],
        ...['--usage-output-file', usageOut],
        // Its own logs go with the episode's other logs, not into the context carried onward.
        ...['--log-dir', join(dirname(e.logFile), 'copilot-logs'), '-C', e.workdir],
        saved ? `--resume=${id}` : `--session-id=${id}`,
        ...(e.agent.model ? ['--model', e.agent.model] : []),
        ...(credits !== undefined ? ['--max-ai-credits', String(credits)] : []),
        ...e.agent.args,
      ],
      env: { COPILOT_HOME: e.home },
      ...(viaStdin ? { input: e.prompt } : {}),
      async spent(run) {
        for (const line of await events.lines()) seen.push(...jsonLines(line));
        if (!run) {
          const { turns, totals } = summarizeEvents(seen);
          return { tally: totals.models, turns };
        }
        const text = await readRegular(usageOut, 4_000_000);
        const file = text === null ? 'Copilot wrote no usage file' : parseUsageFile(text);
        if (typeof file !== 'string') {
          cumulative = file;
          ownNanoAiu = Math.max(0, file.nanoAiu - before.nanoAiu);
          return spentSince(before.models, file.models, creditsCost(ownNanoAiu));
        }
        // It writes events.jsonl when the session starts, before any model call: none, no spend.
        if ((await sizeOf(eventsFile)) === 0)
          return { tally: {}, notes: ['Copilot started no session, so it made no model call'] };
        const all = summarizeEvents([...jsonLines((await readFrom(eventsFile, offset)).toString('utf8'))]);
        cumulative = { models: sumTallies(before.models, all.totals.models), nanoAiu: before.nanoAiu };
        return { tally: all.totals.models, notes: [`${file}; usage counted from the session's events`] };
      },
      noUsage: () => 'the usage of this episode could not be read',
      ending(run) {
        const hit = credits !== undefined && ownNanoAiu / NANO_AIU_PER_CREDIT >= credits;
        if (hit && run.stopped === null) return { exit: 'budget', note: `stopped by --max-ai-credits ${credits}` };
        const why = sessionErrors(run.stdout).at(-1) ?? null;
        // After its own retries it quotes the provider's last answer: "… Last error: 429 Rate limit reached".
        return { why, status: Number(/Last error: (\d{3})\b/.exec(why ?? '')?.[1]) || null };
      },
      async record(run) {
        if (!run || (await sizeOf(eventsFile)) === 0) return null;
        return { sessionId: id, totals: cumulative, episodes: [...(saved?.episodes ?? []), e.episodeId] };
      },
    };
  },

  transcript: (text, out, other) => eachEvent(text, other, (e) => copilotEvent(out, e)),
  finalMessage: (stdout) =>
    lastText(stdout, (e) => e.type === 'assistant.message' && isRecord(e.data) && e.data.content),
});

const eventsPath = (home: string, id: string) => join(home, 'session-state', id, 'events.jsonl');

/** Its token counts (inputTokens counts the cache reads and writes too). */
const tokensOf = (u: Record<string, unknown>) => ({
  input: figure(u.inputTokens),
  cached: figure(u.cacheReadTokens),
  written: figure(u.cacheWriteTokens),
  output: figure(u.outputTokens),
});

/** AI credits at $0.01 where the CLI counted them; else forkflush prices the tokens. */
const creditsCost = (nanoAiu: number) =>
  nanoAiu > 0 ? { costUsd: (nanoAiu / NANO_AIU_PER_CREDIT) * USD_PER_CREDIT } : {};

/** Totals saved by an earlier episode (session.json), anything malformed as none. */
export function readTotals(saved: unknown): Totals {
  const v = isRecord(saved) ? saved : {};
  const models: Tally = {};
  // Also as releases before 0.2 saved them (inputTokens, cacheReadTokens, …, requests).
  for (const [model, m] of Object.entries(isRecord(v.models) ? v.models : {}))
    if (isRecord(m))
      addUse(models, model, {
        input: count(m.input ?? m.inputTokens),
        cached: count(m.cached ?? m.cacheReadTokens),
        written: count(m.written ?? m.cacheWriteTokens),
        output: count(m.output ?? m.outputTokens),
        calls: count(m.calls ?? m.requests),
      });
  return { models, nanoAiu: count(v.nanoAiu) };
}

/** Reads a `--usage-output-file` JSON; a string says why it cannot. */
export function parseUsageFile(text: string): Totals | string {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return `the usage file is not JSON: ${text.trim().slice(0, 60)}`;
  }
  if (!isRecord(json) || !isRecord(json.modelMetrics)) return 'the usage file has no modelMetrics';
  const models: Tally = {};
  for (const [model, m] of Object.entries(json.modelMetrics)) {
    if (!isRecord(m)) continue;
    const u = isRecord(m.usage) ? m.usage : {};
    addUse(models, model, { ...tokensOf(u), calls: figure(isRecord(m.requests) ? m.requests.count : 0) });
  }
  return { models, nanoAiu: json.aiCreditsStatus === 'unavailable' ? 0 : count(json.totalNanoAiu) };
}

/** The messages of the session.error events in `--output-format json` stdout. */
export function sessionErrors(stdout: string): string[] {
  return [...jsonLines(stdout)].flatMap((x) =>
    x.type === 'session.error' && isRecord(x.data) ? (str(x.data.message) ?? []) : [],
  );
}

/** Model turns and token usage in a run of session events (the watcher's view of an episode). */
export function summarizeEvents(events: Record<string, unknown>[]): { turns: number; totals: Totals } {
  let turns = 0;
  const models: Tally = {};
  for (const e of events) {
    if (e.type === 'assistant.turn_start') turns++;
    const u = e.type === 'session.usage_record' && isRecord(e.data) && isRecord(e.data.usage) ? e.data.usage : null;
    if (u) addUse(models, typeof u.model === 'string' ? u.model : 'unknown', { ...tokensOf(u), calls: 1 });
  }
  return { turns, totals: { models, nanoAiu: 0 } };
}

/** Why a saved session cannot be resumed (the CLI refuses a corrupted events.jsonl too), or null. */
export function eventsFileProblem(text: string, sessionId: string): string | null {
  if (text.trim() === '') return 'its events.jsonl is empty';
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  for (const [i, line] of lines.entries()) {
    const [v] = jsonLines(line);
    // The CLI may have been killed in the middle of writing its last line.
    if (!v && i === lines.length - 1 && !text.endsWith('\n')) continue;
    if (!v) return `line ${i + 1} of its events.jsonl is not JSON`;
    if (typeof v.type !== 'string') return `line ${i + 1} of its events.jsonl is not an event`;
    const id = isRecord(v.data) ? v.data.sessionId : undefined;
    if (i === 0 && v.type !== 'session.start') return 'its events.jsonl does not begin with session.start';
    if (i === 0 && id !== sessionId) return `its events.jsonl belongs to session ${String(id)}`;
  }
  return null;
}

function copilotEvent(out: Lines, e: Record<string, unknown>): void {
  const data = isRecord(e.data) ? e.data : {};
  if (e.type === 'assistant.message') {
    out.add('assistant', contentText(data.content));
    const requests = Array.isArray(data.toolRequests) ? data.toolRequests.filter(isRecord) : [];
    for (const t of requests) out.add(`tool ${str(t.name) ?? '?'}`, describeInput(t.arguments));
  } else if (e.type === 'assistant.reasoning') out.add('thinking', contentText(data.content));
  else if (e.type === 'tool.execution_complete') {
    const result = isRecord(data.result) ? data.result : {};
    const text = contentText(result.content ?? (isRecord(data.error) ? data.error.message : data.error));
    out.add(data.success === false ? 'result (error)' : 'result', text || '(empty)');
  } else if (e.type === 'assistant.turn_retry') out.add('retry', str(data.reason) ?? 'the model call failed');
  else if (e.type === 'model.call_failure') {
    const status = num(data.statusCode);
    out.add('model call failed', status === null ? (str(data.failureKind) ?? 'error') : `HTTP ${status}`);
  } else if (e.type === 'session.error')
    out.add('error', `${str(data.errorType) ?? 'error'}: ${contentText(data.message)}`);
  else if (e.type === 'session.start')
    out.add('start', str(data.copilotVersion) ? `Copilot ${data.copilotVersion}` : 'Copilot session');
  else if (e.type === 'result') {
    const code = num(e.exitCode) ?? num(data.exitCode);
    out.add('end', code === null ? 'done' : `exit code ${code}`);
  }
}
