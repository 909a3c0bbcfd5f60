// Installs the real agent CLIs, at pinned versions, into .cache/agent-clis (outside the product's
// dependencies and its lockfile), for `npm run test:agents`. Skips what is already there.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const AGENT_CLIS = {
  '@anthropic-ai/claude-code': '2.1.332',
  '@openai/codex': '0.171.0',
  '@github/copilot': '1.0.102',
  '@google/gemini-cli': '0.61.0',
  'opencode-ai': '1.18.33',
};

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
