// The agent's transcript as people read it in a job log: one short line per assistant message,
// tool call and tool result, made from what each kind of agent writes to `agent.log` (its stdout
// and stderr, interleaved). Pure: the caller reads the files and hands their text in.
//
// What each kind writes (the formats are those the adapters' parsers read; recorded outputs in
// test/fixtures/agents/<kind>/):
// - claude-code: stream-json events (claude-code-output.ts): system/init, assistant messages whose
//   content blocks are text, thinking and tool_use, user messages holding tool_result blocks, result.
// - codex: `codex exec --json` events (codex-output.ts): thread.started, turn.*, item.started and
//   item.completed with items agent_message, reasoning, command_execution, file_change,
//   mcp_tool_call, web_search, todo_list, error; plus its stderr.
// - copilot: `--output-format json` events (copilot-output.ts): assistant.message with content and
//   toolRequests, tool.execution_complete, session.error, result; most others are ephemeral.
// - gemini: `-o json` prints one pretty-printed result object at the end (gemini-output.ts
//   parseResult): the answer and the stats, no turns. The turns are in the session file, which
//   `geminiSessionLines` reads (the adapter keeps it in the context folder).
// - opencode: `run --format json` events (opencode-output.ts): text, reasoning, tool_use with its
//   state, step_finish, error.
// - aider: its console (aider-output.ts): the announcement, the model's replies with their
//   SEARCH/REPLACE blocks, a usage line after each model call, "Applied edit to <file>", errors.
// - command: whatever the program prints.
// Lines that are not part of the transcript (stderr, a line that is not an event) are the
// "other" output, whose tail is shown after the transcript.
// (Over 400 lines: one reader per agent kind, each short, with the line format they share.)
import type { Config } from '../core/config.js';
import { plainText } from '../core/text.js';
import { parseAiderOutput } from './aider-output.js';
import { readStream } from './claude-code-output.js';
import { parseResult, type SessionMessage } from './gemini-output.js';
import { addEvents, emptyRun } from './opencode-output.js';
import { isRecord } from './session.js';

export type AgentKind = Config['agent']['kind'];

/** The longest line a transcript has (longer ones are cut, with "…"). */
export const LINE_MAX = 200;
/** The most lines a transcript has: the first and the last are kept, the middle said to be left out. */
export const LINES_MAX = 400;
const HEAD_KEPT = 100;

export interface TranscriptOptions {
  /** The agent's working directory: paths in it are shown relative to it. */
  workdir?: string;
}

export interface Transcript {
  /** One line per assistant message, tool call, tool result (and the start and end of a session). */
  lines: string[];
  /** The rest of the log, line by line: stderr and lines that are not events. */
  other: string[];
}

/** The agent's transcript, one short line per turn or tool call (see `readTranscript`). */
export function transcriptLines(kind: AgentKind, logText: string, options: TranscriptOptions = {}): string[] {
  return readTranscript(kind, logText, options).lines;
}

/** The transcript of a log, and its other output. */
export function readTranscript(kind: AgentKind, logText: string, options: TranscriptOptions = {}): Transcript {
  const out = new Lines(options.workdir);
  const other: string[] = [];
  const text = logText.replace(/\r\n?/g, '\n');
  switch (kind) {
    case 'claude-code':
      eachEvent(text, other, (e) => claudeEvent(out, e));
      break;
    case 'codex': {
      const started = new Set<string>();
      eachEvent(text, other, (e) => codexEvent(out, e, started));
      break;
    }
    case 'copilot':
      eachEvent(text, other, (e) => copilotEvent(out, e));
      break;
    case 'opencode':
      eachEvent(text, other, (e, line) => opencodeEvent(out, e, line));
      break;
    case 'gemini':
      geminiLog(out, text, other);
      break;
    case 'aider':
      aiderLog(out, text);
      break;
    default:
      for (const line of text.split('\n')) if (line.trim() !== '') out.add('output', line);
  }
  return { lines: out.done(), other: cleanLines(other) };
}

/**
 * Gemini's turns from its session file (the JSONL record gemini-output.ts `readSession` reads): the
 * messages the CLI wrote at or after `since` (the episode's start), each answer, thought, tool call
 * and tool result on a line. Only messages written as records of their own count: a resumed
 * session first restates its whole history in one `$set.messages` record, stamped anew.
 */
