// npm run bench: builds the benchmarks with esbuild (they use the product's own modules) and
// runs them one after the other. Each prints its figures; this prints the summary line.
// `node bench/run.mjs NAME` builds and runs bench/NAME.ts alone, e.g. `api` (npm run bench:api),
// which counts GitHub API requests rather than timing anything, so the default set leaves it out.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { build } from 'esbuild';

const only = process.argv[2];
const benches = only ? [only] : ['fork', 'overhead', 'sandbox', 'map'];
mkdirSync('bench/.work', { recursive: true });
await build({
  entryPoints: Object.fromEntries(benches.map((b) => [b, `bench/${b}.ts`])),
  outdir: 'bench/.work',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  banner: { js: "import { createRequire as __r } from 'node:module'; const require = __r(import.meta.url);" },
  logLevel: 'warning',
});
const lines = [];
for (const b of benches) {
  const out = execFileSync(process.execPath, [`bench/.work/${b}.js`], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  process.stdout.write(out);
  lines.push(out.trim().split('\n').at(-1));
}
if (!only) console.log(lines.join('; '));
