// Extracts from GitHub's OpenAPI description of its webhooks (@octokit/openapi-webhooks, 4.8 MB)
// the payload schemas of the events forkflush receives, with every component they reach, into
// test/github/openapi/webhooks-subset.json: the tests check webhook payloads against it
// (test/github/openapi/webhooks.ts).
//
//   node scripts/extract-webhooks.mjs          writes the subset
//   node scripts/extract-webhooks.mjs --check  exits 1 if the committed subset differs from a fresh one
//
// Exit code 3 means @octokit/openapi-webhooks is not installed. The subset keeps what validation
// needs (each webhook's operation id and payload schema, the components the schemas reach) and
// drops descriptions, examples, titles, defaults and GitHub's extensions, and the webhooks' header
// parameters and responses; keys are sorted and the text formatted as biome formats JSON, so the
// same input gives the same bytes.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The webhooks forkflush's tests check, keyed as GitHub's description keys them: the X-GitHub-Event
 * name and the payload's action, with hyphens (`issue_comment` created is `issue-comment-created`);
 * `ping` has no action.
 */
export const WEBHOOKS = [
  'check-run-completed',
  'check-run-created',
  'installation-created',
  'issue-comment-created',
  'issues-closed',
  'issues-labeled',
  'issues-reopened',
  'issues-unlabeled',
  'ping',
  'pull-request-closed',
  'pull-request-labeled',
  'pull-request-opened',
  'workflow-job-completed',
  'workflow-job-in-progress',
  'workflow-job-queued',
  'workflow-run-completed',
  'workflow-run-requested',
];

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const OUTPUT = join(ROOT, 'test/github/openapi/webhooks-subset.json');
const SOURCE = '@octokit/openapi-webhooks/generated/api.github.com.json';
// Keywords that document rather than constrain (ajv does nothing with them as it is set up).
// Dropped wherever they are keywords; inside a schema's `properties` they are property names and stay.
const DROPPED = new Set([
  'default',
  'deprecated',
  'description',
  'example',
  'examples',
  'externalDocs',
  'readOnly',
  'summary',
  'title',
  'x-github',
  'x-octokit',
]);

/** Copies a node without the dropped keys; `names` says that its keys are names, not keywords. */
function prune(node, names = false) {
  if (Array.isArray(node)) return node.map((n) => prune(n));
  if (node === null || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (!names && DROPPED.has(k)) continue;
    out[k] = prune(v, !names && (k === 'properties' || k === 'patternProperties'));
  }
  return out;
}

function sortKeys(node) {
  if (Array.isArray(node)) return node.map(sortKeys);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.keys(node)
      .sort()
      .map((k) => [k, sortKeys(node[k])]),
  );
}

/** The subset of `spec` holding the payload schemas of `webhooks` and every schema they reach. */
export function extract(spec, webhooks, sourceVersion) {
  const missing = webhooks.filter((w) => spec.webhooks?.[w]?.post === undefined);
  if (missing.length > 0) throw new Error(`not in GitHub's webhooks description: ${missing.join(', ')}`);
  const out = {};
  for (const key of webhooks) {
    const { operationId, requestBody } = spec.webhooks[key].post;
    const schema = requestBody?.content?.['application/json']?.schema;
    if (schema === undefined) throw new Error(`webhook ${key} has no application/json payload schema`);
    out[key] = { post: { operationId, requestBody: { content: { 'application/json': { schema: prune(schema) } } } } };
  }

  // Follow every $ref ("#/components/schemas/<name>") from the payloads, transitively.
  const schemas = {};
  const pending = [out];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      pending.push(...node);
      continue;
    }
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') {
        const m = /^#\/components\/schemas\/([^/]+)$/.exec(v);
        if (!m) throw new Error(`unsupported $ref ${v}`);
        const name = m[1];
        if (schemas[name] !== undefined) continue;
        const target = spec.components.schemas[name];
        if (target === undefined) throw new Error(`dangling $ref ${v}`);
        schemas[name] = prune(target);
        pending.push(schemas[name]);
      } else pending.push(v);
    }
  }
  return sortKeys({
    openapi: spec.openapi,
    info: {
      title: `${spec.info.title}: the webhooks forkflush's tests check`,
      version: spec.info.version,
      'x-source': `${SOURCE} from @octokit/openapi-webhooks ${sourceVersion}; regenerate with node scripts/extract-webhooks.mjs, do not edit`,
    },
    webhooks: out,
    components: { schemas },
  });
}

/** The subset as the committed file's text: biome's JSON formatting under the repository's config. */
export function render(subset) {
  const biome = join(ROOT, 'node_modules/.bin/biome');
  return execFileSync(biome, ['format', `--stdin-file-path=${OUTPUT}`], {
    cwd: ROOT,
    input: `${JSON.stringify(subset)}\n`,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
}

function main() {
  const require = createRequire(import.meta.url);
  let specPath;
  try {
    specPath = require.resolve(SOURCE);
  } catch {
    console.error(`extract-webhooks: ${SOURCE} is not installed (npm ci installs it as a dev dependency)`);
    process.exit(3);
  }
  const { version } = JSON.parse(readFileSync(join(dirname(specPath), '../package.json'), 'utf8'));
  const spec = JSON.parse(readFileSync(specPath, 'utf8'));
  const text = render(extract(spec, WEBHOOKS, version));
  const rel = 'test/github/openapi/webhooks-subset.json';
  if (process.argv.includes('--check')) {
    let committed = '';
    try {
      committed = readFileSync(OUTPUT, 'utf8');
    } catch {}
    if (committed !== text) {
      console.error(`extract-webhooks: ${rel} is not what ${SOURCE} gives: run node scripts/extract-webhooks.mjs`);
      process.exit(1);
    }
    console.log(`extract-webhooks: ${rel} is current (${WEBHOOKS.length} webhooks, ${Buffer.byteLength(text)} bytes)`);
    return;
  }
  writeFileSync(OUTPUT, text);
  console.log(`extract-webhooks: wrote ${rel} (${WEBHOOKS.length} webhooks, ${Buffer.byteLength(text)} bytes)`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
