// What GitHub Actions makes of a `workflow_dispatch`: the workflow run, with one job per matrix combination, that the
// fake GitHub then runs. Pure (no I/O); a test fake, not an Actions implementation. Supported:
// - `on` as a string, list or mapping; no `workflow_dispatch` trigger -> GitHub's 422 message. Inputs checked as the
//   REST API does (422 messages): unexpected ones, required ones without a value or default, `choice` values not in
//   `options`, `boolean` values other than true/false. Defaults apply; `inputs.x` is a boolean for boolean inputs, else
//   a string; `github.event.inputs` holds them all as strings.
// - `${{ }}` anywhere in a string, several per string; a value that is exactly one `${{ }}` keeps its type (so a matrix
//   vector, or the whole matrix, may be `${{ fromJSON(inputs.x) }}`).
// - Expressions: 'strings' ('' escapes a quote), numbers, true/false/null; contexts inputs, matrix, secrets, github,
//   env, plus vars and steps (both empty); `a.b`, `a['b']`, `a.*.b`, keys case-insensitive, missing -> null (a missing
//   secret reads ''); ! < <= > >= == != && || ( ) with GitHub's loose comparison (strings case-insensitive, mixed types
//   as numbers; && and || return an operand); fromJSON, toJSON, format, contains, startsWith, endsWith, join. Unknown
//   functions or named-values and syntax errors -> WorkflowError naming the expression.
// - Matrix: product of the vectors, then `exclude` (partial match), then `include` (merged into each combination whose
//   original values it keeps, else a combination of its own). A job whose `if:` is false is left out (GitHub would
//   show it skipped).
// - Job name evaluated with the matrix; without `name` it is the key, and a name without expressions gets the matrix
//   values appended, `key (a, b)`. `timeout-minutes` (default 360), permissions (the job's, else the workflow's), the
//   workflow's `concurrency`. Steps: `uses` as written, `name`/`run`/`with`/`env` evaluated, `env` being the step's
//   whole environment (workflow env < job env < step env).
// Not supported: status functions and hashFiles, the needs/job/runner/strategy contexts, limits on which contexts a
// key may use, step `if`/`id`, `needs` ordering, job-level concurrency, reusable workflows, `defaults`, services,
// containers; number and environment inputs are taken as strings. Invalid YAML throws the yaml package's error.
import { parse } from 'yaml';

export interface DispatchedJob {
  /** The job's key in `jobs:` */
  key: string;
  /** The evaluated job name (as GitHub shows it and sends as workflow_job.name). */
  name: string;
  matrix: Record<string, unknown>;
  /** `timeout-minutes`, 360 by default like GitHub. */
  timeoutMinutes: number;
  permissions: Record<string, string> | string | undefined;
  /** With their expressions evaluated. */
  steps: Array<{
    uses?: string;
    run?: string;
    name?: string;
    with: Record<string, string>;
    env: Record<string, string>;
  }>;
}
export interface DispatchedRun {
  name: string;
  displayTitle: string;
  jobs: DispatchedJob[];
  concurrencyGroup?: string;
  cancelInProgress: boolean;
}
export class WorkflowError extends Error {}

