// Checks one request to GitHub's REST API and its response against GitHub's own OpenAPI
// description of the operations forkflush calls (github-subset.json, made by
// scripts/extract-openapi.mjs). The fake GitHub runs every exchange through it.
//
// Types, required fields, enums and lengths are checked strictly. Formats are checked where they
// say something about the data (date-time, date, uri, email, int32); GitHub's own formats
// (repo.nwo, uri-template, ...) are accepted as they are. OpenAPI 3.0's `nullable` becomes a JSON
// Schema type that includes null. A request body is held to a stricter standard than GitHub keeps:
// a field its operation does not list is a violation, since GitHub ignores it without a word
// and a misspelt field would otherwise pass unseen.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import subset from './github-subset.json' with { type: 'json' };

export interface Violation {
  /** GitHub's operation id, e.g. git/create-ref; `unknown` when no operation has the path. */
  operation: string;
  /** Where in the exchange: `request body/tree/0`, `query parameter state`, `response 201 body/object`. */
  where: string;
  /** What is wrong, as the validator says it. */
  what: string;
  /** One line with all of the above and the operation's method and path template. */
  message: string;
}

export interface SentRequest {
  method: string;
  /** The URL's path as sent, still percent-encoded (octokit sends `heads/main` as `heads%2Fmain`). */
  path: string;
  query?: URLSearchParams | Record<string, string>;
  /** The parsed JSON body; undefined (or '') when there is none. */
  body?: unknown;
}

export interface Exchange extends SentRequest {
  status: number;
  responseBody?: unknown;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
interface Schema {
  [k: string]: Json;
}
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema: Schema;
  'x-multi-segment'?: boolean;
}
interface MediaTypes {
  [type: string]: { schema?: Schema };
}
interface ResponseObject {
  $ref?: string;
  content?: MediaTypes;
}
interface Operation {
  operationId: string;
  parameters?: (Parameter | { $ref: string })[];
  requestBody?: { required?: boolean; content: MediaTypes };
  responses: Record<string, ResponseObject>;
}

/** An operation of the subset, found by method and path. */
export interface Route {
  operationId: string;
  method: string;
  template: string;
  /** The path parameters, decoded. */
  params: Record<string, string>;
  operation: Operation;
  /** The operation's parameters, with references resolved. */
  parameters: Parameter[];
}

interface Compiled extends Omit<Route, 'params'> {
  regex: RegExp;
  names: string[];
  literal: number;
}

const spec = subset as unknown as {
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, Schema>;
    parameters: Record<string, Parameter>;
    responses: Record<string, ResponseObject>;
  };
};

const SCHEMA_ID = 'github:';
const MAPS = new Set(['properties', 'patternProperties']);

/**
 * A schema as JSON Schema draft 7 for ajv: `nullable: true` becomes a type (or enum) that admits
 * null, `$ref`s to components point at the components' ids, and, in a request body (`closed`),
 * an object without `additionalProperties` admits only the fields it lists.
 */