export function geminiSessionLines(sessionText: string, since?: Date, options: TranscriptOptions = {}): string[] {
  const out = new Lines(options.workdir);
  const from = since ? since.getTime() : Number.NEGATIVE_INFINITY;
  // The last version of each message, in the order the messages first appeared.
  const messages = new Map<string, SessionMessage>();
  for (const line of sessionText.split('\n')) {
    if (!line.trim().startsWith('{')) continue;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isRecord(record) || typeof record.id !== 'string' || typeof record.type !== 'string') continue;
    const at = typeof record.timestamp === 'string' ? Date.parse(record.timestamp) : Number.NaN;
    if (!(at >= from)) continue;
    messages.set(record.id, record as unknown as SessionMessage);
  }
  for (const m of messages.values()) geminiMessage(out, m);
  return out.done();
}

// ---------------------------------------------------------------------------------------------
// Lines

export class Lines {
  private readonly lines: string[] = [];
  private last = '';
  private repeats = 0;

  constructor(private readonly workdir: string | undefined) {}

  /** One line, `label: text`, the text on one line, cut to LINE_MAX. Empty text adds nothing. */
  add(label: string, text: string): void {
    let t = oneLine(text);
    if (this.workdir && this.workdir !== '/') {
      const dir = this.workdir.replace(/\/+$/, '');
      t = t.split(`${dir}/`).join('').split(dir).join('.');
    }
    if (t === '') return;
    const line = clip(`${label}: ${t}`);
    // The same line again (a retry, a duplicate print) is counted, not repeated.
    if (line === this.last) {
      this.repeats++;
      return;
    }
    this.flush();
    this.lines.push(line);
    this.last = line;
  }

  private flush(): void {
    if (this.repeats > 0) {
      const i = this.lines.length - 1;
      this.lines[i] = clip(`${this.lines[i]} (×${this.repeats + 1})`);
    }
    this.repeats = 0;
  }

  done(): string[] {
    this.flush();
    return capLines(this.lines);
  }
}

/** At most LINES_MAX lines: the first ones and the last ones, with how many were left out. */
export function capLines(lines: string[], max = LINES_MAX, head = HEAD_KEPT): string[] {
  if (lines.length <= max) return lines;
  const tail = max - head - 1;
  return [
    ...lines.slice(0, head),
    `… ${lines.length - head - tail} lines left out …`,
    ...lines.slice(lines.length - tail),
  ];
}

/** Text on one line: control characters gone (plainText), line breaks shown as ⏎, spaces collapsed. */
function oneLine(text: string): string {
  return plainText(text)
    .split('\n')
    .map((l) => l.replace(/\s+/g, ' ').trim())
    .filter((l) => l !== '')
    .join(' ⏎ ');
}

function clip(line: string, max = LINE_MAX): string {
  const chars = [...line];
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : line;
}

/** Other output: each line without control characters, cut, empty ones dropped. */
function cleanLines(lines: string[]): string[] {
  return lines
    .map((l) => clip(plainText(l).replace(/\s+$/, '')))
    .filter((l) => l.trim() !== '')
    .map((l) => l.replace(/\t/g, '  '));
}

// ---------------------------------------------------------------------------------------------
// JSON-lines logs

/** Calls `on` with each line that is a JSON object; every other line goes to `other`. */
function eachEvent(text: string, other: string[], on: (e: Record<string, unknown>, line: string) => void): void {
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (t === '') continue;
    let v: unknown;
    if (t.startsWith('{')) {
      try {
        v = JSON.parse(t);
      } catch {
        // A torn or foreign line.
      }
    }
    if (isRecord(v)) on(v, t);
    else other.push(line);
  }
}

/** A tool call's input as a reader wants it: the command, the path or the query; else the JSON. */
function describeInput(input: unknown): string {
  if (typeof input === 'string') return unwrapShell(input);
  if (Array.isArray(input)) return unwrapShell(input.map(String).join(' '));
  if (!isRecord(input)) return input === undefined ? '' : String(JSON.stringify(input));
  for (const key of ['command', 'cmd']) {
    const v = input[key];
    if (typeof v === 'string' && v.trim() !== '') return unwrapShell(v);
    if (Array.isArray(v) && v.length > 0) return unwrapShell(v.map(String).join(' '));
  }
  for (const key of ['file_path', 'filePath', 'path', 'notebook_path', 'absolute_path', 'pattern', 'url', 'query']) {
    const v = input[key];
    if (typeof v === 'string' && v.trim() !== '') return v;
  }
  return String(JSON.stringify(input));
}

