// Builds dist/: the CLI and (later) the Action, each one self-contained ESM file.
// `node scripts/bundle.mjs --check` builds in memory and fails if dist/ is stale.
import { chmod, readFile } from 'node:fs/promises';
import { build } from 'esbuild';
// One set of options for dist/ and the tests that build from src/ (bundled CommonJS dependencies
// call require(): the banner gives them one).
import options from './bundle-options.json' with { type: 'json' };

const entries = {
  cli: 'src/cli/index.ts',
  index: 'src/action/index.ts',
  app: 'src/app/server.ts',
  'app-actions': 'src/app/actions-mode-entry.ts',
};
const check = process.argv.includes('--check');

const result = await build({
  entryPoints: entries,
  outdir: 'dist',
  ...options,
  write: !check,
  logLevel: 'warning',
});

// The CLI and the hosted app are executables (package.json "bin").
if (!check) for (const bin of ['dist/cli.js', 'dist/app.js']) await chmod(bin, 0o755);

if (check) {
  const stale = [];
  for (const file of result.outputFiles) {
    const current = await readFile(file.path, 'utf8').catch(() => null);
    if (current !== file.text) stale.push(file.path);
  }
  if (stale.length > 0) {
    console.error(`dist/ is stale (${stale.join(', ')}): run \`npm run bundle\` and commit dist/`);
    process.exit(1);
  }
}
