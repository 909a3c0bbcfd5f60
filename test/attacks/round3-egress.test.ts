// Round 3, egress: the agent's sandbox has no network of its own, its only way out is forkflush's
// proxy, which lets through the hosts the config allows (here the mock model server, the one
// allowed host) and forwards its model calls with the key, so the agent holds a placeholder.
// Hostile command agents (fixtures/attacks/round3-egress.mjs) try: a host outside the allowlist
// straight away; one through the proxy (refused, and counted in the note); the key in their
// environment, files, /proc, process memory and the proxy's answers; the key sent elsewhere by the
// model route (path and Host tricks, CONNECT, an upstream that echoes); a flood of the proxy
// beside a sibling making model calls. Locally, and in the worker Action.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { buildActionFromSource } from '../integration/action-repo.js';
import {
  type AttackRepo,
  cleanupAttackTemps,
  describeSandboxed,
  folderText,
  makeActionRepo,
  makeAttackRepo,
  runJob,
  runLocal,
} from './helpers.js';

afterAll(cleanupAttackTemps);

/** The user's key: only forkflush's proxy may hold it, and only the mock may receive it. */
const PREFIX = 'sk-ant-api03-';
const KEY = `${PREFIX}${randomBytes(24).toString('hex')}`;

interface Seen {
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A server on every address of this machine that records what reaches it; /echo answers with the request's headers. */
async function recorder(): Promise<{ port: number; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('latin1').on('data', (d: string) => (body += d));
    req.on('end', () => {
      seen.push({ url: req.url ?? '', headers: req.headers, body });
      if (req.url === '/echo')
        res.writeHead(200, { 'x-echo': JSON.stringify(req.headers) }).end(JSON.stringify(req.headers));
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"type":"message","content":[]}');
    });
  });
  server.on('connect', (req: IncomingMessage, socket) => {
    seen.push({ url: `CONNECT ${req.url}`, headers: req.headers, body: '' });
    socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  return { port: (server.address() as AddressInfo).port, seen, server };
}

/** This machine's address on its network (not loopback): reachable from the host, not from the sandbox. */
function outsideAddress(): string {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return '127.0.0.2';
}

let mock: Awaited<ReturnType<typeof recorder>>;
let thief: Awaited<ReturnType<typeof recorder>>;
const saved: Record<string, string | undefined> = {};

beforeAll(async () => {
  mock = await recorder();
  thief = await recorder();
});
afterAll(() => {
  mock.server.closeAllConnections();
  mock.server.close();
  thief.server.closeAllConnections();
  thief.server.close();
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

/** The user's environment: the key, and the mock as their gateway (the model's base URL). */
function userEnv(): void {
  for (const [k, v] of Object.entries({
    ANTHROPIC_API_KEY: KEY,
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${mock.port}`,
  })) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
}

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'attacks', 'round3-egress.mjs');

/** The agent's command: one mode of the fixture. */
const attack = (mode: string, logs: string, ...args: (string | number)[]) =>
  `node ${FIXTURE} ${mode} ${logs} ${args.join(' ')}`;

/** A config's agent with the key and the mock's URL, and the mock the one allowed host. */
function withKeyAndMock(text: string): string {
  return text
    .replace('agent:\n', 'agent:\n  env: [ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL]\n')
    .replace('sandbox:\n', `sandbox:\n  network:\n    allow: ["127.0.0.1:${mock.port}"]\n`);
}

/** A task whose agent runs `command` ({logs}: its logs folder). */
function task(
  command: string,
  o: { strategy?: string; extra?: string; budget?: string; timeout?: number } = {},
): AttackRepo {
  const repo = makeAttackRepo({
    agent: command,
    ...(o.timeout ? { agentTimeout: o.timeout } : {}),
    ...(o.strategy ? { strategy: o.strategy } : {}),
    ...(o.budget ? { budget: o.budget } : {}),
    ...(o.extra ? { extra: o.extra } : {}),
  });
  const config = join(repo.dir, '.github', 'autoresearch.yml');
  writeFileSync(config, withKeyAndMock(readFileSync(config, 'utf8')));
  repo.git('commit', '-qam', 'the key and the mock');
  return repo;
}

const report = (logs: string, name: string) => JSON.parse(readFileSync(join(logs, `${name}.json`), 'utf8'));
const keyIn = (seen: Seen[]) => seen.filter((s) => JSON.stringify(s).includes(KEY));

describeSandboxed('round 3: egress', () => {
  it('a host outside the allowlist cannot be reached straight away: the sandbox has only its own loopback', async () => {
    userEnv();
    const before = thief.seen.length;
    const repo = task(attack('direct', '{logs}', thief.port, outsideAddress()));
    const { result } = await runLocal(repo);
    const r = report(repo.logs, 'direct-r0.b0');
    expect(r.loopback).toMatch(/^error ECONNREFUSED/);
    expect(r.address).toMatch(/^error (ENETUNREACH|EHOSTUNREACH|ECONNREFUSED)/);
    expect(r.public).toMatch(/^error (ENETUNREACH|EHOSTUNREACH)/);
    expect(r.dns).toMatch(/^error /);
    expect(thief.seen.slice(before)).toEqual([]);
    expect(result.score).toBe(5);
  });

  it('through the proxy, a host outside the allowlist is refused, and the episode says how often', async () => {
    userEnv();
    const before = thief.seen.length;
    const repo = task(attack('denied', '{logs}', thief.port));
    const { result } = await runLocal(repo);
    const r = report(repo.logs, 'denied-r0.b0');
    for (const k of ['thief', 'example1', 'example2', 'plain', 'routeItself'])
      expect(r[k], k).toMatch(/^HTTP\/1\.1 403/);
    expect(thief.seen.slice(before)).toEqual([]);
    expect(result.note).toContain('the agent was refused 5 connections: example.com:443 (2), ');
    for (const t of ['10.1.2.3:80 (1)', `127.0.0.1:${thief.port} (1)`]) expect(result.note).toContain(t);
    expect(result.score).toBe(5);
  });

  it('an agent that fails for a host the allowlist lacks stops the run, the host named, not its key', async () => {
    userEnv();
    const repo = task(attack('needs', '{logs}'));
    const { result } = await runLocal(repo);
    expect(result.failure).toMatchObject({
      kind: 'egress',
      quote: expect.stringContaining('Tunnel connection failed: 403 Forbidden'),
      fix: expect.stringContaining(
        'the agent was refused 1 connection: example.com:443 (1): if the agent needs the host',
      ),
    });
  });

  it('the key is nowhere the agent can look: environment, files, /proc, memory, the proxy', async () => {
    userEnv();
    const repo = task(attack('search', '{logs}', PREFIX), { timeout: 90 });
    const { result } = await runLocal(repo);
    const r = report(repo.logs, 'search-r0.b0');
    expect(r.placeholder).toMatch(/^forkflush-placeholder-/);
    expect(r.found).not.toContain(KEY);
    expect(r.noPlaceholder.status).toBe(401);
    expect(folderText(repo.logs)).not.toContain(KEY);
    expect(result.score).toBe(5);
  }, 180_000);

  it('the key goes to the configured upstream only, and never comes back', async () => {
    userEnv();
    const mockBefore = mock.seen.length;
    const thiefBefore = thief.seen.length;
    const repo = task(attack('exfil', '{logs}', thief.port, mock.port));
    const { result } = await runLocal(repo);
    const r = report(repo.logs, 'exfil-r0.b0');
    // Nothing reached the thief, however the request was put.
    expect(thief.seen.slice(thiefBefore)).toEqual([]);
    expect(r.absolute).toMatch(/^HTTP\/1\.1 400/);
    expect(r.connectRoute).toMatch(/^HTTP\/1\.1 405/);
    // The mock (the upstream) got the key only in x-api-key, of requests through the model route.
    const got = mock.seen.slice(mockBefore);
    const withKey = keyIn(got);
    expect(withKey.length).toBeGreaterThan(0);
    for (const s of withKey) {
      expect(s.headers['x-api-key']).toBe(KEY);
      const { 'x-api-key': _, ...rest } = s.headers;
      expect(JSON.stringify(rest) + s.body).not.toContain(KEY);
    }
    // Through the proxy (a tunnel, an absolute URL) the placeholder stays a placeholder.
    expect(got.filter((s) => s.headers['x-api-key'] === r.placeholder).length).toBeGreaterThanOrEqual(2);
    // The path tricks went to the mock, as paths.
    expect(got.map((s) => s.url)).toEqual(expect.arrayContaining([`//127.0.0.1:${thief.port}/steal`]));
    // The echo came back masked: the agent learnt nothing.
    expect(r.echo.status).toBe(200);
    expect(r.echo.body).toContain('*'.repeat(KEY.length));
    expect(folderText(repo.logs)).not.toContain(KEY);
    expect(result.score).toBe(5);
  });

  it("a flood of the proxy does not starve a sibling's model calls, nor forkflush", async () => {
    userEnv();
    // b0 floods for 8 seconds; b1 makes 20 model calls meanwhile.
    const flood = attack('flood', '{logs}', 8);
    const calls = attack('calls', '{logs}', 20);
    const repo = task(`if [ "$FORKFLUSH_EPISODE" = r0.b0 ]; then ${flood}; else sleep 1; ${calls}; fi`, {
      strategy: 'best-of-n',
      budget: 'total: 12\n  unit: tokens\n  episode: 6',
      extra: 'fork:\n  branches: 2',
    });
    const { state, ms } = await runLocal(repo, { concurrency: 2 });
    const [flooder, caller] = state.rounds[0]?.episodes ?? [];
    const c = report(repo.logs, 'calls-r0.b1');
    for (let i = 0; i < 20; i++) expect(c[`status${i}`], `call ${i}`).toBe(200);
    // Each call answered within 5 s, flood or not: a starved one would wait out the 8 s flood.
    // (Idle they take milliseconds; the room is for a busy machine.)
    expect(Math.max(...c.ms)).toBeLessThan(5000);
    expect(report(repo.logs, 'flood-r0.b0').opened).toBeGreaterThan(1000);
    expect(flooder?.result?.note).toMatch(/the agent was refused \d+ connections: example\.com:443/);
    expect(caller?.result?.score).toBe(5);
    expect(ms).toBeLessThan(60_000);
  });
});

describeSandboxed('round 3: egress in the worker Action', () => {
  let action = '';
  beforeAll(async () => {
    action = await buildActionFromSource();
  });

  it('the job holds the key; its agent reaches nothing but the proxy, and finds no key', async () => {
    const repo = makeActionRepo('placeholder', { config: withKeyAndMock });
    repo.agent = [
      attack('direct', repo.logs, thief.port, outsideAddress()),
      attack('denied', repo.logs, thief.port),
      attack('search', repo.logs, PREFIX),
    ].join(' && ');
    repo.publish(repo.openingState());
    // The repository secret is in the job's environment, the mock its gateway.
    const job = await runJob(repo, 'r0.b0', {
      action,
      env: { ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: `http://127.0.0.1:${mock.port}` },
    });
    expect(job.exitCode, job.stdout).toBe(0);
    expect(report(repo.logs, 'direct-r0.b0').address).toMatch(/^error (ENETUNREACH|EHOSTUNREACH|ECONNREFUSED)/);
    expect(report(repo.logs, 'denied-r0.b0').thief).toMatch(/^HTTP\/1\.1 403/);
    expect(report(repo.logs, 'search-r0.b0').found).not.toContain(KEY);
    expect(folderText(repo.logs)).not.toContain(KEY);
    expect(job.outputs.score).toBe('5');
    expect(job.summary).toMatch(/the agent was refused 5 connections/);
  });
});
