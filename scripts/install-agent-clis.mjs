// Installs the real agent CLIs, at pinned versions, into .cache/agent-clis (outside the product's
// dependencies and its lockfile), for `npm run test:agents`. Skips what is already there.
// The pins are the agents' specs' (src/agents/<kind>.ts, `cli`; the versions the Action installs
// too), read from the list of specs, src/agents/specs.ts, bundled by esbuild (Node 20 cannot
// import TypeScript). aider is a PyPI package and is not installed here (its spec is tested
// against a fake).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildSync } from 'esbuild';

const root = join(import.meta.dirname, '..');
const dir = join(root, '.cache', 'agent-clis');
mkdirSync(dir, { recursive: true });
const bundle = join(dir, 'specs.mjs');
buildSync({
  entryPoints: [join(root, 'src', 'agents', 'specs.ts')],
  bundle: true,
  platform: 'node',
  format: 'esm',
  packages: 'external',
  outfile: bundle,
  logLevel: 'error',
});
const { agentClis } = await import(pathToFileURL(bundle).href);

/** npm package -> version, as `npm run test:agents` installs them. */
export const AGENT_CLIS = Object.fromEntries(
  agentClis()
    .map(([, cli]) => cli)
    .filter((cli) => cli.installer === 'npm')
    .map((cli) => [cli.package, cli.version]),
);

const wanted = JSON.stringify(AGENT_CLIS);
const stamp = join(dir, 'installed.json');
if (existsSync(stamp) && readFileSync(stamp, 'utf8') === wanted) {
  console.log(`agent CLIs already in ${dir}`);
} else {
  writeFileSync(join(dir, 'package.json'), '{ "private": true }\n');
  const specs = Object.entries(AGENT_CLIS).map(([name, version]) => `${name}@${version}`);
  const started = Date.now();
  execFileSync(
    'npm',
    ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--engine-strict=false', ...specs],
    { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  writeFileSync(stamp, wanted);
  console.log(`installed ${specs.join(', ')} into ${dir} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
