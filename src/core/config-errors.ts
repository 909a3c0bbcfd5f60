// The config's errors in a person's words, each at its place in the YAML file: a located line per
// zod issue ("file:line:col: key must ..., got ..."; "unknown key; did you mean ...? Valid keys:
// ..."). It reads only zod's public API (issues, `shape`, `unwrap()`, `in`, `options`) and the
// wording the schema's checks carry (config.ts).
import { isMap, isPair, isScalar, type Node as YamlNode } from 'yaml';
import { z } from 'zod';
import { closest, editDistance } from './text.js';

export type Locate = (path: PropertyKey[], key?: string) => string;

/** Whether a message is a predicate about the value (see above), rather than a whole sentence. */
function isPredicate(message: string): boolean {
  return /^(must|names) /.test(message);
}

export function describeIssue(
  issue: z.core.$ZodIssue,
  input: unknown,
  locate: Locate,
  validKeysAt: (path: readonly PropertyKey[]) => string[],
): string {
  const path = issue.path;
  const name = formatPath(path);
  const found = valueAt(input, path);
  // YAML's .inf and .nan (and 1e400) are numbers JSON writes as null.
  const got =
    found === undefined
      ? 'nothing'
      : typeof found === 'number' && !Number.isFinite(found)
        ? `${found}, which is not a finite number`
        : JSON.stringify(found);
  switch (issue.code) {
    case 'unrecognized_keys': {
      const valid = validKeysAt(path);
      return issue.keys
        .map((key) => {
          const full = formatPath([...path, key]);
          const guess = closest(key, valid);
          // A key of a section written at the top (`branches:` for fork.branches).
          const home = path.length === 0 ? valid.find((s) => validKeysAt([s]).includes(key)) : undefined;
          const hint = guess
            ? `; did you mean "${guess}"?`
            : home
              ? `; it belongs in ${home}: (${home}: {${key}: ...}).`
              : '.';
          return `${locate(path, key)}: unknown key "${full}"${hint} Valid keys${name ? ` of ${name}` : ''}: ${valid.join(', ')}`;
        })
        .join('\n');
    }
    case 'invalid_union': {
      // The alternative the value was meant for: the one that did not fail on the value's type alone.
      const alternatives = issue.errors.filter((a) => a.length > 0);
      const meant = alternatives.find((a) => !a.every((i) => i.path.length === 0 && wrongType(i, found)));
      if (!meant) {
        const choice = alternatives.flat().find((i) => i.path.length === 0 && i.code === 'invalid_value');
        const hint = choice ? didYouMean(choice, found) : '';
        return `${locate(path)}: ${name} must be ${unionTypes(alternatives)}, got ${got}${hint}`;
      }
      return meant
        .map((i) => describeIssue({ ...i, path: [...path, ...i.path] } as z.core.$ZodIssue, input, locate, validKeysAt))
        .join('\n');
    }
    case 'invalid_type':
      if (found === undefined) return `${locate(path.slice(0, -1))}: ${name} is required (${expected(issue.expected)})`;
      break;
    case 'custom':
      // The checks across fields say it all, and where.
      if (!isPredicate(issue.message)) return `${locate(path)}: ${issue.message}`;
      break;
  }
  // The schema's own words for the value, or ours for what zod checked.
  const rule = isPredicate(issue.message) ? issue.message : ruleOf(issue);
  return rule === undefined
    ? `${locate(path)}: ${name}: ${issue.message}`
    : `${locate(path)}: ${name} ${rule}, got ${got}${didYouMean(issue, found)}`;
}

/** For a misspelt choice ("minimise", "token"): the valid one it is closest to. */
function didYouMean(issue: z.core.$ZodIssue, found: unknown): string {
  if (issue.code !== 'invalid_value' || typeof found !== 'string') return '';
  const choices = issue.values.filter((v): v is string => typeof v === 'string');
  const guess = closest(found, choices);
  // Stricter than for keys: a short word is near every short choice ("on" is two edits from "off").
  const near =
    guess !== undefined &&
    editDistance(found.toLowerCase(), guess.toLowerCase()) <= Math.max(1, Math.floor(found.length / 3));
  return guess && near && guess !== found ? `; did you mean "${guess}"?` : '';
}

