// The hosted app as a team deploys it (issue 10, "Deployment"): `npm start` serves it with Probot's
// own server, health at /ping; it refuses to start without a webhook secret; its settings are
// listed in .env.example, and .env stays out of git.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Probot, run } from 'probot';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import hostedApp, { requireWebhookSecret } from '../../src/app/server.js';
import { AppAuth } from './app-auth.js';

const ROOT = join(import.meta.dirname, '../..');

afterEach(() => {
  vi.unstubAllEnvs();
});

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('the webhook secret', () => {
  it('without one the app refuses to start, and says what to set', async () => {
    const app = new Probot({ githubToken: 'ghs_x', logLevel: 'fatal' });
    await expect(requireWebhookSecret(app)).rejects.toThrow(
      'forkflush-app: no webhook secret: set WEBHOOK_SECRET to the app\'s webhook secret (GitHub\'s app settings, "Webhook secret"). ' +
        'Without it Probot would take any delivery signed with "development".',
    );
    await expect(hostedApp(app)).rejects.toThrow(/no webhook secret/);
  });

  it('with one it starts', async () => {
    vi.stubEnv('FORKFLUSH_NIGHTLY_HOUR', 'off');
    const app = new Probot({ githubToken: 'ghs_x', secret: 'a-secret', logLevel: 'fatal' });
    await expect(hostedApp(app)).resolves.toBeUndefined();
  });

  it('the server does not start without it; with it, it serves /ping', async () => {
    vi.stubEnv('FORKFLUSH_NIGHTLY_HOUR', 'off');
    const port = await freePort();
    const env = {
      APP_ID: '1',
      PRIVATE_KEY: new AppAuth().privateKey,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'fatal' as const,
    };
    await expect(run(hostedApp, { env })).rejects.toThrow(/no webhook secret/);
    await expect(fetch(`http://127.0.0.1:${port}/ping`)).rejects.toThrow();
    const server = await run(hostedApp, { env: { ...env, WEBHOOK_SECRET: 'a-secret' } });
    try {
      const res = await fetch(`http://127.0.0.1:${port}/ping`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('PONG');
    } finally {
      await server.stop();
    }
  });
});

describe('forkflush-app run directly', () => {
  it('a setup that cannot serve ends with its reason in one line and exit 1; LOG_LEVEL=debug adds where', () => {
    const env = { PATH: process.env.PATH, APP_ID: '1', PRIVATE_KEY: new AppAuth().privateKey, PORT: '0' };
    const start = (more: Record<string, string> = {}) =>
      spawnSync(process.execPath, [join(ROOT, 'dist', 'app.js')], {
        cwd: tmpdir(),
        env: { ...env, ...more },
        encoding: 'utf8',
        timeout: 30_000,
      });
    const plain = start();
    expect(plain.status).toBe(1);
    expect(plain.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^forkflush-app: no webhook secret: set WEBHOOK_SECRET/),
      '(LOG_LEVEL=debug prints where it failed)',
    ]);
    const debug = start({ LOG_LEVEL: 'debug' });
    expect(debug.status).toBe(1);
    expect(debug.stderr).toMatch(/forkflush-app: no webhook secret[^\n]*\n\s+at /);
  });
});

describe('deployment files', () => {
  it('npm start serves the hosted app', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.scripts.start).toBe('node dist/app.js');
    expect(pkg.bin['forkflush-app']).toBe('dist/app.js');
  });

  it('.env.example names every setting, and .env is ignored', () => {
    const example = readFileSync(join(ROOT, '.env.example'), 'utf8');
    for (const name of [
      'APP_ID',
      'PRIVATE_KEY',
      'PRIVATE_KEY_PATH',
      'WEBHOOK_SECRET',
      'FORKFLUSH_RECORD_KEY',
      'FORKFLUSH_NIGHTLY_HOUR',
      'LOG_LEVEL',
      'PORT',
    ]) {
      expect(example, name).toMatch(new RegExp(`^#? ?${name}=`, 'm'));
    }
    // Nothing secret in the example: every value is empty or a placeholder.
    expect(example).not.toMatch(/^(APP_ID|PRIVATE_KEY|WEBHOOK_SECRET)=.+$/m);
    const ignored = readFileSync(join(ROOT, '.gitignore'), 'utf8').split('\n');
    expect(ignored).toContain('.env');
  });

  it('the README says how to deploy: instances, the nightly hour, the health check', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('### Deploying the app'), readme.indexOf('## The bundled example'));
    for (const words of [
      'npm start',
      'One instance or several',
      'FORKFLUSH_NIGHTLY_HOUR',
      'GET /ping',
      '.env.example',
    ]) {
      expect(section).toContain(words);
    }
  });
});

describe('the Action on the Marketplace', () => {
  it('has branding GitHub takes: a colour from its list, one of the Feather icons it lists', () => {
    const action = parse(readFileSync(join(ROOT, 'action.yml'), 'utf8'));
    // docs.github.com, "Metadata syntax for GitHub Actions", branding.
    const colours = ['white', 'black', 'yellow', 'blue', 'green', 'orange', 'red', 'purple', 'gray-dark'];
    const gitIcons = ['git-branch', 'git-commit', 'git-merge', 'git-pull-request', 'github'];
    expect(colours).toContain(action.branding?.color);
    expect(gitIcons).toContain(action.branding?.icon);
  });
});