type Obj = Record<string, unknown>;
type Node = (ctx: Obj) => unknown;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (v: unknown): Obj => (isObj(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
/** A value as a string, the way GitHub interpolates it. */
const str = (v: unknown): string => (v == null ? '' : Array.isArray(v) ? 'Array' : isObj(v) ? 'Object' : String(v));
const lower = (v: unknown) => str(v).toLowerCase();
function num(v: unknown): number {
  if (typeof v === 'string') return v.trim() === '' ? 0 : Number(v);
  return v == null || typeof v === 'boolean' || typeof v === 'number' ? Number(v ?? 0) : Number.NaN;
}
const truthy = (v: unknown) => !(v === false || v === 0 || v === '' || v == null || Number.isNaN(v));
const kind = (v: unknown) => (v == null ? 'null' : typeof v);
function eq(a: unknown, b: unknown): boolean {
  if (kind(a) !== kind(b)) return kind(a) !== 'object' && kind(b) !== 'object' && num(a) === num(b);
  return typeof a === 'string' ? a.toLowerCase() === lower(b) : (a ?? null) === (b ?? null);
}
function order(op: string, a: unknown, b: unknown): boolean {
  const text = typeof a === 'string' && typeof b === 'string';
  // Strings compare as strings, anything else as numbers (NaN compares false).
  const [x, y] = (text ? [lower(a), lower(b)] : [num(a), num(b)]) as [number, number];
  return op === '<' ? x < y : op === '<=' ? x <= y : op === '>' ? x > y : x >= y;
}

const FILTERED = new WeakSet<unknown[]>(); // results of `.*`, over which a property access maps
function filtered(values: unknown[]): unknown[] {
  FILTERED.add(values);
  return values;
}
function get(o: unknown, key: unknown): unknown {
  if (Array.isArray(o) && FILTERED.has(o)) return filtered(o.map((x) => get(x, key)).filter((x) => x !== null));
  if (Array.isArray(o)) return typeof key === 'number' ? (o[Math.trunc(key)] ?? null) : null;
  const found =
    Object.keys(obj(o)).find((k) => k === key) ?? Object.keys(obj(o)).find((k) => k.toLowerCase() === lower(key));
  return found === undefined ? null : (obj(o)[found] ?? null);
}
const star = (o: unknown) => filtered(Array.isArray(o) ? [...o] : Object.values(obj(o)));

function format(f: unknown, ...args: unknown[]): string {
  return str(f).replace(/\{\{|\}\}|\{(\d+)\}/g, (m, i?: string) => {
    if (i === undefined) return m.slice(1);
    if (Number(i) >= args.length) throw new Error(`format() has no argument {${i}}`);
    return str(args[Number(i)]);
  });
}
const FUNCTIONS: Record<string, [min: number, max: number, fn: (...args: unknown[]) => unknown]> = {
  contains: [2, 2, (s, x) => (Array.isArray(s) ? s.some((e) => eq(e, x)) : lower(s).includes(lower(x)))],
  startswith: [2, 2, (s, x) => lower(s).startsWith(lower(x))],
  endswith: [2, 2, (s, x) => lower(s).endsWith(lower(x))],
  format: [1, Number.POSITIVE_INFINITY, format],
  join: [1, 2, (a, sep = ',') => (Array.isArray(a) ? a.map(str).join(str(sep)) : str(a))],
  tojson: [1, 1, (v) => JSON.stringify(v ?? null, null, 2)],
  fromjson: [1, 1, (v) => JSON.parse(str(v))],
};

// A number, a string, an identifier, an operator, or anything else (an error).
const TOKEN =
  /\s*(?:(-?(?:0x[\da-f]+|(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?))|('(?:[^']|'')*')|([a-z_][\w-]*)|(==|!=|<=|>=|&&|\|\||[!<>()[\].,*])|(\S))/giy;

/** Parses one expression (the text inside `${{ }}`) into a function of the contexts. */
function compile(src: string): Node {
  const fail = (what: string): never => {
    throw new WorkflowError(`Invalid expression '${src.trim()}': ${what}`);
  };
  const toks = [...src.matchAll(TOKEN)].map((m) => {
    const k = m.slice(1).findIndex((g) => g !== undefined);
    if (k === 4) fail(`unexpected '${m[5]}' at position ${m.index + m[0].length}`);
    return { k: ['num', 'str', 'id', 'op'][k], v: m[k + 1] as string };
  });
  let i = 0;
  const eat = (v: string) => {
    if (toks[i]?.k !== 'op' || toks[i]?.v !== v) return false;
    i++;
    return true;
  };
  const take = (v: string) => eat(v) || fail(`expected '${v}' after '${toks[i - 1]?.v ?? ''}'`);
  const binary = (next: () => Node, ops: string[], make: (op: string, a: Node, b: Node) => Node) => (): Node => {
    let left = next();
    for (let op = ops.find(eat); op; op = ops.find(eat)) left = make(op, left, next());
    return left;
  };
  const compare = (op: string, a: Node, b: Node): Node =>
    op === '==' || op === '!=' ? (c) => eq(a(c), b(c)) === (op === '==') : (c) => order(op, a(c), b(c));
  const relational = binary(unary, ['<=', '>=', '<', '>'], compare);
  const equality = binary(relational, ['==', '!='], compare);
  const and = binary(equality, ['&&'], (_, a, b) => (c) => (truthy(a(c)) ? b(c) : a(c)));
  const or = binary(and, ['||'], (_, a, b) => (c) => (truthy(a(c)) ? a(c) : b(c)));

  function unary(): Node {
    if (!eat('!')) return postfix();
    const operand = unary();
    return (c) => !truthy(operand(c));
  }
  function postfix(): Node {
    for (let node = primary(); ; ) {
      const base = node;
      if (eat('.')) {
        const t = toks[i++];
        if (t?.v !== '*' && t?.k !== 'id') return fail(`expected a property name after '.'`);
        node = t.v === '*' ? (c) => star(base(c)) : (c) => get(base(c), t.v);
      } else if (eat('[')) {
        const key = or();
        take(']');
        node = (c) => get(base(c), key(c));
      } else return node;
    }
  }
  function primary(): Node {
    const t = toks[i++] ?? fail('unexpected end');
    const literals: Obj = { true: true, false: false, null: null };
    if (t.k === 'num') return () => (t.v.startsWith('-') ? -Number(t.v.slice(1)) : Number(t.v));
    if (t.k === 'str') return () => t.v.slice(1, -1).replaceAll("''", "'");
    if (t.k === 'op' && t.v === '(') {
      const inner = or();
      take(')');
      return inner;
    }
    if (t.k !== 'id') return fail(`unexpected '${t.v}'`);
    if (eat('(')) {
      const [min, max, fn] = FUNCTIONS[t.v.toLowerCase()] ?? fail(`unknown function '${t.v}'`);
      const args: Node[] = [];
      while (!eat(')')) {
        if (args.length) take(',');
        args.push(or());
      }
      if (args.length < min || args.length > max) fail(`wrong number of arguments to ${t.v}()`);
      return (c) => fn(...args.map((a) => a(c)));
    }
    if (t.v in literals) return () => literals[t.v];
    return (c) => (t.v.toLowerCase() in c ? c[t.v.toLowerCase()] : fail(`unrecognized named-value '${t.v}'`));
  }

  const root = or();
  if (i < toks.length) fail(`unexpected '${toks[i]?.v}'`);
  return (c) => {
    try {
      return root(c);
    } catch (e) {
      if (e instanceof WorkflowError) throw e;
      throw new WorkflowError(`Error evaluating '${src.trim()}': ${(e as Error).message}`);
    }
  };
}

/** Evaluates the `${{ }}` in a string; a string that is exactly one `${{ }}` gives the expression's value. */
function interpolate(text: string, ctx: Obj): unknown {
  // Text, expression, text, ..., text; an expression ends at the first `}}` outside its string literals.
  const parts = text.split(/\$\{\{((?:[^'}]|'(?:[^']|'')*'|\}(?!\}))*)\}\}/);
  if (parts.some((p, n) => n % 2 === 0 && p.includes('${{'))) throw new WorkflowError(`Unclosed '\${{' in '${text}'`);
  if (parts.length === 3 && !parts[0]?.trim() && !parts[2]?.trim()) return compile(parts[1] as string)(ctx);
  return parts.map((p, n) => (n % 2 ? str(compile(p)(ctx)) : p)).join('');
}
/** Evaluates the expressions in a YAML value, deeply. */
function resolve(node: unknown, ctx: Obj): unknown {
  if (typeof node === 'string') return interpolate(node, ctx);
  if (Array.isArray(node)) return node.map((n) => resolve(n, ctx));
  if (isObj(node)) return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, resolve(v, ctx)]));
  return node ?? null;
}
const strings = (node: unknown, ctx: Obj): Record<string, string> =>
  Object.fromEntries(Object.entries(obj(node)).map(([k, v]) => [k, str(resolve(v, ctx))]));
const optional = (node: unknown, ctx: Obj) => (node === undefined ? undefined : str(resolve(node, ctx)));

function expandMatrix(node: unknown, ctx: Obj): Obj[] {
  if (node === undefined) return [{}];
  const matrix = resolve(node, ctx);
  if (!isObj(matrix)) throw new WorkflowError(`The matrix is not a mapping: ${JSON.stringify(matrix)}`);
  const { include, exclude, ...vectors } = matrix;
  let combos: Obj[] = Object.keys(vectors).length ? [{}] : [];
  for (const [key, values] of Object.entries(vectors)) {
    if (!Array.isArray(values) || !values.length) throw new WorkflowError(`Matrix vector '${key}' has no values`);
    combos = combos.flatMap((c) => values.map((v) => ({ ...c, [key]: v })));
  }
  const matches = (c: Obj, pattern: Obj) => Object.entries(pattern).every(([k, v]) => same(c[k], v));
  combos = combos.filter((c) => !arr(exclude).some((e) => matches(c, obj(e))));
  const added: Obj[] = [];
  for (const extra of arr(include).map(obj)) {
    const fits = combos.filter((c) => Object.keys(vectors).every((k) => !(k in extra) || same(extra[k], c[k])));
    for (const c of fits) Object.assign(c, extra);
    if (!fits.length) added.push({ ...extra });
  }
  if (!combos.length && !added.length) throw new WorkflowError('The matrix has no combinations');
  return [...combos, ...added];
}

function checkInputs(declared: Obj, given: Record<string, string>): Obj {
  const unexpected = Object.keys(given).filter((k) => !(k in declared));
  if (unexpected.length) throw new WorkflowError(`Unexpected inputs provided: ${JSON.stringify(unexpected)}`);
  const values: Obj = {};
  for (const [key, spec] of Object.entries(declared).map(([k, s]) => [k, obj(s)] as const)) {
    const value = given[key] ?? (spec.default === undefined ? undefined : str(spec.default));
    if (value === undefined && spec.required === true) throw new WorkflowError(`Required input '${key}' not provided`);
    const allowed =
      spec.type === 'boolean' ? ['true', 'false'] : spec.type === 'choice' ? arr(spec.options).map(str) : [];
    if (value !== undefined && allowed.length && !allowed.includes(value)) {
      const why = spec.type === 'boolean' ? 'is not a boolean' : 'not in the list of allowed values';
      throw new WorkflowError(`Provided value '${value}' for input '${key}' ${why}`);
    }
    values[key] = spec.type === 'boolean' ? value === 'true' : (value ?? '');
  }
  return values;
}

/** The workflow run GitHub makes of a `workflow_dispatch` of this workflow file with these inputs. */
export function dispatchWorkflow(
  yamlText: string,
  inputs: Record<string, string>,
  context: { secrets?: Record<string, string>; github?: Record<string, unknown> } = {},
): DispatchedRun {
  const doc = obj(parse(yamlText));
  const triggers = typeof doc.on === 'string' ? [doc.on] : Array.isArray(doc.on) ? doc.on : Object.keys(obj(doc.on));
  if (!triggers.includes('workflow_dispatch'))
    throw new WorkflowError("Workflow does not have 'workflow_dispatch' trigger");
  const values = checkInputs(obj(obj(obj(doc.on).workflow_dispatch).inputs), inputs);
  const given = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, str(v)]));
  const event = { inputs: given, ...obj(context.github?.event) };
  const github = { event_name: 'workflow_dispatch', ...context.github, event };
  const base: Obj = { inputs: values, secrets: context.secrets ?? {}, github, vars: {}, steps: {} };
  const env = strings(doc.env, { ...base, env: {} });
  const name = str(doc.name ?? context.github?.workflow);

  const jobs: DispatchedJob[] = [];
  for (const [key, spec] of Object.entries(obj(doc.jobs))) {
    const job = obj(spec);
    const bare = typeof job.if === 'string' && !job.if.includes('${{'); // `if:` may omit the `${{ }}`
    if (!truthy(resolve(bare ? `\${{ ${job.if} }}` : (job.if ?? true), { ...base, env }))) continue;
    for (const matrix of expandMatrix(obj(job.strategy).matrix, { ...base, env })) {
      const ctx = { ...base, matrix, env };
      const jobEnv = { ...env, ...strings(job.env, ctx) };
      const shown = Object.values(matrix).map(str);
      const appended = shown.length && !str(job.name).includes('${{') ? ` (${shown.join(', ')})` : '';
      const permissions = job.permissions ?? doc.permissions;
      jobs.push({
        key,
        name: (optional(job.name, ctx) ?? key) + appended,
        matrix,
        timeoutMinutes: job['timeout-minutes'] === undefined ? 360 : num(resolve(job['timeout-minutes'], ctx)),
        permissions: isObj(permissions) ? strings(permissions, ctx) : (permissions as string | undefined),
        steps: arr(job.steps).map((s) => {
          const step = obj(s);
          const stepEnv = { ...jobEnv, ...strings(step.env, { ...ctx, env: jobEnv }) };
          const at = { ...ctx, env: stepEnv };
          const texts = {
            uses: step.uses === undefined ? undefined : str(step.uses),
            run: optional(step.run, at),
            name: optional(step.name, at),
          };
          const present = Object.entries(texts).filter(([, v]) => v !== undefined);
          return { ...Object.fromEntries(present), with: strings(step.with, at), env: stepEnv };
        }),
      });
    }
  }
  const concurrency = doc.concurrency;
  const cancel = resolve(obj(concurrency)['cancel-in-progress'] ?? false, base);
  const group = isObj(concurrency) ? concurrency.group : concurrency;
  return {
    name,
    displayTitle: doc['run-name'] === undefined ? name : str(resolve(doc['run-name'], base)),
    jobs,
    ...(group !== undefined && { concurrencyGroup: str(resolve(group, base)) }),
    cancelInProgress: cancel === true || cancel === 'true',
  };
}
