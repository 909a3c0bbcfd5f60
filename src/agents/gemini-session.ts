// Gemini CLI's session files (core/src/services/chatRecordingService.ts): a metadata line, message
// records {id, type: user | gemini | info | …, content, tokens {input, output, cached, thoughts, tool},
// model, toolCalls} (a later one with the same id replaces it), `{$set: {...}}` (`$set.messages`
// replaces the conversation, as a resume writes) and `{$rewindTo: id}`. Read to resume, for a stopped
// session's usage, and for the transcript (headless mode prints no turns).
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { figure, isRecord, jsonLines, str } from '../core/json.js';
import { addUse, type Spent, type Tally } from '../core/usage.js';
import { MAX_AGENT_FILE_BYTES, readRegular } from '../io/agent-reads.js';
import { contentText, describeInput, type Lines } from './transcript.js';

export interface SessionMessage {
  id: string;
  type: string;
  content?: unknown;
  model?: string;
  tokens?: Record<string, unknown>;
  toolCalls?: unknown[];
  thoughts?: unknown[];
}

/** A session file replayed: the conversation as the CLI would load it, and every message ever written (what was spent). */
export type SessionRecord = ReturnType<typeof readSession>;

/** The session files under a `tmp` folder (<slug>/chats/session-<time>-<id8>.jsonl) whose names end with `end`. */
async function* chatFiles(tmp: string, end: string): AsyncGenerator<string> {
  for (const slug of await readdir(tmp).catch(() => [] as string[])) {
    const chats = join(tmp, slug, 'chats');
    for (const name of await readdir(chats).catch(() => [] as string[]))
      if (name.startsWith('session-') && name.endsWith(end)) yield join(chats, name);
  }
}

/** Every session file of `id` in the home, read. */
export async function sessionFiles(dir: string, id: string): Promise<{ path: string; record: SessionRecord }[]> {
  const found: { path: string; record: SessionRecord }[] = [];
  for await (const path of chatFiles(join(dir, 'tmp'), `-${id.slice(0, 8)}.jsonl`)) {
    const text = await readRegular(path, MAX_AGENT_FILE_BYTES);
    const record = text === null ? null : readSession(text);
    if (record && (record.sessionId === id || record.sessionId === null)) found.push({ path, record });
  }
  return found;
}

export function readSession(text: string) {
  let sessionId: string | null = null;
  let messages = new Map<string, SessionMessage>();
  const written = new Map<string, SessionMessage>();
  const note = (m: SessionMessage) => {
    // A resumed session rewrites its history in `$set.messages` without the usage: keep it.
    const prev = written.get(m.id);
    written.set(m.id, prev ? { ...prev, ...m, tokens: m.tokens ?? prev.tokens, model: m.model ?? prev.model } : m);
    messages.set(m.id, m);
  };
  for (const r of jsonLines(text)) {
    if (typeof r.$rewindTo === 'string') {
      const at = [...messages.keys()].indexOf(r.$rewindTo);
      messages = new Map(at < 0 ? [] : [...messages].slice(0, at));
    } else if (typeof r.id === 'string' && typeof r.type === 'string') note(r as unknown as SessionMessage);
    else if (isRecord(r.$set) && Array.isArray(r.$set.messages)) {
      messages = new Map();
      for (const m of r.$set.messages)
        if (isRecord(m) && typeof m.id === 'string') note(m as unknown as SessionMessage);
    } else if (typeof r.sessionId === 'string') sessionId = r.sessionId;
  }
  return { sessionId, messages: [...messages.values()], written };
}

/** Whether a conversation has a prompt or an answer beyond the `<session_context>` the CLI puts first (else it refuses to resume). */
export function isResumable(messages: SessionMessage[]): boolean {
  return messages.some((m) => {
    const text = partsText(m.content).trim();
    if (m.type === 'gemini') return text !== '' || (m.toolCalls?.length ?? 0) > 0;
    return m.type === 'user' && text !== '' && !/^<(?:session|hook)_context>/.test(text);
  });
}

/** The usage of answers not in `before`, rewound ones too (paid for); its helper calls are not recorded. */
export function usageFromSessions(sessions: SessionRecord[], before?: Set<string>): Spent {
  const tally: Tally = {};
  const seen = new Set(before);
  for (const m of sessions.flatMap((s) => [...s.written.values()])) {
    if (seen.has(m.id) || m.type !== 'gemini' || !m.tokens) continue;
    seen.add(m.id);
    addUse(tally, m.model ?? 'unknown', { ...tokenUse(m.tokens), calls: 1 });
  }
  return { tally };
}

/** A call's tokens as a tally counts them: tool results are input, thoughts output. */
export function tokenUse({ input, tool, cached, output, thoughts }: Record<string, unknown>) {
  return { input: figure(input) + figure(tool), cached: figure(cached), output: figure(output) + figure(thoughts) };
}

/** The turns since `since` in the newest session file of a context's home; false when there is none. */
export async function contextTurns(contextDir: string, since: Date, out: Lines): Promise<boolean> {
  let newest: { path: string; mtime: number } | null = null;
  for await (const path of chatFiles(join(contextDir, 'home', '.gemini', 'tmp'), '.jsonl')) {
    const mtime = (await stat(path).catch(() => null))?.mtimeMs ?? 0;
    if (!newest || mtime > newest.mtime) newest = { path, mtime };
  }
  const text = newest ? await readRegular(newest.path, 16 * 1024 * 1024) : null;
  if (text) sessionLines(text, since, out);
  return text !== null;
}

/** The turns written since `since`, as records of their own (a resume restates its history in `$set.messages`). */
export function sessionLines(text: string, since: Date | undefined, out: Lines): void {
  const messages = new Map<string, SessionMessage>();
  const from = since?.getTime() ?? Number.NEGATIVE_INFINITY;
  for (const r of jsonLines(text))
    if (typeof r.id === 'string' && typeof r.type === 'string' && Date.parse(String(r.timestamp)) >= from)
      messages.set(r.id, r as unknown as SessionMessage);
  for (const m of messages.values()) {
    if (m.type === 'error' || m.type === 'warning' || m.type === 'info') out.add(m.type, partsText(m.content));
    if (m.type !== 'gemini') continue;
    for (const t of (m.thoughts ?? []).filter(isRecord))
      out.add('thinking', [str(t.subject), str(t.description)].filter(Boolean).join(': '));
    out.add('assistant', partsText(m.content));
    for (const call of (m.toolCalls ?? []).filter(isRecord)) {
      out.add(`tool ${str(call.name) ?? '?'}`, describeInput(call.args));
      const responses = (Array.isArray(call.result) ? call.result : [])
        .map((r) => (isRecord(r) && isRecord(r.functionResponse) ? r.functionResponse.response : undefined))
        .filter(isRecord);
      const error = responses.map((r) => r.error).find((x) => x !== undefined);
      if (error !== undefined) out.add('result (error)', contentText(error));
      else if (responses.length > 0) out.add('result', responses.map((r) => contentText(r.output ?? r)).join('\n'));
      else if (str(call.status)) out.add('result', str(call.status) as string);
    }
  }
}

/** The text parts of a Gemini content (function calls and responses are shown with their calls). */
function partsText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map(partsText).join('');
  return isRecord(content) && typeof content.text === 'string' ? content.text : '';
}