/** What a value must be, in our words, for an issue the schema did not word itself. */
function ruleOf(issue: z.core.$ZodIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      return `must be ${expected(issue.expected)}`;
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'too_small':
    case 'too_big':
      return rangeText(issue);
    case 'invalid_format':
      return issue.message;
    default:
      return undefined;
  }
}

/** Whether an issue of a union's alternative says only that the value is of another kind. */
function wrongType(issue: z.core.$ZodIssue, found: unknown): boolean {
  if (issue.code === 'invalid_type') return true;
  // An enum of strings refuses a mapping with invalid_value: a mismatch of kind all the same.
  return issue.code === 'invalid_value' && !issue.values.some((v) => typeof v === typeof found);
}

function rangeText(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig): string {
  const small = issue.code === 'too_small';
  const bound = Number(small ? issue.minimum : issue.maximum);
  if (issue.origin === 'string' && small && bound <= 1) return 'must not be empty';
  if (issue.origin === 'string') return `must have ${small ? 'at least' : 'at most'} ${bound} characters`;
  if (issue.origin === 'array') return `must have ${small ? 'at least' : 'at most'} ${bound} items`;
  if (small) return issue.inclusive ? `must be at least ${bound}` : `must be above ${bound}`;
  return issue.inclusive ? `must be at most ${bound}` : `must be below ${bound}`;
}

function unionTypes(alternatives: z.core.$ZodIssue[][]): string {
  const words = alternatives.flatMap((a) =>
    a.flatMap((i) =>
      i.code === 'invalid_value'
        ? i.values.map((v) => JSON.stringify(v))
        : i.code === 'invalid_type'
          ? [expected(i.expected)]
          : [],
    ),
  );
  const unique = [...new Set(words)];
  return unique.length < 2 ? (unique[0] ?? 'something else') : `${unique.slice(0, -1).join(', ')}, or ${unique.at(-1)}`;
}

function expected(type: string): string {
  const names: Record<string, string> = {
    string: 'a string',
    number: 'a number',
    int: 'a whole number',
    array: 'a list',
    object: 'a mapping',
    boolean: 'true or false',
  };
  return names[type] ?? type;
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

function valueAt(v: unknown, path: readonly PropertyKey[]): unknown {
  let cur = v;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[p];
  }
  return cur;
}

/**
 * The mapping a schema accepts, if any: the object itself, or the one inside a default, an optional,
 * a transform or a union (zod's public accessors only).
 */
export function mappingOf(schema: z.core.$ZodType): z.ZodObject | undefined {
  if (schema instanceof z.ZodObject) return schema;
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional || schema instanceof z.ZodNullable)
    return mappingOf(schema.unwrap());
  if (schema instanceof z.ZodPipe) return mappingOf(schema.in);
  if (schema instanceof z.ZodUnion) {
    for (const option of schema.options) {
      const object = mappingOf(option);
      if (object) return object;
    }
  }
  return undefined;
}

/** The source offset of the node at a path, or of the key itself; falls back to the nearest parent. */
export function findOffset(root: YamlNode | null, path: readonly PropertyKey[], key?: string): number {
  let node: YamlNode | null = root;
  let offset = node?.range?.[0] ?? 0;
  const steps = key === undefined ? path : [...path, key];
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i];
    if (!node || !('items' in node)) break;
    const items = (node as { items: unknown[] }).items;
    let next: YamlNode | null = null;
    if (isMap(node)) {
      const pair = items.find((p) => isPair(p) && isScalar(p.key) && p.key.value === step);
      if (pair && isPair(pair)) {
        const keyNode = pair.key as YamlNode;
        // For an unknown key point at the key; otherwise at the value.
        if (i === steps.length - 1 && key !== undefined) return keyNode.range?.[0] ?? offset;
        next = (pair.value as YamlNode | null) ?? null;
        offset = next?.range?.[0] ?? keyNode.range?.[0] ?? offset;
      }
    } else if (typeof step === 'number') {
      next = (items[step] as YamlNode | undefined) ?? null;
      if (next?.range) offset = next.range[0];
    }
    node = next;
  }
  return offset;
}
