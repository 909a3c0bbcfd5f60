// Pure readers of what Gemini CLI (@google/gemini-cli 0.61.0) leaves behind: its `-o json` result,
// the error object it prints on a fatal exit, and its JSONL session files. No I/O here: the adapter
// (gemini.ts) reads the files and hands their text over.
//
// Sources (the CLI's own docs ship in its package, bundle/docs/; the code is in its bundle, whose
// comments name the source files of google-gemini/gemini-cli):
// - `-o json` prints one object {session_id, response, stats, error?, warnings?}
//   (docs/cli/headless.md, "JSON output"; packages/core/src/output/json-formatter.ts). `stats` is
//   the process's own metrics (packages/core/src/telemetry/uiTelemetry.ts): `stats.models[name]`
//   holds `api` {totalRequests, totalErrors} and `tokens` {prompt, candidates, cached, thoughts,
//   tool, total, input = prompt - cached}, and `roles[role]` the same per role ("main" is the
//   agent loop; the model router and other helpers have their own roles). They count this process
//   only: a resumed session starts again from zero (seen: a resumed run reports only its own calls).
// - A fatal error in `-o json` mode prints `{session_id, error: {type, message, code}}` on stderr
//   (packages/cli/src/utils/errors.ts, handleError / handleMaxTurnsExceededError) and exits with
//   the code: 53 is the turn limit `model.maxSessionTurns` (docs/cli/headless.md, "Exit codes";
//   FatalTurnLimitedError), 41 an authentication error, 42 an input error, 55 an untrusted folder.
// - Sessions are JSONL files <home>/.gemini/tmp/<project slug>/chats/session-<time>-<id8>.jsonl
//   (docs/cli/session-management.md; packages/core/src/services/chatRecordingService.ts,
//   loadConversationRecord): a first line of metadata {sessionId, projectHash, startTime,
//   lastUpdated, kind}, then records, each one of: a message {id, timestamp, type: "user" |
//   "gemini" | "info" | ..., content, tokens?, model?, toolCalls?} (a later record with the same id
//   replaces the earlier one), `{$set: {...}}` metadata updates (a `$set.messages` list replaces the
//   whole message list, as a resumed session writes), and `{$rewindTo: id}` (drops that message and
//   every later one). A "gemini" message carries the usage of the model call that produced it:
//   tokens {input = promptTokenCount, output = candidatesTokenCount, cached, thoughts, tool, total}
//   and `model`.

/** Token counts of one model, as forkflush prices them. */
export interface ModelTokens {
  model: string;
  /** Prompt tokens (cached ones included) plus tool-use prompt tokens: all billed as input. */
  inputTokens: number;
  /** Of those, the prompt tokens read from the context cache (billed at the cached price). */
  cachedInputTokens: number;
  /** Candidate tokens plus thinking tokens: all billed as output. */
  outputTokens: number;
}

export interface GeminiUsage {
  perModel: ModelTokens[];
  inputTokens: number;
  outputTokens: number;
  /** Model calls of the agent loop (the CLI's turns), or null when unknown. */
  turns: number | null;
}

export interface GeminiError {
  type: string;
  message: string;
  code?: number | string;
}

export interface GeminiResult {
  sessionId?: string;
  response?: string;
  stats?: unknown;
  error?: GeminiError;
  warnings?: string[];
}

/** Exit codes of headless mode (docs/cli/headless.md, "Exit codes"; FatalError subclasses). */
export const EXIT_TURN_LIMIT = 53;
export const EXIT_AUTH = 41;
export const EXIT_INPUT = 42;
export const EXIT_UNTRUSTED = 55;

/**
 * The CLI's result object in a stream of text (stdout, or stderr for a fatal error): the last
 * pretty-printed JSON object that has a `session_id`, `stats` or `error`. Null when there is none.
 */