/** `/bin/bash -lc '<script>'` as the script (how Codex and others run a command). */
function unwrapShell(command: string): string {
  const m = /^(?:\/(?:usr\/)?bin\/)?(?:ba|z)?sh -l?c '([\s\S]*)'$/.exec(command.trim());
  return m ? (m[1] as string).replaceAll(`'\\''`, `'`) : command;
}

/** The text of a tool result or a message content: a string, text parts, or the JSON. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map(contentText).join('\n');
  if (isRecord(content)) {
    if (typeof content.text === 'string') return content.text;
    if (typeof content.content === 'string' || Array.isArray(content.content)) return contentText(content.content);
    if (typeof content.output === 'string') return content.output;
    return String(JSON.stringify(content));
  }
  return content === undefined || content === null ? '' : String(content);
}

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function money(usd: number): string {
  return `$${Number(usd.toPrecision(3))}`;
}

// ---------------------------------------------------------------------------------------------
// Claude Code

function claudeEvent(out: Lines, e: Record<string, unknown>): void {
  if (e.type === 'system') {
    if (e.subtype === 'init') {
      // The same reader the adapter uses for the init line.
      const facts = readStream(JSON.stringify(e));
      const what = [
        facts.version ? `Claude Code ${facts.version}` : 'Claude Code',
        facts.model ? `model ${facts.model}` : null,
      ];
      out.add('start', what.filter(Boolean).join(', '));
    } else if (typeof e.subtype === 'string') {
      out.add('system', e.subtype);
    }
    return;
  }
  if (e.type === 'assistant' || e.type === 'user') {
    const message = isRecord(e.message) ? e.message : {};
    const content = message.content;
    if (typeof content === 'string') {
      if (e.type === 'assistant') out.add('assistant', content);
      return;
    }
    if (!Array.isArray(content)) return;
    for (const block of content) {
      if (!isRecord(block)) continue;
      if (block.type === 'text') out.add(e.type === 'assistant' ? 'assistant' : 'user', contentText(block.text));
      else if (block.type === 'thinking') out.add('thinking', contentText(block.thinking));
      else if (block.type === 'tool_use') out.add(`tool ${str(block.name) ?? '?'}`, describeInput(block.input));
      else if (block.type === 'tool_result')
        out.add(block.is_error === true ? 'result (error)' : 'result', contentText(block.content) || '(empty)');
    }
    return;
  }
  if (e.type === 'result') {
    const r = readStream(JSON.stringify(e)).result;
    if (!r) return;
    const parts = [
      r.subtype + (r.isError ? ' (error)' : ''),
      r.turns === null ? null : `${r.turns} turns`,
      r.totals ? money(r.totals.costUsd) : null,
    ];
    out.add('end', [parts.filter(Boolean).join(', '), r.message].filter(Boolean).join(': '));
  }
}

// ---------------------------------------------------------------------------------------------
// Codex

function codexEvent(out: Lines, e: Record<string, unknown>, started: Set<string>): void {
  if (e.type === 'thread.started') out.add('start', `Codex thread ${str(e.thread_id) ?? '?'}`);
  else if (e.type === 'turn.completed') {
    const u = isRecord(e.usage) ? e.usage : {};
    const input = num(u.input_tokens);
    const output = num(u.output_tokens);
    out.add('turn done', input === null || output === null ? 'no usage' : `${input} in, ${output} out (thread totals)`);
  } else if (e.type === 'turn.failed') {
    out.add('turn failed', contentText(isRecord(e.error) ? e.error.message : e.error));
  } else if (e.type === 'error') {
    out.add('error', contentText(e.message));
  } else if (e.type === 'item.started' || e.type === 'item.completed' || e.type === 'item.updated') {
    if (!isRecord(e.item)) return;
    const item = e.item;
    const id = str(item.id) ?? '';
    const done = e.type === 'item.completed';
    switch (item.type) {
      case 'agent_message':
        if (done) out.add('assistant', contentText(item.text));
        break;
      case 'reasoning':
        if (done) out.add('thinking', contentText(item.text));
        break;
      case 'command_execution':
        if (!started.has(id)) out.add('tool shell', describeInput(item.command));
        started.add(id);
        if (done) {
          const code = num(item.exit_code);
          out.add(
            code === null ? 'result' : `result (exit ${code})`,
            contentText(item.aggregated_output) || '(no output)',
          );
        }
        break;
      case 'file_change':
        if (done) {
          const changes = Array.isArray(item.changes) ? item.changes.filter(isRecord) : [];
          const files = changes.map((c) => `${str(c.path) ?? '?'}${str(c.kind) ? ` (${c.kind})` : ''}`);
          out.add('tool edit', files.join(', ') || 'files');
          if (item.status === 'failed') out.add('result (error)', 'the change was not applied');
        }
        break;
      case 'mcp_tool_call':
        if (!started.has(id))
          out.add(`tool ${str(item.server) ?? 'mcp'}.${str(item.tool) ?? '?'}`, describeInput(item.arguments));
        started.add(id);
        if (done) {
          const error = isRecord(item.error) ? item.error.message : null;
          if (error) out.add('result (error)', contentText(error));
          else out.add('result', contentText(isRecord(item.result) ? item.result.content : item.result) || '(empty)');
        }
        break;
      case 'web_search':
        if (done) out.add('tool web_search', contentText(item.query));
        break;
      case 'todo_list':
        if (done && Array.isArray(item.items)) {
          const items = item.items.filter(isRecord);
          out.add('plan', `${items.filter((i) => i.completed === true).length} of ${items.length} done`);
        }
        break;
      case 'error':
        if (done) out.add('warning', contentText(item.message));
        break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Copilot

function copilotEvent(out: Lines, e: Record<string, unknown>): void {
  const data = isRecord(e.data) ? e.data : {};
  switch (e.type) {
    case 'assistant.message': {
      out.add('assistant', contentText(data.content));
      const requests = Array.isArray(data.toolRequests) ? data.toolRequests.filter(isRecord) : [];
      for (const t of requests) out.add(`tool ${str(t.name) ?? '?'}`, describeInput(t.arguments));
      break;
    }
    case 'assistant.reasoning':
      out.add('thinking', contentText(data.content));
      break;
    case 'tool.execution_complete': {
      const result = isRecord(data.result) ? data.result : {};
      const failed = data.success === false;
      const text = contentText(result.content ?? (isRecord(data.error) ? data.error.message : data.error));
      out.add(failed ? 'result (error)' : 'result', text || '(empty)');
      break;
    }
    case 'assistant.turn_retry':
      out.add('retry', str(data.reason) ?? 'the model call failed');
      break;
    case 'model.call_failure': {
      const status = num(data.statusCode);
      out.add('model call failed', status === null ? (str(data.failureKind) ?? 'error') : `HTTP ${status}`);
      break;
    }
    case 'session.error':
      out.add('error', `${str(data.errorType) ?? 'error'}: ${contentText(data.message)}`);
      break;
    case 'session.start': {
      const version = str(data.copilotVersion);
      out.add('start', version ? `Copilot ${version}` : 'Copilot session');
      break;
    }
    case 'result': {
      const code = num(e.exitCode) ?? num(data.exitCode);
      out.add('end', code === null ? 'done' : `exit code ${code}`);
      break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// opencode

function opencodeEvent(out: Lines, e: Record<string, unknown>, line: string): void {
  const part = isRecord(e.part) ? e.part : {};
  switch (e.type) {
    case 'text':
      out.add('assistant', contentText(part.text));
      break;
    case 'reasoning':
      out.add('thinking', contentText(part.text));
      break;
    case 'tool_use': {
      const state = isRecord(part.state) ? part.state : {};
      out.add(`tool ${str(part.tool) ?? '?'}`, describeInput(state.input));
      if (state.status === 'error') out.add('result (error)', contentText(state.error) || '(no message)');
      else if (state.status === 'completed') out.add('result', contentText(state.output) || '(empty)');
      break;
    }
    case 'step_finish': {
      // The normal ends of a step (an answer, tool calls) say nothing new; others do (a filter, a limit).
      const reason = str(part.reason);
      if (reason && reason !== 'stop' && reason !== 'tool-calls') out.add('stop', reason);
      break;
    }
    case 'error':
      // The adapter's own reading of an error event.
      for (const message of addEvents(emptyRun(), line).errors) out.add('error', message);
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Gemini

function geminiLog(out: Lines, text: string, other: string[]): void {
  const lines = text.split('\n');
  const inObject = new Set<number>();
  for (const [start, end] of jsonBlocks(lines)) for (let i = start; i <= end; i++) inObject.add(i);
  for (const [i, line] of lines.entries()) if (!inObject.has(i) && line.trim() !== '') other.push(line);
  // The adapter's reader, block by block: a fatal error is printed twice (plain and "[ERROR] ").
  for (const [start, end] of jsonBlocks(lines)) {
    const r = parseResult(lines.slice(start, end + 1).join('\n'));
    if (!r) continue;
    if (r.response) out.add('assistant', r.response);
    const stats = isRecord(r.stats) ? r.stats : {};
    const models = isRecord(stats.models) ? stats.models : {};
    for (const [model, m] of Object.entries(models)) {
      if (!isRecord(m)) continue;
      const api = isRecord(m.api) ? m.api : {};
      const tokens = isRecord(m.tokens) ? m.tokens : {};
      const failed = num(api.totalErrors) ?? 0;
      const produced = (num(tokens.candidates) ?? 0) + (num(tokens.thoughts) ?? 0);
      out.add(
        `model ${model}`,
        `${num(api.totalRequests) ?? 0} calls${failed > 0 ? ` (${failed} failed)` : ''}, ${num(tokens.prompt) ?? 0} in, ${produced} out`,
      );
    }
    const tools = isRecord(stats.tools) && isRecord(stats.tools.byName) ? stats.tools.byName : {};
    for (const [tool, t] of Object.entries(tools)) {
      if (!isRecord(t)) continue;
      const failed = num(t.fail) ?? 0;
      out.add(`tool ${tool}`, `${num(t.count) ?? 0} calls${failed > 0 ? `, ${failed} failed` : ''}`);
    }
    if (r.error) out.add('error', `${r.error.type}: ${r.error.message}`);
    for (const w of r.warnings ?? []) out.add('warning', w);
  }
}

/**
 * Where the pretty-printed JSON objects are (first and last line): a line "{" (or "[ERROR] {")
 * up to the first line "}" that closes a valid object, as gemini-output.ts reads them.
 */
