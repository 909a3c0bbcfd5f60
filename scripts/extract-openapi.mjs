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
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prune, ROOT, reachedComponents, runExtraction, sortKeys } from './openapi-subset.mjs';

/**
 * The operations forkflush calls: every `octokit.rest.<ns>.<method>` in src/ (GitHubApi in
 * src/github/api.ts and its parts, and the hosted nightly tick in src/app/server.ts), plus the installation
 * token Probot requests on the app's behalf. test/github/openapi.test.ts checks this list against src/.
 */
export const OPERATIONS = [
  'actions/cancel-workflow-run',
  'actions/create-workflow-dispatch',
  'actions/disable-workflow',
  'actions/enable-workflow',
  'actions/get-workflow-run',
  'actions/list-workflow-runs',
  'apps/create-installation-access-token',
  'apps/list-installations',
  'apps/list-repos-accessible-to-installation',
  'checks/create',
  'checks/get',
  'checks/list-for-ref',
  'checks/update',
  'git/create-commit',
  'git/create-ref',
  'git/create-tree',
  'git/delete-ref',
  'git/get-commit',
  'git/get-ref',
  'git/get-tree',
  'git/list-matching-refs',
  'git/update-ref',
  'issues/add-labels',
  'issues/create-comment',
  'issues/get',
  'issues/list-comments',
  'issues/remove-label',
  'issues/update-comment',
  'pulls/create',
  'pulls/get',
  'pulls/list',
  'pulls/update',
  'reactions/create-for-issue-comment',
  'repos/get',
  'repos/get-collaborator-permission-level',
  'repos/get-content',
];

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
      paths[path][method] = prune(op, DROPPED);
    }
  }
  const missing = operations.filter((o) => !found.has(o));
  if (missing.length > 0) throw new Error(`not in GitHub's OpenAPI description: ${missing.join(', ')}`);

  const components = reachedComponents(paths, spec, DROPPED);
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

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runExtraction({
    name: 'extract-openapi',
    source: SOURCE,
    output: OUTPUT,
    make: (spec, version) => extract(spec, OPERATIONS, version),
    counted: `${OPERATIONS.length} operations`,
  });
}