export function parseResult(text: string): GeminiResult | null {
  let found: GeminiResult | null = null;
  for (const value of jsonObjects(text)) {
    if (!isRecord(value)) continue;
    if (!('session_id' in value || 'stats' in value || 'error' in value)) continue;
    const r: GeminiResult = {};
    if (typeof value.session_id === 'string') r.sessionId = value.session_id;
    if (typeof value.response === 'string') r.response = value.response;
    if ('stats' in value) r.stats = value.stats;
    if (isRecord(value.error)) {
      const e = value.error;
      r.error = {
        type: typeof e.type === 'string' ? e.type : 'Error',
        message: typeof e.message === 'string' ? e.message : JSON.stringify(e),
        ...(typeof e.code === 'number' || typeof e.code === 'string' ? { code: e.code } : {}),
      };
    }
    if (Array.isArray(value.warnings)) r.warnings = value.warnings.filter((w): w is string => typeof w === 'string');
    found = r;
  }
  return found;
}

/**
 * Objects printed with JSON.stringify(x, null, 2): each starts with a line "{" (possibly after a
 * prefix such as "[ERROR] ") and ends with a line "}". Other text around them is skipped.
 */
function* jsonObjects(text: string): Generator<unknown> {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const open = line.endsWith('{') ? line.lastIndexOf('{') : -1;
    if (open < 0 || (open > 0 && !/^\[[A-Z]+\] $/.test(line.slice(0, open)))) continue;
    for (let j = i + 1; j < lines.length; j++) {
      if (lines[j] !== '}') continue;
      const candidate = [line.slice(open), ...lines.slice(i + 1, j + 1)].join('\n');
      try {
        yield JSON.parse(candidate);
        i = j;
        break;
      } catch {
        // Not this closing brace: a nested object's, or no JSON at all. Try the next one.
      }
    }
  }
}

/** This process's usage from a result's `stats` (see the header), or null when it has none. */
export function usageFromStats(stats: unknown): GeminiUsage | null {
  if (!isRecord(stats) || !isRecord(stats.models)) return null;
  const perModel: ModelTokens[] = [];
  let turns = 0;
  for (const [model, m] of Object.entries(stats.models)) {
    if (!isRecord(m) || !isRecord(m.tokens)) return null;
    const t = m.tokens;
    perModel.push({
      model,
      inputTokens: num(t.prompt) + num(t.tool),
      cachedInputTokens: num(t.cached),
      outputTokens: num(t.candidates) + num(t.thoughts),
    });
    const main = isRecord(m.roles) && isRecord(m.roles.main) ? m.roles.main : null;
    if (main) turns += num(main.totalRequests) - num(main.totalErrors);
  }
  return totals(perModel, turns);
}

export interface SessionMessage {
  id: string;
  type: string;
  timestamp?: string;
  content?: unknown;
  model?: string;
  tokens?: Record<string, unknown>;
  toolCalls?: unknown[];
}

export interface SessionRecord {
  sessionId: string | null;
  kind: string | null;
  lastUpdated: string | null;
  /** The conversation as the CLI would load it (replaces, `$set.messages` and rewinds applied). */
  messages: SessionMessage[];
  /** Every message record ever written, by id (the last version of each): what was spent. */
  written: Map<string, SessionMessage>;
  /** Lines that were not JSON (a torn last line, or a file that is not a session at all). */
  badLines: number;
}

/** Replays a session file's records (see the header). */
export function readSession(text: string): SessionRecord {
  const meta: Record<string, unknown> = {};
  let messages = new Map<string, SessionMessage>();
  const written = new Map<string, SessionMessage>();
  let badLines = 0;
  const note = (m: SessionMessage) => {
    // A resumed session rewrites its history in `$set.messages` without the usage: keep it.
    const prev = written.get(m.id);
    written.set(m.id, prev ? { ...prev, ...m, tokens: m.tokens ?? prev.tokens, model: m.model ?? prev.model } : m);
    messages.set(m.id, m);
  };
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      badLines++;
      continue;
    }
    if (!isRecord(record)) {
      badLines++;
      continue;
    }
    if (typeof record.$rewindTo === 'string') {
      const kept = new Map<string, SessionMessage>();
      let found = false;
      for (const [id, m] of messages) {
        if (id === record.$rewindTo) found = true;
        if (!found) kept.set(id, m);
      }
      messages = found ? kept : new Map();
    } else if (typeof record.id === 'string') {
      const m = asMessage(record);
      if (m) note(m);
    } else if (isRecord(record.$set)) {
      const set = record.$set;
      if (Array.isArray(set.messages)) {
        messages = new Map();
        for (const raw of set.messages) {
          const m = asMessage(raw);
          if (m) note(m);
        }
      }
      Object.assign(meta, set);
    } else if (typeof record.sessionId === 'string') {
      Object.assign(meta, record);
    } else {
      badLines++;
    }
  }
  return {
    sessionId: typeof meta.sessionId === 'string' ? meta.sessionId : null,
    kind: typeof meta.kind === 'string' ? meta.kind : null,
    lastUpdated: typeof meta.lastUpdated === 'string' ? meta.lastUpdated : null,
    messages: [...messages.values()],
    written,
    badLines,
  };
}