function jsonBlocks(lines: string[]): [number, number][] {
  const blocks: [number, number][] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const open = line.endsWith('{') ? line.lastIndexOf('{') : -1;
    if (open < 0 || (open > 0 && !/^\[[A-Z]+\] $/.test(line.slice(0, open)))) continue;
    for (let j = i + 1; j < lines.length; j++) {
      if (lines[j] !== '}') continue;
      try {
        JSON.parse([line.slice(open), ...lines.slice(i + 1, j + 1)].join('\n'));
        blocks.push([i, j]);
        i = j;
        break;
      } catch {
        // A nested object's brace: try the next one.
      }
    }
  }
  return blocks;
}

function geminiMessage(out: Lines, m: SessionMessage): void {
  if (m.type === 'gemini') {
    const raw = m as SessionMessage & { thoughts?: unknown };
    for (const t of Array.isArray(raw.thoughts) ? raw.thoughts : []) {
      if (isRecord(t)) out.add('thinking', [str(t.subject), str(t.description)].filter(Boolean).join(': '));
    }
    out.add('assistant', partsText(m.content));
    for (const call of (m.toolCalls ?? []).filter(isRecord)) {
      out.add(`tool ${str(call.name) ?? '?'}`, describeInput(call.args));
      const results = Array.isArray(call.result) ? call.result : [];
      const responses = results
        .filter(isRecord)
        .map((r) => (isRecord(r.functionResponse) ? r.functionResponse.response : undefined))
        .filter(isRecord);
      const error = responses.map((r) => r.error).find((x) => x !== undefined);
      if (error !== undefined) out.add('result (error)', contentText(error));
      else if (responses.length > 0) out.add('result', responses.map((r) => contentText(r.output ?? r)).join('\n'));
      else if (str(call.status)) out.add('result', str(call.status) as string);
    }
  } else if (m.type === 'error' || m.type === 'warning' || m.type === 'info') {
    out.add(m.type, partsText(m.content));
  }
  // User messages are the prompt (forkflush's) and the tool results, shown with their calls.
}

