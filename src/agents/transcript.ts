// The transcript of `agent.log` as a job log shows it: one short line per message, tool call and
// result, by each spec's reader; what is not part of it (stderr, not an event) is the "other" output.
import { isRecord } from '../core/json.js';
import { plainText } from '../core/text.js';

/** The longest line of a transcript (cut with "…"), and the most lines: the first HEAD_KEPT and the last are kept. */
export const LINE_MAX = 200;
export const LINES_MAX = 400;
const HEAD_KEPT = 100;

export interface TranscriptOptions {
  /** The agent's working directory: paths in it are shown relative to it. */
  workdir?: string;
}

/** One line per message, tool call and result (and a session's start and end); `other`: the rest of the log (stderr, not events). */
export interface Transcript {
  lines: string[];
  other: string[];
}

/** A spec's transcript reader: lines to `out`, what is not part of the transcript to `other`. */
export type TranscriptReader = (text: string, out: Lines, other: string[]) => void;

/** The transcript of a log as a spec's reader makes it (none: each line of output as it is), and its other output. */
export function readTranscript(
  reader: TranscriptReader | undefined,
  logText: string,
  options: TranscriptOptions = {},
): Transcript {
  const out = new Lines(options.workdir);
  const other: string[] = [];
  const text = logText.replace(/\r\n?/g, '\n');
  if (reader) reader(text, out, other);
  else for (const line of text.split('\n')) if (line.trim() !== '') out.add('output', line);
  return { lines: out.done(), other: cleanLines(other) };
}

export class Lines {
  private readonly lines: string[] = [];
  private last = '';
  private repeats = 0;

  constructor(
    private readonly workdir: string | undefined,
    /** What the text goes through first (a redactor, for text the agent wrote into a file). */
    private readonly redact: (text: string) => string = (t) => t,
  ) {}

  /** One line, `label: text`, the text on one line, cut to LINE_MAX. Empty text adds nothing. */
  add(label: string, text: string): void {
    let t = oneLine(this.redact(text));
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
    const i = this.lines.length - 1;
    if (this.repeats > 0) this.lines[i] = clip(`${this.lines[i]} (×${this.repeats + 1})`);
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

/** Calls `on` with each line that is a JSON object; every other line goes to `other`. */
export function eachEvent(text: string, other: string[], on: (e: Record<string, unknown>, line: string) => void): void {
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
export function describeInput(input: unknown): string {
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
export function contentText(content: unknown): string {
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

export function money(usd: number): string {
  return `$${Number(usd.toPrecision(3))}`;
}
