// Small text helpers shared by the core's user-facing messages and reports.
import { FAILURE_QUOTE_MAX_CHARS } from './bounds.js';

/** Levenshtein distance, for "did you mean" suggestions. */
export function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] as number;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] as number;
      prev[j] = Math.min(up + 1, (prev[j - 1] as number) + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length] as number;
}

/** The closest candidate within a third of the word's length (at least 2 edits), if any. */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.ceil(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** A number as people read it in tables: at most `digits` decimals, no trailing zeros. */
export function formatNumber(x: number, digits = 3): string {
  if (!Number.isFinite(x)) return String(x);
  // A figure too small for `digits` decimals is not zero: its first significant digits instead.
  if (x !== 0 && Math.abs(x) < 0.5 * 10 ** -digits) return String(Number(x.toPrecision(Math.max(1, digits))));
  const fixed = x.toFixed(digits);
  return fixed.includes('.') ? fixed.replace(/\.?0+$/, '') : fixed;
}

/** A plain-text table with aligned columns (numbers right-aligned). */
export function textTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => /^[-+]?[\d.,%]+$|^-$/.test(r[i] ?? '')));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (numeric[i] ? c.padStart(widths[i] as number) : c.padEnd(widths[i] as number)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/**
 * Text an agent or a grader wrote (a failure reason, a note), shown in markdown as itself: one
 * line of inline code, so it cannot mention people, load images or add links and headings.
 */
export function codeSpan(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  if (line === '') return '';
  const longest = Math.max(0, ...(line.match(/`+/g) ?? []).map((t) => t.length));
  const fence = '`'.repeat(longest + 1);
  const pad = longest > 0 || line.startsWith('`') || line.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${line}${pad}${fence}`;
}

/** A markdown table; cell text is escaped so untrusted text cannot break the table. */
export function markdownTable(header: string[], rows: string[][]): string {
  // A bare \r ends a line too (cmark-gfm), so it would end the row.
  const esc = (s: string) => s.replace(/\|/g, '\\|').replace(/\r\n?|\n/g, ' ');
  return [
    `| ${header.map(esc).join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}

const WORD_JOINER = '\u2060';

/**
 * Text an agent wrote, made inert for GitHub: an invisible word joiner (U+2060) after `#` and
 * `GH-` before a digit, after `@` before a name, and inside the closing keywords (`fixes #12`,
 * `Closes: https://github.com/o/r/issues/4`), so that GitHub neither links an issue nor closes
 * one nor mentions anyone, in a body or in a commit merged into the default branch. Idempotent:
 * a joiner already there stops each pattern from matching again.
 */
export function inertOnGitHub(text: string): string {
  return text
    .replace(/#(?=\d)/g, `#${WORD_JOINER}`)
    .replace(/\bGH-(?=\d)/gi, (m) => `${m}${WORD_JOINER}`)
    .replace(/@(?=[A-Za-z0-9])/g, `@${WORD_JOINER}`)
    .replace(/\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?=:?\s)/gi, (m) => `${m[0]}${WORD_JOINER}${m.slice(1)}`);
}

/** Text without the word joiners inertOnGitHub put in (a file's path, where they are not part of the name). */
export function withoutWordJoiners(text: string): string {
  return text.replaceAll(WORD_JOINER, '');
}

/**
 * Agent text in a GitHub body: one line of inline code (codeSpan), without control or bidi
 * characters (plainText), inert (inertOnGitHub).
 */
export function inertCodeSpan(text: string): string {
  return codeSpan(inertOnGitHub(plainText(text)));
}

/**
 * Text cut to at most `max` UTF-16 units, ending in `marker` when it was cut, never inside a
 * surrogate pair. The marker starts with no space: a cut can make no new closing keyword
 * (inertOnGitHub matches a keyword only before a space), so bounding inert text keeps it inert.
 */
export function cutText(text: string, max: number, marker = '… (cut)'): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max - marker.length);
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}${marker}`;
}

// Characters GitHub shows as nothing: zero-width spaces and joiners, bidirectional controls (the
// "Trojan Source" trick), the byte order mark, and Unicode tag characters (which smuggle ASCII).
const INVISIBLE = /[\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]|[\u{E0000}-\u{E007F}]/gu;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/**
 * Markdown as a reader sees it on GitHub: HTML comments outside code blocks and invisible
 * characters removed, with how many parts were hidden. Whoever labels an issue vouches for what
 * they saw; text they could not see must not reach the agent.
 */
export function visibleText(markdown: string): { text: string; hidden: number } {
  let hidden = 0;
  const out: string[] = [];
  let prose: string[] = [];
  let fence: string | null = null;
  const flushProse = () => {
    const joined = prose.join('\n').replace(/<!--[\s\S]*?(?:-->|$)/g, () => {
      hidden++;
      return '';
    });
    if (prose.length > 0) out.push(joined);
    prose = [];
  };
  for (const line of markdown.split('\n')) {
    const marker = FENCE.exec(line)?.[1];
    if (fence === null) {
      if (marker) {
        flushProse();
        fence = marker;
        out.push(line);
      } else {
        prose.push(line);
      }
    } else {
      out.push(line);
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = null;
    }
  }
  flushProse();
  const text = out.join('\n').replace(INVISIBLE, () => {
    hidden++;
    return '';
  });
  return { text, hidden };
}

/** Bidirectional overrides and isolates: they reorder what a reader sees ("Trojan source"). */
const BIDI = new Set([0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]);

/**
 * Text an agent or a grader wrote, safe to show in a terminal or a report: escape sequences
 * (colours, cursor moves, window titles, clipboard writes) removed whole, every other control
 * character but tab and newline dropped (carriage returns too: they overwrite a line), and
 * bidirectional overrides dropped.
 */
export function plainText(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x1b) {
      i = escapeEnd(text, i + 1);
      continue;
    }
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a) || (c >= 0x7f && c <= 0x9f) || BIDI.has(c)) continue;
    out += text[i];
  }
  return out;
}

/** Where an escape sequence that starts at `i` (just after ESC) ends. */
function escapeEnd(text: string, i: number): number {
  const kind = text[i];
  if (kind === '[') {
    // CSI: parameters, then one final byte in @ to ~.
    let j = i + 1;
    while (j < text.length && !(text.charCodeAt(j) >= 0x40 && text.charCodeAt(j) <= 0x7e)) j++;
    return j;
  }
  if (kind === ']' || kind === 'P' || kind === '_' || kind === '^' || kind === 'X') {
    // OSC, DCS, APC, PM, SOS: a string up to BEL or ESC \.
    let j = i + 1;
    while (j < text.length && text.charCodeAt(j) !== 0x07 && !(text.charCodeAt(j) === 0x1b && text[j + 1] === '\\'))
      j++;
    return text.charCodeAt(j) === 0x1b ? j + 1 : j;
  }
  return i; // a two-character escape: ESC and this one
}

/** A line that says what went wrong: `Error: …`, `TypeError: …`, `error: …`, `fatal: …`, `panic: …`, `error[E0308]: …`, Node's `Error [ERR_X]: …`. */
const ERROR_LINE = /^(?:Uncaught\s+)?(?:[\w.$]*(?:Error|Exception)|error|fatal|panic)(?: ?\[\w+\])?(?::|$)/i;
/** Lines that never explain a failure: stack frames, Node's version banner, a caret under code. */
const NOISE = [/^at\s/, /^Node\.js v\d+/, /^\^+$/, /^File ".*", line \d+/];

/**
 * The line of a failed program's output that says why: the first that looks like an error
 * (`Error:`, `error:`, a Python exception after its `Traceback`), else the last meaningful one.
 * Stack frames and Node's version banner never count; control characters are gone (plainText).
 */
export function failureLine(output: string, max = FAILURE_QUOTE_MAX_CHARS): string {
  const lines = plainText(output.replace(/\r\n?/g, '\n'))
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !NOISE.some((re) => re.test(l)));
  return (lines.find((l) => ERROR_LINE.test(l)) ?? lines.at(-1) ?? '').slice(0, max);
}

/**
 * A file name the agent chose, shown in a terminal: as it is, or, when it holds control or
 * bidirectional characters (an escape sequence, a carriage return), quoted with each as `\uXXXX`
 * (seen, never acted on).
 */
export function shownName(name: string): string {
  let odd = false;
  const shown = [...name]
    .map((ch) => {
      const c = ch.charCodeAt(0);
      if (!(c < 0x20 || (c >= 0x7f && c <= 0x9f) || BIDI.has(c))) return ch;
      odd = true;
      return `\\u${c.toString(16).padStart(4, '0')}`;
    })
    .join('');
  return odd ? `"${shown}"` : name;
}

/** A word for a POSIX shell: as it is when it is safe, else single-quoted. */
export function shellQuote(s: string): string {
  return /^[\w./@%+=:,-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}
