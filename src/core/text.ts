// Small text helpers shared by the core's user-facing messages and reports.

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
  const esc = (s: string) => s.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
  return [
    `| ${header.map(esc).join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
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
