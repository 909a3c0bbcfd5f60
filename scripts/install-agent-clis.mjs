// Installs the real agent CLIs, at pinned versions, into .cache/agent-clis (outside the product's
// dependencies and its lockfile), for `npm run test:agents`. Skips what is already there.
// The pins are src/agents/clis.ts's (the versions the Action installs too), read from that file
// with esbuild's type stripping, since Node 20 cannot import TypeScript. aider is a PyPI
// package and is not installed here (its adapter is tested against a fake).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { transformSync } from 'esbuild';

const clisFile = join(import.meta.dirname, '..', 'src', 'agents', 'clis.ts');
const { code } = transformSync(readFileSync(clisFile, 'utf8'), { loader: 'ts', format: 'esm' });
const { AGENT_CLIS: CLIS } = await import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`);

/** npm package -> version, as `npm run test:agents` installs them. */
export const AGENT_CLIS = Object.fromEntries(
  Object.values(CLIS)
    .filter((cli) => cli.installer === 'npm')
    .map((cli) => [cli.package, cli.version]),
);

const dir = join(import.meta.dirname, '..', '.cache', 'agent-clis');
const wanted = JSON.stringify(AGENT_CLIS);
const stamp = join(dir, 'installed.json');
if (existsSync(stamp) && readFileSync(stamp, 'utf8') === wanted) {
  console.log(`agent CLIs already in ${dir}`);
} else {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "private": true }\n');
  const specs = Object.entries(AGENT_CLIS).map(([name, version]) => `${name}@${version}`);
  const started = Date.now();
  execFileSync(
    'npm',
    ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--engine-strict=false', ...specs],
    {
      cwd: dir,
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  writeFileSync(stamp, wanted);
  console.log(`installed ${specs.join(', ')} into ${dir} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