function toJsonSchema(node: Json, closed: boolean, names = false): Json {
  if (Array.isArray(node)) return node.map((n) => toJsonSchema(n, closed));
  if (node === null || typeof node !== 'object') return node;
  const out: { [k: string]: Json } = {};
  for (const [k, v] of Object.entries(node)) {
    if (!names && k === '$ref' && typeof v === 'string') {
      out[k] = v.replace('#/components/schemas/', SCHEMA_ID);
    } else {
      out[k] = toJsonSchema(v, closed, !names && MAPS.has(k));
    }
  }
  if (names) return out;
  if (
    closed &&
    out.type === 'object' &&
    out.properties !== undefined &&
    out.additionalProperties === undefined &&
    out.allOf === undefined
  ) {
    out.additionalProperties = false;
  }
  if (out.nullable !== true) return out;
  delete out.nullable;
  if (typeof out.type === 'string') {
    out.type = [out.type, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    return out;
  }
  return { anyOf: [{ type: 'null' }, out] };
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const FORMATS = {
  'date-time': (s: string) => RFC3339.test(s) && !Number.isNaN(Date.parse(s)),
  date: (s: string) => /^\d{4}-\d{2}-\d{2}$/.test(s) && !Number.isNaN(Date.parse(s)),
  uri: (s: string) => URL.canParse(s),
  email: (s: string) => /^[^\s@]+@[^\s@]+$/.test(s),
  int32: { type: 'number' as const, validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 },
  int64: { type: 'number' as const, validate: (n: number) => Number.isInteger(n) },
};

/**
 * Registers the formats of a GitHub description on an ajv (this one's or the webhooks' 2020-12
 * build): checked where they say something about the data, any other accepted as it is.
 */
export function addFormats(on: Pick<Ajv, 'addFormat'>, description: unknown): void {
  for (const [name, f] of Object.entries(FORMATS)) on.addFormat(name, f);
  const formats = new Set<string>();
  JSON.stringify(description, (k, v) => {
    if (k === 'format' && typeof v === 'string') formats.add(v);
    return v;
  });
  for (const f of formats) if (!(f in FORMATS)) on.addFormat(f, true);
}

let ajv: Ajv | null = null;
function validator(): Ajv {
  if (ajv) return ajv;
  // inlineRefs off: the big components (repository, pull-request) compile once, not once per use.
  ajv = new Ajv({
    strict: false,
    allErrors: true,
    inlineRefs: false,
    validateSchema: false,
    code: { optimize: false },
  });
  addFormats(ajv, spec);
  for (const [name, s] of Object.entries(spec.components.schemas)) {
    ajv.addSchema(toJsonSchema(s as Json, false) as object, `${SCHEMA_ID}${name}`);
  }
  return ajv;
}

const compiled = new Map<string, ValidateFunction>();
function check(key: string, schema: Schema, closed: boolean): ValidateFunction {
  let v = compiled.get(key);
  if (!v) {
    v = validator().compile(toJsonSchema(schema as Json, closed) as object);
    compiled.set(key, v);
  }
  return v;
}

function resolve<T>(node: T | { $ref: string }, kind: 'parameters' | 'responses'): T {
  if (typeof node === 'object' && node !== null && '$ref' in node && typeof node.$ref === 'string') {
    const name = node.$ref.replace(`#/components/${kind}/`, '');
    const target = spec.components[kind][name];
    if (!target) throw new Error(`github-subset.json: dangling ${node.$ref}`);
    return target as T;
  }
  return node as T;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

let routes: Compiled[] | null = null;
function allRoutes(): Compiled[] {
  if (routes) return routes;
  routes = [];
  for (const [template, item] of Object.entries(spec.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const parameters = (operation.parameters ?? []).map((p) => resolve<Parameter>(p, 'parameters'));
      const names: string[] = [];
      let literal = 0;
      const source = template
        .split(/(\{[^}]+\})/)
        .map((part) => {
          const m = /^\{(.+)\}$/.exec(part);
          if (!m) {
            literal += part.length;
            return escapeRegExp(part);
          }
          const name = m[1] as string;
          names.push(name);
          const p = parameters.find((x) => x.in === 'path' && x.name === name);
          // A parameter such as a ref or a file path may hold slashes, sent as they are or as %2F.
          return p?.['x-multi-segment'] ? '(.+)' : '([^/]+)';
        })
        .join('');
      routes.push({
        operationId: operation.operationId,
        method: method.toUpperCase(),
        template,
        operation,
        parameters,
        regex: new RegExp(`^${source}$`),
        names,
        literal,
      });
    }
  }
  return routes;
}

/** The operation a request is for: the matching template with the most literal text. */
export function findRoute(method: string, path: string): Route | null {
  let best: { c: Compiled; m: RegExpExecArray } | null = null;
  for (const c of allRoutes()) {
    if (c.method !== method.toUpperCase()) continue;
    const m = c.regex.exec(path);
    if (m && (!best || c.literal > best.c.literal)) best = { c, m };
  }
  if (!best) return null;
  const { c, m } = best;
  const params = Object.fromEntries(c.names.map((n, i) => [n, decodeURIComponent(m[i + 1] as string)]));
  const { operationId, method: verb, template, operation, parameters } = c;
  return { operationId, method: verb, template, params, operation, parameters };
}

/** One ajv error in words; `lister` is what lists the allowed fields (the operation, the schema). */
export function explain(e: ErrorObject, lister = 'the operation'): string {
  const p = e.params as Record<string, unknown>;
  if (e.keyword === 'enum')
    return `${e.message} (${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')})`;
  if (e.keyword === 'type') return `must be ${String(p.type).split(',').join(' or ')}`;
  if (e.keyword === 'additionalProperties')
    return `has ${JSON.stringify(p.additionalProperty)}, which ${lister} does not list`;
  return e.message ?? e.keyword;
}

export function violation(
  route: Pick<Route, 'operationId' | 'method' | 'template'>,
  where: string,
  what: string,
): Violation {
  return {
    operation: route.operationId,
    where,
    what,
    message: `${route.operationId} (${route.method} ${route.template}): ${where}: ${what}`,
  };
}

function schemaViolations(route: Route, where: string, v: ValidateFunction, data: unknown): Violation[] {
  if (v(data)) return [];
  const seen = new Set<string>();
  const out: Violation[] = [];
  for (const e of v.errors ?? []) {
    const at = `${where}${e.instancePath}`;
    const what = explain(e);
    if (seen.has(`${at}\0${what}`)) continue;
    seen.add(`${at}\0${what}`);
    out.push(violation(route, at, what));
  }
  return out;
}

/** A parameter's text as the type its schema asks for, where it reads as one. */
function coerce(text: string, schema: Schema): unknown {
  if ((schema.type === 'integer' || schema.type === 'number') && /^-?\d+(\.\d+)?$/.test(text)) return Number(text);
  if (schema.type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  return text;
}

function jsonSchemaOf(content: MediaTypes | undefined): Schema | undefined {
  if (!content) return undefined;
  return (content['application/json'] ?? Object.entries(content).find(([t]) => t.includes('json'))?.[1])?.schema;
}

const absent = (body: unknown) => body === undefined || body === null || body === '';

/** Checks a request: its path and query parameters and its body. */
export function checkRequest(req: SentRequest): { route: Route | null; violations: Violation[] } {
  const route = findRoute(req.method, req.path);
  if (!route) {
    const unknown = { operationId: 'unknown', method: req.method.toUpperCase(), template: req.path };
    return { route: null, violations: [violation(unknown, 'path', 'no operation of github-subset.json matches')] };
  }
  const out: Violation[] = [];
  const { parameters } = route;
  const query = new URLSearchParams(req.query as Record<string, string> | URLSearchParams | undefined);
  for (const p of parameters) {
    if (p.in !== 'path' && p.in !== 'query') continue;
    const text = p.in === 'path' ? route.params[p.name] : (query.get(p.name) ?? undefined);
    const where = `${p.in} parameter ${p.name}`;
    if (text === undefined) {
      if (p.required) out.push(violation(route, where, 'is required'));
      continue;
    }
    const key = `${route.operationId} ${where}`;
    out.push(...schemaViolations(route, where, check(key, p.schema, false), coerce(text, p.schema)));
  }
  for (const name of new Set(query.keys())) {
    if (!parameters.some((p) => p.in === 'query' && p.name === name)) {
      out.push(violation(route, `query parameter ${name}`, 'is not a parameter of the operation'));
    }
  }
  const body = route.operation.requestBody;
  const schema = jsonSchemaOf(body?.content);
  if (absent(req.body)) {
    if (body?.required) out.push(violation(route, 'request body', 'is required'));
  } else if (!schema) {
    out.push(violation(route, 'request body', 'the operation takes none'));
  } else {
    const v = check(`${route.operationId} request`, schema, true);
    out.push(...schemaViolations(route, 'request body', v, req.body));
  }
  return { route, violations: out };
}

/**
 * Checks a response of a route: its status must be documented (any status of 500 or more is
 * accepted: GitHub may answer so anywhere) and its body must match that status's schema. An
 * undocumented 4xx is accepted with a body like GitHub's basic error. A body that is not JSON
 * (`contentType`: a file under the raw media type) is checked for its status only: GitHub's
 * description lists only the JSON forms (github/rest-api-description#6089).
 */
export function checkResponse(
  route: Route,
  status: number,
  body: unknown,
  contentType = 'application/json',
): Violation[] {
  if (status >= 500) return [];
  const { responses } = route.operation;
  const declared = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
  const where = `response ${status} body`;
  if (!declared) {
    if (status < 400) {
      const known = Object.keys(responses).join(', ');
      return [violation(route, `response ${status}`, `the status is not one the operation answers with (${known})`)];
    }
    const v = check('basic-error', { $ref: '#/components/schemas/basic-error' }, false);
    return schemaViolations(route, where, v, body);
  }
  if (!contentType.includes('json')) return [];
  const schema = jsonSchemaOf(resolve<ResponseObject>(declared, 'responses').content);
  if (!schema) {
    if (status < 300 && !absent(body))
      return [violation(route, where, 'the operation answers this status without one')];
    return [];
  }
  if (absent(body)) return [violation(route, where, 'is missing')];
  return schemaViolations(route, where, check(`${route.operationId} ${status}`, schema, false), body);
}

/** Checks a whole exchange, request and response. */
export function validateExchange(x: Exchange): Violation[] {
  const { route, violations } = checkRequest(x);
  return route ? [...violations, ...checkResponse(route, x.status, x.responseBody)] : violations;
}
