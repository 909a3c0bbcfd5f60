// Checks a webhook payload against GitHub's own OpenAPI description of its webhooks
// (webhooks-subset.json, made by scripts/extract-webhooks.mjs from @octokit/openapi-webhooks).
//
// The description is OpenAPI 3.1, whose schemas are JSON Schema 2020-12 (`type: ['string', 'null']`
// where 3.0 said `nullable`), so ajv's 2020-12 build reads them as they are. Types, required
// fields and enums are checked strictly. Formats are checked where they say something about the
// data (date-time, uri, email, int64); GitHub's own (uri-template, ...) are accepted as they are.
// A field the schema does not list is accepted: GitHub adds fields to payloads without notice.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { addFormats, explain } from './validate.js';
import subset from './webhooks-subset.json' with { type: 'json' };

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const spec = subset as unknown as {
  webhooks: Record<string, { post: { requestBody: { content: Record<string, { schema: Json }> } } }>;
  components: { schemas: Record<string, Json> };
};

const SCHEMA_ID = 'github-webhooks:';
const MAPS = new Set(['properties', 'patternProperties']);

/** A schema with its `$ref`s to components pointing at the components' ids in ajv. */
function withIds(node: Json, names = false): Json {
  if (Array.isArray(node)) return node.map((n) => withIds(n));
  if (node === null || typeof node !== 'object') return node;
  const out: { [k: string]: Json } = {};
  for (const [k, v] of Object.entries(node)) {
    out[k] =
      !names && k === '$ref' && typeof v === 'string'
        ? v.replace('#/components/schemas/', SCHEMA_ID)
        : withIds(v, !names && MAPS.has(k));
  }
  return out;
}

let ajv: Ajv2020 | null = null;
function validator(): Ajv2020 {
  if (ajv) return ajv;
  // inlineRefs off: the big components (repository, user) compile once, not once per use.
  ajv = new Ajv2020({
    strict: false,
    allErrors: true,
    inlineRefs: false,
    validateSchema: false,
    code: { optimize: false },
  });
  addFormats(ajv, spec);
  // Added, not compiled: ajv compiles a component the first time a webhook's schema reaches it.
  for (const [name, s] of Object.entries(spec.components.schemas)) {
    ajv.addSchema(withIds(s) as object, `${SCHEMA_ID}${name}`);
  }
  return ajv;
}

const compiled = new Map<string, ValidateFunction>();
function payloadValidator(key: string): ValidateFunction | null {
  let v = compiled.get(key);
  if (v) return v;
  const schema = spec.webhooks[key]?.post.requestBody.content['application/json']?.schema;
  if (schema === undefined) return null;
  v = validator().compile(withIds(schema) as object);
  compiled.set(key, v);
  return v;
}

/**
 * Checks a webhook payload against GitHub's schema for it. `event` is the X-GitHub-Event header
 * (`issues`, `issue_comment`, `workflow_job`, ...), the action is the payload's `action`: the
 * schema is the description's `<event>-<action>` with hyphens for underscores
 * (`issue_comment` created is `issue-comment-created`), or `<event>` for an event without actions
 * (`ping`). Returns one line per violation, `webhook <key>: body/<path> <what is wrong>`, none
 * when the payload is valid; a webhook the subset does not hold is one violation.
 */
export function checkWebhook(event: string, payload: unknown): string[] {
  const action =
    typeof payload === 'object' && payload !== null && !Array.isArray(payload)
      ? (payload as { action?: unknown }).action
      : undefined;
  const key = (typeof action === 'string' ? `${event}-${action}` : event).replaceAll('_', '-');
  const v = payloadValidator(key);
  if (!v) {
    const what = typeof action === 'string' ? `body/action ${JSON.stringify(action)}` : 'no body/action';
    return [
      `webhook ${key}: not in webhooks-subset.json (X-GitHub-Event ${event}, ${what}); add it to WEBHOOKS in scripts/extract-webhooks.mjs and run it`,
    ];
  }
  if (v(payload)) return [];
  const out = new Set<string>();
  for (const e of v.errors ?? []) out.add(`webhook ${key}: body${e.instancePath} ${explain(e, 'the schema')}`);
  return [...out];
}
