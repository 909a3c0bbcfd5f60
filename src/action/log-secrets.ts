// What the agent's log must not show: every value forkflush knows to be a secret (with the forms it
// takes in a log) and text shaped like a well-known token, replaced by *** (agent-log.ts applies it
// to everything it prints, writes or uploads).
import { agentFor } from '../agents/specs.js';
import { SECRET_MIN_CHARS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { isForgeSecret } from '../core/secrets.js';
import { allowedEnv } from '../worker/env.js';

export const MASK = '***';
/** A variable named so holds a secret. */
const SECRET_NAME = /TOKEN|SECRET|PASSW|PASSPHRASE|KEY|CRED|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|CERT/i;
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

/** Looks like a credential: one long word of letters and digits (a key, a token). */
function credentialLike(value: string): boolean {
  return value.length >= 16 && !/\s/.test(value) && /[A-Za-z]/.test(value) && /\d/.test(value);
}

/**
 * The secret values to mask, with their variants: `known` (the token, its basic credentials, the
 * context key), every variable of the job's environment (as it was before forkflush forgot its
 * forge secrets) that is a forge secret or is named like a secret, and those of `handedOver` (the
 * variables the agent and the grader got beyond the basics) that look like credentials.
 */
export function secretValues(jobEnv: NodeJS.ProcessEnv, known: string[], handedOver: NodeJS.ProcessEnv = {}): string[] {
  const values = new Set<string>();
  const add = (v: string | undefined) => {
    if (v && v.length >= SECRET_MIN_CHARS) for (const x of secretVariants(v)) values.add(x);
  };
  for (const v of known) add(v);
  for (const [name, v] of Object.entries(jobEnv)) if (isForgeSecret(name) || SECRET_NAME.test(name)) add(v);
  for (const [name, v] of Object.entries(handedOver)) if (SECRET_NAME.test(name) || (v && credentialLike(v))) add(v);
  return [...values];
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

/** The variables the agent (its kind's and agent.env) and the grader (grader.env) got beyond the basics. */
export function handedOverEnv(config: Config, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const basics = allowedEnv(env, []);
  const names = [...agentFor(config).passEnv, ...config.agent.env, ...config.grader.env];
  const out: NodeJS.ProcessEnv = {};
  for (const [name, v] of Object.entries(allowedEnv(env, names))) if (!(name in basics)) out[name] = v;
  return out;
}
