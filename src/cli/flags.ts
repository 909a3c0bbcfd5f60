// Reading a command line's values: numbers with the flag named in the error, the config overrides
// (--strategy, --budget, --branches), and the flags again for the command a dry run suggests.
import type { ConfigOverrides } from '../core/config.js';
import { STRATEGIES, type Strategy } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { MAX_BRANCHES } from '../core/method.js';
import { shellQuote } from '../core/text.js';
import type { Parsed } from './args.js';

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export function readOverrides(v: Parsed['values']): ConfigOverrides {
  const o: ConfigOverrides = {};
  const strategy = str(v.strategy);
  if (strategy !== undefined) {
    if (!(STRATEGIES as readonly string[]).includes(strategy)) {
      throw new UserError(`--strategy must be one of ${STRATEGIES.join(', ')}, got "${strategy}"`);
    }
    o.strategy = strategy as Strategy;
  }
  const budget = str(v.budget);
  if (budget !== undefined) o.budget = positive('--budget', budget);
  const branches = str(v.branches);
  if (branches !== undefined) o.branches = integer('--branches', branches, 1, MAX_BRANCHES);
  return o;
}

export function positive(flag: string, text: string): number {
  const n = /^\s*(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*$/i.test(text) ? Number(text) : Number.NaN;
  if (!(Number.isFinite(n) && n > 0)) {
    throw new UserError(`${flag} must be a number above 0, got "${text}"`);
  }
  return n;
}

export function integer(flag: string, text: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  // Digits only: Number() also reads 0x10, 1e3 and 0b11, which a seed copied from a log must not become.
  const n = /^\s*\d+\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new UserError(
      `${flag} must be a whole number from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ''}, got "${text}"`,
    );
  }
  return n;
}

/** The flags of this command line, for the command that runs what a dry run checked. */
export function argvTail(p: Parsed): string {
  const parts: string[] = [];
  for (const [k, val] of Object.entries(p.values)) {
    if (k === 'dry-run' || val === false || val === undefined) continue;
    for (const x of Array.isArray(val) ? val : [val])
      parts.push(x === true ? `--${k}` : `--${k} ${shellQuote(String(x))}`);
  }
  return parts.length > 0 ? ` ${parts.join(' ')}` : '';
}
