// The `compare:` key of .github/autoresearch.yml and the variants of a comparison: a variant is a
// name plus config keys to change (`fork.at: [0.5]`). config.ts validates the key with this schema;
// so that module can load this one first, this one imports nothing of config.ts but types.
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { z } from 'zod';
import { MAX_COMPARE_SEEDS, STRATEGIES } from '../method.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$/;
const NAME_RULE = 'must be a short name: letters, digits, ".", "_" or "-", at most 40';

const variantSchema = z.strictObject({
  name: z.string().regex(NAME, { message: NAME_RULE }).describe('The variant, as the reports name it.'),
  set: z
    .record(z.string(), z.unknown())
    .default({})
    .describe('Config keys this variant changes, dotted for nested ones: {"fork.at": [0.5]}.'),
});

export const compareSchema = z
  .strictObject({
    strategies: z
      .array(z.enum(STRATEGIES))
      .min(1)
      .optional()
      .describe('Strategies `forkflush compare` runs; default all five.'),
    seeds: z
      .number()
      .int()
      .min(1)
      .max(MAX_COMPARE_SEEDS)
      .optional()
      .describe('Runs per strategy and variant, one seed each; seed i is the same for every strategy.'),
    variants: z
      .array(variantSchema)
      .min(1)
      .optional()
      .superRefine((vs, ctx) => {
        const seen = new Set<string>();
        vs?.forEach((v, i) => {
          if (seen.has(v.name))
            ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `names the variant "${v.name}" twice` });
          seen.add(v.name);
        });
      })
      .describe('Configs to compare, each a name and the keys it changes (e.g. two schedules, or two values of K).'),
  })
  .describe('forkflush compare: strategies x variants x seeds at equal budget.');

export interface Variant {
  name: string;
  /** Dotted config keys and their values. */
  set: Record<string, unknown>;
}

/** The variant of a comparison without variants: the config as it is. */
export const AS_IS: Variant = { name: 'as-is', set: {} };

/**
 * Keys a variant may not change, each with the reason: what would make its scores or its spend
 * incomparable with the others', or what compare itself sets.
 */
export const FIXED_KEYS: Readonly<Record<string, string>> = {
  grader: 'scores from different graders cannot be compared',
  task: 'runs of different tasks cannot be compared',
  'budget.total': 'every run of a compare spends the same budget (use --budget)',
  'budget.unit': 'every run of a compare spends the same budget (use --budget)',
  strategy: 'strategies are the other axis of the comparison (use --strategies)',
  compare: 'a variant is one run config',
  $schema: 'it is for editors only',
};

/** The dotted keys of a variant's values, objects flattened: {fork: {at: x}} sets fork.at. */
export function leafKeys(set: Record<string, unknown>): string[] {
  const out: string[] = [];
  const walk = (prefix: string, v: unknown) => {
    if (isPlainObject(v) && Object.keys(v).length > 0) {
      for (const [k, x] of Object.entries(v)) walk(`${prefix}.${k}`, x);
    } else out.push(prefix);
  };
  for (const [k, v] of Object.entries(set)) walk(k, v);
  return out;
}

/** Why a variant may not be used (a key it must not change), or null. */
export function fixedKeyProblem(v: Variant): string | null {
  for (const key of leafKeys(v.set)) {
    for (const [fixed, why] of Object.entries(FIXED_KEYS)) {
      if (key === fixed || key.startsWith(`${fixed}.`) || fixed.startsWith(`${key}.`))
        return `variant ${v.name}: ${key} cannot vary: ${why}`;
    }
  }
  return null;
}

/**
 * `--variant NAME=KEY=VALUE,KEY=VALUE`: values are YAML (`[0.5]`, `8`, `true`); commas inside
 * brackets, braces or quotes belong to the value. `NAME=` alone is the config as it is.
 */
export function parseVariantFlag(text: string): Variant | { problem: string } {
  const eq = text.indexOf('=');
  const name = eq < 0 ? text : text.slice(0, eq);
  const usage = 'give --variant NAME=KEY=VALUE,KEY=VALUE (e.g. --variant one-fork=fork.at=[0.5])';
  if (!NAME.test(name)) return { problem: `--variant "${text}": the name ${NAME_RULE}; ${usage}` };
  const rest = eq < 0 ? '' : text.slice(eq + 1);
  const set: Record<string, unknown> = {};
  for (const item of splitTopLevel(rest)) {
    const at = item.indexOf('=');
    const key = at < 0 ? item : item.slice(0, at).trim();
    if (at < 0 || !/^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/.test(key))
      return { problem: `--variant "${text}": "${item}" is not KEY=VALUE; ${usage}` };
    try {
      set[key] = parseYaml(item.slice(at + 1));
    } catch (e) {
      return { problem: `--variant "${text}": the value of ${key} is not valid YAML (${(e as Error).message})` };
    }
  }
  return { name, set };
}

function splitTopLevel(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let current = '';
  for (const ch of text) {
    if (quote) {
      if (ch === quote) quote = null;
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '[' || ch === '{') depth++;
    else if (ch === ']' || ch === '}') depth--;
    else if (ch === ',' && depth === 0) {
      out.push(current);
      current = '';
      continue;
    }
    current += ch;
  }
  if (current.trim() !== '') out.push(current);
  return out.map((s) => s.trim()).filter((s) => s !== '');
}

/**
 * A variant's config, as YAML text: the user's config (its mapping, parsed) with the variant's
 * keys set (objects merged key by key), the `compare:` key dropped, and `also` protected: the
 * user's config file, which the variant's file no longer is.
 */
export function variantConfigText(raw: Record<string, unknown>, v: Variant, alsoProtected: string[]): string {
  const out = structuredClone(raw);
  delete out.compare;
  for (const [key, value] of Object.entries(v.set)) setAt(out, key.split('.'), value);
  if (alsoProtected.length > 0) {
    const grader = isPlainObject(out.grader) ? out.grader : {};
    const list = Array.isArray(grader.protected) ? [...grader.protected] : [];
    for (const p of alsoProtected) if (!list.includes(p)) list.push(p);
    out.grader = { ...grader, protected: list };
  }
  return `# forkflush compare: variant ${v.name} of the task's config (written by forkflush; do not edit)\n${stringifyYaml(out)}`;
}

/** The config's mapping (null: not a mapping, or not YAML: parseConfig says why). */
export function configMapping(text: string): Record<string, unknown> | null {
  try {
    const raw: unknown = parseYaml(text);
    return isPlainObject(raw) ? raw : null;
  } catch {
    return null;
  }
}

function setAt(target: Record<string, unknown>, path: string[], value: unknown): void {
  const [head, ...rest] = path as [string, ...string[]];
  if (rest.length === 0) {
    const old = target[head];
    target[head] = isPlainObject(old) && isPlainObject(value) ? merge(old, value) : value;
    return;
  }
  const next = isPlainObject(target[head]) ? (target[head] as Record<string, unknown>) : {};
  target[head] = next;
  setAt(next, rest, value);
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = isPlainObject(out[k]) && isPlainObject(v) ? merge(out[k], v) : v;
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
