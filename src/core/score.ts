// The grader contract: the last non-empty line of stdout is the score, either a number or a JSON
// object with a numeric "score". Anything else gives the episode no score, with a reason.
import { plainText } from './text.js';

export type ScoreReading = { score: number } | { score: null; reason: string };

/**
 * The score in a grader's stdout. `keptChars`: where only the end of the output was kept (at most
 * that many characters), and no line break stands before its last line, that line was cut.
 */
export function parseScore(stdout: string, keptChars: number | null = null): ScoreReading {
  // Each line as a terminal shows it: what follows its last carriage return (progress written
  // over itself; one that ends it leaves it shown), with no colour codes; a score is never made of either.
  const lines = stdout
    .split('\n')
    .map((l) => l.replace(/\r+$/, ''))
    .map((l) => plainText(l.slice(l.lastIndexOf('\r') + 1)).trim());
  const last = lines.filter((l) => l !== '').at(-1);
  if (last === undefined) return { score: null, reason: 'the grader printed nothing on stdout' };
  if (keptChars !== null && !stdout.trimEnd().includes('\n'))
    return {
      score: null,
      reason: `the grader's last line is longer than the ${keptChars.toLocaleString('en-US')} characters forkflush reads of its output: print the score on a line of its own, last`,
    };
  const shown = last.length > 80 ? `${last.slice(0, 77)}...` : last;
  if (last.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(last);
    } catch {
      return { score: null, reason: `the grader's last line is not valid JSON: ${shown}` };
    }
    const value = (parsed as { score?: unknown }).score;
    if (typeof value !== 'number') {
      return { score: null, reason: `the grader's JSON has no numeric "score": ${shown}` };
    }
    return finite(value, shown);
  }
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(NaN|Infinity|inf|nan)$/i.test(last)) {
    return { score: null, reason: `the grader's last line is not a number: ${shown}` };
  }
  return finite(Number(last), shown);
}

function finite(value: number, shown: string): ScoreReading {
  if (!Number.isFinite(value)) return { score: null, reason: `the grader printed ${shown}, not a finite number` };
  return { score: value };
}