/**
 * Whether a conversation has something to resume: a prompt or a model answer beyond the
 * `<session_context>` the CLI puts first (the CLI refuses to resume a session without one).
 */
export function isResumable(messages: SessionMessage[]): boolean {
  return messages.some((m) => {
    if (m.type === 'gemini') return textOf(m.content).trim() !== '' || (m.toolCalls?.length ?? 0) > 0;
    if (m.type !== 'user') return false;
    const text = textOf(m.content).trim();
    return text !== '' && !text.startsWith('<session_context>') && !text.startsWith('<hook_context>');
  });
}

/** Ids of the messages written to a session (to tell this episode's calls from earlier ones). */
export function writtenIds(sessions: SessionRecord[]): Set<string> {
  const ids = new Set<string>();
  for (const s of sessions) for (const id of s.written.keys()) ids.add(id);
  return ids;
}

/**
 * The usage recorded in session files by model answers that are not in `before`: the agent loop's
 * calls made during this episode. Answers later rewound or compacted away still count (they were
 * paid for). Calls of the CLI's helpers (model router, loop checks) are not recorded there.
 */
export function usageFromSessions(sessions: SessionRecord[], before: Set<string>): GeminiUsage {
  const byModel = new Map<string, ModelTokens>();
  const seen = new Set<string>();
  let turns = 0;
  for (const s of sessions) {
    for (const [id, m] of s.written) {
      if (before.has(id) || seen.has(id) || m.type !== 'gemini' || !m.tokens) continue;
      seen.add(id);
      turns++;
      const model = m.model ?? 'unknown';
      const entry = byModel.get(model) ?? { model, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };
      entry.inputTokens += num(m.tokens.input) + num(m.tokens.tool);
      entry.cachedInputTokens += num(m.tokens.cached);
      entry.outputTokens += num(m.tokens.output) + num(m.tokens.thoughts);
      byModel.set(model, entry);
    }
  }
  return totals([...byModel.values()], turns);
}

function totals(perModel: ModelTokens[], turns: number | null): GeminiUsage {
  return {
    perModel,
    inputTokens: perModel.reduce((n, m) => n + m.inputTokens, 0),
    outputTokens: perModel.reduce((n, m) => n + m.outputTokens, 0),
    turns,
  };
}

function asMessage(raw: unknown): SessionMessage | null {
  if (!isRecord(raw) || typeof raw.id !== 'string') return null;
  return {
    id: raw.id,
    type: typeof raw.type === 'string' ? raw.type : 'unknown',
    ...(typeof raw.timestamp === 'string' ? { timestamp: raw.timestamp } : {}),
    ...('content' in raw ? { content: raw.content } : {}),
    ...(typeof raw.model === 'string' ? { model: raw.model } : {}),
    ...(isRecord(raw.tokens) ? { tokens: raw.tokens } : {}),
    ...(Array.isArray(raw.toolCalls) ? { toolCalls: raw.toolCalls } : {}),
  };
}

/** The text of a message's content: a string, a part, or a list of parts. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map(textOf).join('');
  if (isRecord(content) && typeof content.text === 'string') return content.text;
  return '';
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
