// Reading JSON of unknown shape (a CLI's output, a record an agent could have written): objects,
// JSON lines, and figures that are what they claim or nothing.

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The JSON objects of JSONL text; lines that are not JSON objects are skipped. */
export function* jsonLines(text: string): Generator<Record<string, unknown>> {
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      const v: unknown = JSON.parse(t);
      if (isRecord(v)) yield v;
    } catch {
      // A torn or foreign line.
    }
  }
}

/** The last text `read` finds in the JSON lines of `text` that is not blank (a final message), or null. */
export function lastText(text: string, read: (e: Record<string, unknown>) => unknown): string | null {
  let out: string | null = null;
  for (const e of jsonLines(text)) {
    const v = read(e);
    if (typeof v === 'string' && v.trim() !== '') out = v;
  }
  return out;
}

/**
 * A usage figure as a CLI reports it: absent is 0, a finite number at least 0 is itself, anything
 * else NaN, which makes the spend unknown (core/usage.ts unsureFigures), never a 0 said in silence.
 */
export function figure(v: unknown): number {
  if (v === undefined || v === null) return 0;
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : Number.NaN;
}

/** A count as a CLI reports it: a finite non-negative number, else 0. */
export function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

export function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

export function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}
