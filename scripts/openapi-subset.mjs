// What scripts/extract-openapi.mjs and scripts/extract-webhooks.mjs share: pruning documentation
// keys, following $refs into components, sorting keys, formatting as biome does, and the command
// line (write the subset, or `--check` it against a fresh extraction).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Copies a node without the `dropped` keys where they are keywords; inside a schema's `properties`
 * they are property names and stay.
 */
export function prune(node, dropped, names = false) {
  if (Array.isArray(node)) return node.map((n) => prune(n, dropped));
  if (node === null || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (!names && dropped.has(k)) continue;
    out[k] = prune(v, dropped, !names && (k === 'properties' || k === 'patternProperties'));
  }
  return out;
}

export function sortKeys(node) {
  if (Array.isArray(node)) return node.map(sortKeys);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.keys(node)
      .sort()
      .map((k) => [k, sortKeys(node[k])]),
  );
}

/** Every component ("#/components/<kind>/<name>") `root` reaches through $refs, transitively, pruned. */
export function reachedComponents(root, spec, dropped) {
  const components = {};
  const pending = [root];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      pending.push(...node);
      continue;
    }
    for (const [k, v] of Object.entries(node)) {
      if (k !== '$ref' || typeof v !== 'string') {
        pending.push(v);
        continue;
      }
      const m = /^#\/components\/([^/]+)\/([^/]+)$/.exec(v);
      if (!m) throw new Error(`unsupported $ref ${v}`);
      const [, kind, name] = m;
      if (components[kind]?.[name] !== undefined) continue;
      const target = spec.components[kind]?.[name];
      if (target === undefined) throw new Error(`dangling $ref ${v}`);
      components[kind] ??= {};
      components[kind][name] = prune(target, dropped);
      pending.push(components[kind][name]);
    }
  }
  return components;
}

/** A subset as its committed file's text: biome's JSON formatting under the repository's config. */
export function render(subset, output) {
  return execFileSync(join(ROOT, 'node_modules/.bin/biome'), ['format', `--stdin-file-path=${output}`], {
    cwd: ROOT,
    input: `${JSON.stringify(subset)}\n`,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
}

/**
 * The command line of an extraction script: reads `source` (exit 3 if it is not installed), makes
 * the subset, and writes it to `output`, or with --check exits 1 if the committed file differs.
 */
export function runExtraction({ name, source, output, make, counted }) {
  let specPath;
  try {
    specPath = createRequire(import.meta.url).resolve(source);
  } catch {
    console.error(`${name}: ${source} is not installed (npm ci installs it as a dev dependency)`);
    process.exit(3);
  }
  const { version } = JSON.parse(readFileSync(join(dirname(specPath), '../package.json'), 'utf8'));
  const text = render(make(JSON.parse(readFileSync(specPath, 'utf8')), version), output);
  const rel = relative(ROOT, output);
  const size = `${counted}, ${Buffer.byteLength(text)} bytes`;
  if (process.argv.includes('--check')) {
    let committed = '';
    try {
      committed = readFileSync(output, 'utf8');
    } catch {}
    if (committed !== text) {
      console.error(`${name}: ${rel} is not what ${source} gives: run node scripts/${name}.mjs`);
      process.exit(1);
    }
    console.log(`${name}: ${rel} is current (${size})`);
    return;
  }
  writeFileSync(output, text);
  console.log(`${name}: wrote ${rel} (${size})`);
}
