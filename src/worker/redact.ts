// Secret values and the forms they take in text (a log, a grader's output), and the redactor that
// replaces them, and text shaped like a well-known token, by ***. The job's log (action/agent-log.ts)
// and the judge's reasons (episode.ts) go through it.
import { SECRET_MIN_CHARS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { allowedEnv } from './env.js';

export const MASK = '***';
/** Text shaped like a well-known credential, wherever it comes from. */
export const TOKEN_PATTERNS: readonly RegExp[] = [
  /\bgh[pousr]_[A-Za-z0-9]{30,}\b/g,
  /\bgithub_pat_[A-Za-z0-9_]{30,}\b/g,
  /\bsk-(?:ant-|proj-|or-)?[A-Za-z0-9_-]{20,}/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  /\bAIza[0-9A-Za-z_-]{35}\b/g,
  /\bxox[abposr]-[A-Za-z0-9-]{10,}/g,
  /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
];

/** A value and the forms it takes in a log: its lines, the strings of its JSON, escaped, encoded. */
export function secretVariants(value: string): string[] {
  const out = new Set<string>([value]);
  for (const line of value.split(/\r?\n/)) out.add(line.trim());
  try {
    const walk = (v: unknown): void => {
      if (typeof v === 'string') {
        if (v.length >= 12) out.add(v);
      } else if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') Object.values(v).forEach(walk);
    };
    walk(JSON.parse(value));
  } catch {
    // Not JSON.
  }
  for (const v of [...out]) {
    out.add(JSON.stringify(v).slice(1, -1));
    out.add(encodeURIComponent(v));
  }
  out.add(Buffer.from(value).toString('base64'));
  out.add(Buffer.from(value).toString('base64url'));
  return [...out].filter((v) => v.length >= SECRET_MIN_CHARS);
}

/** Replaces every secret value (longest first) and every token-shaped text by ***. */
export function redactor(values: Iterable<string>): (text: string) => string {
  const list = [...new Set(values)].filter((v) => v.length >= SECRET_MIN_CHARS).sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const v of list) if (out.includes(v)) out = out.split(v).join(MASK);
    for (const re of TOKEN_PATTERNS) out = out.replace(re, MASK);
    return out;
  };
}

/**
 * What the judge's reasons and grader.log must not show: the values grader.env and setup.env hand
 * over beyond the basics. The graded code is the agent's, and a reason reaches the journal the next
 * agent reads.
 */
export function judgeRedactor(
  config: Pick<Config, 'grader' | 'setup'>,
  env: NodeJS.ProcessEnv,
): (text: string) => string {
  const basics = allowedEnv(env, []);
  const values: string[] = [];
  for (const [name, v] of Object.entries(allowedEnv(env, [...config.grader.env, ...config.setup.env])))
    if (v && !(name in basics)) values.push(...secretVariants(v));
  return redactor(values);
}