/** The text parts of a Gemini content (function calls and responses are shown with their calls). */
function partsText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map(partsText).join('');
  return isRecord(content) && typeof content.text === 'string' ? content.text : '';
}

// ---------------------------------------------------------------------------------------------
// aider

const AIDER_SKIP = /^(?:Git repo:|Repo-map:|Weak model:|Editor model:|Added .* to the chat|Cost: \$)/;
const SEARCH_MARKERS = /^(?:<<<<<<< SEARCH|=======|>>>>>>> REPLACE)\s*$/;
const FAILED_BLOCKS = /^# (\d+ SEARCH\/REPLACE blocks? failed to match!?)/;

function aiderLog(out: Lines, text: string): void {
  const lines = plainText(text).split('\n');
  let turns = 0;
  let prose: string | null = null;
  const edits = new Set<string>();
  let fence = false;
  let inErrorReport = false;
  // After a failed model call, the text is aider's own advice, not a reply.
  let failedCall = false;
  const reply = () => {
    if (prose !== null || edits.size > 0) {
      const label = failedCall && edits.size === 0 ? 'aider' : 'assistant';
      out.add(label, `${prose ?? '(edits)'}${edits.size > 0 ? ` [edits ${[...edits].join(', ')}]` : ''}`);
    }
    prose = null;
    edits.clear();
    failedCall = false;
  };
  for (const [i, raw] of lines.entries()) {
    const line = raw.replace(/^> /, '').trim();
    const next = (lines[i + 1] ?? '').trim();
    if (line === '') continue;
    const version = /^Aider v(\S+)/.exec(line);
    if (version) {
      out.add('start', `Aider ${version[1]}`);
      continue;
    }
    // The adapter's reader for the model, the usage lines and the errors.
    const parsed = parseAiderOutput(line);
    if (/^(?:Main model|Model): /.test(line) && parsed.model) {
      out.add('model', line.replace(/^(?:Main model|Model): /, ''));
      continue;
    }
    const call = parsed.calls[0];
    if (call) {
      reply();
      turns++;
      const cost = parsed.calls[0]?.messageCost ?? costOnNextLine(next);
      const tokens = /Tokens: (.*?) received\./.exec(line)?.[1] ?? `${call.sent} sent`;
      out.add(`turn ${turns}`, `${tokens} received${cost !== undefined ? `, $${cost}` : ''}`);
      fence = false;
      inErrorReport = false;
      continue;
    }
    const error = parsed.errors[0];
    if (error) {
      reply();
      out.add('error', error.message);
      failedCall = true;
      continue;
    }
    const applied = /^Applied edit to (.+)$/.exec(line);
    if (applied) {
      out.add('edit', `applied to ${applied[1]}`);
      continue;
    }
    const failedBlocks = FAILED_BLOCKS.exec(line);
    if (failedBlocks) {
      out.add('error', failedBlocks[1] as string);
      inErrorReport = true;
      continue;
    }
    if (inErrorReport) {
      // aider's report of the failed blocks ends with its advice.
      if (/^The SEARCH section must/.test(line)) inErrorReport = false;
      continue;
    }
    if (AIDER_SKIP.test(line)) continue;
    if (/^(?:```|~~~)/.test(line)) {
      fence = !fence;
      continue;
    }
    if (SEARCH_MARKERS.test(line)) continue;
    // A file name on its own line, before its fenced or bare SEARCH block, names an edit.
    if (!/\s/.test(line) && (/^(?:```|~~~)/.test(next) || /^<<<<<<< SEARCH/.test(next))) {
      edits.add(line);
      continue;
    }
    if (fence) continue;
    // A file name aider echoes before what it did with the file's blocks.
    if (!/\s/.test(line) && (/^Applied edit to /.test(next) || FAILED_BLOCKS.test(next))) continue;
    if (prose === null) prose = line;
  }
  reply();
}

function costOnNextLine(next: string): number | undefined {
  const m = /^Cost: \$(\d+(?:\.\d+)?) (?:message|request)/.exec(next);
  return m ? Number(m[1]) : undefined;
}
