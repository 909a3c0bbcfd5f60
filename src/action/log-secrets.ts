// What the agent's log must not show: every value forkflush knows to be a secret (with the forms it
// takes in a log) and text shaped like a well-known token, replaced by *** (agent-log.ts applies it
// to everything it prints, writes or uploads).
import { agentFor } from '../agents/specs.js';
import { SECRET_MIN_CHARS } from '../core/bounds.js';
import type { Config } from '../core/config.js';
import { isForgeSecret } from '../core/secrets.js';
import { allowedEnv } from '../worker/env.js';
import { secretVariants } from '../worker/redact.js';

/** A variable named so holds a secret. */
const SECRET_NAME = /TOKEN|SECRET|PASSW|PASSPHRASE|KEY|CRED|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|CERT/i;

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

/** The variables the agent (its kind's and agent.env) and the grader (grader.env) got beyond the basics. */
export function handedOverEnv(config: Config, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const basics = allowedEnv(env, []);
  const names = [...agentFor(config).passEnv, ...config.agent.env, ...config.grader.env];
  const out: NodeJS.ProcessEnv = {};
  for (const [name, v] of Object.entries(allowedEnv(env, names))) if (!(name in basics)) out[name] = v;
  return out;
}
