// Extracts from GitHub's OpenAPI description (@octokit/openapi, 13 MB) the operations forkflush
// calls, with every component they reach, into test/github/openapi/github-subset.json: the tests'
// fake GitHub checks each request and response against it (test/github/openapi/validate.ts).
//
//   node scripts/extract-openapi.mjs          writes the subset
//   node scripts/extract-openapi.mjs --check  exits 1 if the committed subset differs from a fresh one
//
// Exit code 3 means @octokit/openapi is not installed. The subset keeps what validation needs
// (parameters, request and response schemas, titles, summaries, documentation links) and drops
// descriptions, examples and GitHub's internal extensions; keys are sorted and the text formatted
// as biome formats JSON, so the same input gives the same bytes.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The operations forkflush calls: every `octokit.rest.<ns>.<method>` in src/ (GitHubForge in
 * src/github/forge.ts, and the hosted nightly tick in src/app/server.ts), plus the installation
 * token Probot requests on the app's behalf. test/github/openapi.test.ts checks this list against src/.
 */
export const OPERATIONS = [
  'actions/cancel-workflow-run',
  'actions/create-workflow-dispatch',
  'actions/list-workflow-runs',
  'apps/create-installation-access-token',
  'apps/list-installations',
  'apps/list-repos-accessible-to-installation',
  'checks/create',
  'checks/list-for-ref',
  'git/create-commit',
  'git/create-ref',
  'git/create-tree',
  'git/delete-ref',
  'git/get-commit',
  'git/get-ref',
  'git/list-matching-refs',
  'git/update-ref',
  'issues/add-labels',
  'issues/create-comment',
  'issues/remove-label',
  'issues/update-comment',
  'pulls/create',
  'pulls/list',
  'pulls/update',
  'repos/get',
  'repos/get-collaborator-permission-level',
  'repos/get-content',
];

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const OUTPUT = join(ROOT, 'test/github/openapi/github-subset.json');
const SOURCE = '@octokit/openapi/generated/api.github.com.json';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
// Keys that document rather than constrain. Dropped wherever they are keywords; inside a schema's
// `properties` they are property names and stay.
const DROPPED = new Set([
  'description',
  'example',
  'examples',
  'headers',
  'tags',
  'x-github',
  'x-github-breaking-changes',
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

/** The subset of `spec` holding `operations` (operation ids) and every component they reach. */
export function extract(spec, operations, sourceVersion) {
  const paths = {};
  const found = new Set();
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op || !operations.includes(op.operationId)) continue;
      found.add(op.operationId);
      paths[path] ??= {};
      paths[path][method] = prune(op);
    }
  }
  const missing = operations.filter((o) => !found.has(o));
  if (missing.length > 0) throw new Error(`not in GitHub's OpenAPI description: ${missing.join(', ')}`);

  // Follow every $ref ("#/components/<kind>/<name>") from the operations, transitively.
  const components = {};
  const pending = [paths];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      pending.push(...node);
      continue;
    }
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') {
        const m = /^#\/components\/([^/]+)\/([^/]+)$/.exec(v);
        if (!m) throw new Error(`unsupported $ref ${v}`);
        const [, kind, name] = m;
        if (components[kind]?.[name] !== undefined) continue;
        const target = spec.components[kind]?.[name];
        if (target === undefined) throw new Error(`dangling $ref ${v}`);
        components[kind] ??= {};
        components[kind][name] = prune(target);
        pending.push(components[kind][name]);
      } else pending.push(v);
    }
  }
  return sortKeys({
    openapi: spec.openapi,
    info: {
      title: `${spec.info.title}: the operations forkflush calls`,
      version: spec.info.version,
      'x-source': `${SOURCE} from @octokit/openapi ${sourceVersion}; regenerate with node scripts/extract-openapi.mjs, do not edit`,
    },
    servers: spec.servers,
    paths,
    components,
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
    console.error(`extract-openapi: ${SOURCE} is not installed (npm ci installs it as a dev dependency)`);
    process.exit(3);
  }
  const { version } = JSON.parse(readFileSync(join(dirname(specPath), '../package.json'), 'utf8'));
  const spec = JSON.parse(readFileSync(specPath, 'utf8'));
  const text = render(extract(spec, OPERATIONS, version));
  const rel = 'test/github/openapi/github-subset.json';
  if (process.argv.includes('--check')) {
    let committed = '';
    try {
      committed = readFileSync(OUTPUT, 'utf8');
    } catch {}
    if (committed !== text) {
      console.error(`extract-openapi: ${rel} is not what ${SOURCE} gives: run node scripts/extract-openapi.mjs`);
      process.exit(1);
    }
    console.log(`extract-openapi: ${rel} is current (${OPERATIONS.length} operations, ${text.length} bytes)`);
    return;
  }
  writeFileSync(OUTPUT, text);
  console.log(`extract-openapi: wrote ${rel} (${OPERATIONS.length} operations, ${text.length} bytes)`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
