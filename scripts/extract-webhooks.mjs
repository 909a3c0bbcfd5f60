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
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prune, ROOT, reachedComponents, runExtraction, sortKeys } from './openapi-subset.mjs';

/**
 * The webhooks forkflush's tests check, keyed as GitHub's description keys them: the X-GitHub-Event
 * name and the payload's action, with hyphens (`issue_comment` created is `issue-comment-created`);
 * `ping` has no action.
 */
export const WEBHOOKS = [
  'check-run-completed',
  'check-run-created',
  'installation-created',
  'installation-unsuspend',
  'issue-comment-created',
  'issues-closed',
  'issues-deleted',
  'issues-labeled',
  'issues-reopened',
  'issues-transferred',
  'issues-unlabeled',
  'ping',
  'pull-request-closed',
  'pull-request-labeled',
  'pull-request-opened',
  'pull-request-review-submitted',
  'workflow-job-completed',
  'workflow-job-in-progress',
  'workflow-job-queued',
  'workflow-run-completed',
  'workflow-run-requested',
];

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

/** The subset of `spec` holding the payload schemas of `webhooks` and every schema they reach. */
export function extract(spec, webhooks, sourceVersion) {
  const missing = webhooks.filter((w) => spec.webhooks?.[w]?.post === undefined);
  if (missing.length > 0) throw new Error(`not in GitHub's webhooks description: ${missing.join(', ')}`);
  const out = {};
  for (const key of webhooks) {
    const { operationId, requestBody } = spec.webhooks[key].post;
    const schema = requestBody?.content?.['application/json']?.schema;
    if (schema === undefined) throw new Error(`webhook ${key} has no application/json payload schema`);
    out[key] = {
      post: { operationId, requestBody: { content: { 'application/json': { schema: prune(schema, DROPPED) } } } },
    };
  }

  const { schemas = {} } = reachedComponents(out, spec, DROPPED);
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

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runExtraction({
    name: 'extract-webhooks',
    source: SOURCE,
    output: OUTPUT,
    make: (spec, version) => extract(spec, WEBHOOKS, version),
    counted: `${WEBHOOKS.length} webhooks`,
  });
}
