// The package as a user installs it: `npm pack`, installed into a temporary prefix with no
// network, then run from outside the checkout. It holds only what users run, and needs no
// dependency (everything is bundled in dist/).
import { execFileSync, spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
let prefix = '';
let packed: string[] = [];

beforeAll(() => {
  const out = mkdtempSync(join(tmpdir(), 'forkflush-pack-'));
  const [info] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: ROOT, encoding: 'utf8' }),
  );
  packed = info.files.map((f: { path: string }) => f.path).sort();
  prefix = join(out, 'prefix');
  // --offline: with no dependency there is nothing to fetch.
  execFileSync(
    'npm',
    ['install', '-g', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, join(out, info.filename)],
    {
      encoding: 'utf8',
    },
  );
}, 120_000);

const bin = (name: string) => join(prefix, 'bin', name);
const outside = () => mkdtempSync(join(tmpdir(), 'forkflush-user-'));

describe('the npm package', () => {
  it('holds only what users run', () => {
    expect(packed.filter((f) => !f.startsWith('dist/'))).toEqual([
      'LICENSE',
      'README.md',
      'action.yml',
      'app.yml',
      'examples/workflows/autoresearch-tick.yml',
      'examples/workflows/autoresearch.yml',
      'examples/workflows/forkflush.yml',
      'package.json',
      'schema/autoresearch.schema.json',
    ]);
    expect(packed.filter((f) => f.startsWith('dist/'))).toEqual([
      'dist/app-actions.js',
      'dist/app.js',
      'dist/cli.js',
      'dist/index.js',
    ]);
    expect(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).dependencies).toBeUndefined();
  });

  it('installs a forkflush that runs outside the checkout: version, plan, init with workflows', () => {
    const cwd = outside();
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(execFileSync(bin('forkflush'), ['--version'], { cwd, encoding: 'utf8' })).toBe(`forkflush ${version}\n`);
    const task = join(cwd, 'maxsat');
    cpSync(join(ROOT, 'examples', 'maxsat'), task, { recursive: true });
    expect(execFileSync(bin('forkflush'), ['plan', 'maxsat'], { cwd, encoding: 'utf8' })).toMatch(
      /opening\s+fork round\s+4/,
    );
    const init = execFileSync(
      bin('forkflush'),
      ['init', 'mine', '--grader', 'echo 1', '--agent', 'gemini', '--github', '--yes'],
      { cwd, encoding: 'utf8' },
    );
    expect(init).toContain('wrote .github/workflows/forkflush.yml');
    expect(readFileSync(join(cwd, 'mine', '.github/workflows/forkflush.yml'), 'utf8')).toContain('GEMINI_API_KEY');
  });

  it('installs forkflush-app, which serves webhooks with probot bundled in', async () => {
    const port = await freePort();
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const app = spawn(bin('forkflush-app'), [], {
      cwd: outside(),
      env: {
        PATH: process.env.PATH,
        APP_ID: '1',
        PRIVATE_KEY: privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
        WEBHOOK_SECRET: 'secret',
        PORT: String(port),
        FORKFLUSH_NIGHTLY_HOUR: 'off',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let log = '';
      await new Promise<void>((ready, fail) => {
        const seen = (d: Buffer) => {
          log += d;
          if (log.includes('Listening on')) ready();
        };
        app.stdout.on('data', seen);
        app.stderr.on('data', seen);
        app.on('exit', (code) => fail(new Error(`forkflush-app exited ${code}: ${log}`)));
      });
      // An unsigned delivery is refused: the webhook route is the app's.
      const r = await fetch(`http://127.0.0.1:${port}/api/github/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-github-event': 'ping', 'x-github-delivery': '1' },
        body: '{}',
      });
      expect(r.status).toBe(400);
    } finally {
      app.kill();
    }
  });
});

function freePort(): Promise<number> {
  return new Promise((done) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => done(port));
    });
  });
}
