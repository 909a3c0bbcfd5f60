// forkflush's egress proxy on real sockets (io/egress-proxy.ts), outside any sandbox: what it lets
// through, what it refuses and counts, how a model route puts the key in and keeps it from
// coming back, and how it goes out through the machine's own proxy.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { uncountedSpend } from '../../src/core/answer-usage.js';
import { type EgressProxy, type ProxyRoute, startEgressProxy } from '../../src/io/egress-proxy.js';
import { AnswerMeter } from '../../src/worker/answer-meter.js';
import { startEgress } from '../../src/worker/egress.js';
import { raw } from './raw-http.js';

const KEY = 'sk-real-key-0123456789abcdef';
const PLACEHOLDER = 'forkflush-placeholder-test';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
}

/** An upstream that records requests; /echo answers with them, /split sends the key in two chunks. */
async function upstream(): Promise<{ port: number; seen: Seen[]; connects: string[]; server: Server }> {
  const seen: Seen[] = [];
  const connects: string[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
      if (req.url?.endsWith('/echo'))
        return void res.writeHead(200, { 'x-echo': String(req.headers['x-api-key']) }).end(JSON.stringify(req.headers));
      // /packed/<encoding>: the echo compressed though the proxy asked for none (gzip streamed in two writes).
      const packed = /\/packed\/([\w-]+)$/.exec(req.url ?? '')?.[1];
      if (packed) {
        const text = `{"error": "bad key ${String(req.headers['x-api-key'])}"}`;
        const pack = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync }[packed] ?? Buffer.from;
        const body = pack(text);
        res.writeHead(400, { 'content-encoding': packed, 'content-length': String(body.length) });
        res.write(body.subarray(0, 12));
        setTimeout(() => res.end(body.subarray(12)), 50);
        return;
      }
      // /used/<encoding>: a streamed model answer that states its use, compressed though the proxy asked for none.
      const used = /\/used\/([\w-]+)$/.exec(req.url ?? '')?.[1];
      if (used) {
        const events = [
          { type: 'message_start', message: { model: 'm', usage: { input_tokens: 30, output_tokens: 1 } } },
          { type: 'message_delta', usage: { output_tokens: 12 } },
        ];
        const text =
          used === 'hidden'
            ? 'data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
            : events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('');
        const pack = { gzip: gzipSync, br: brotliCompressSync }[used] ?? Buffer.from;
        const headers = {
          'content-type': 'text/event-stream',
          ...(used === 'identity' || used === 'hidden' ? {} : { 'content-encoding': used }),
        };
        return void res.writeHead(200, headers).end(pack(text));
      }
      if (req.url?.endsWith('/split')) {
        res.writeHead(200, { 'content-length': String(KEY.length + 4) });
        res.write(`[${KEY.slice(0, 9)}`);
        setTimeout(() => res.end(`${KEY.slice(9)}]..`), 50);
        return;
      }
      res.writeHead(200).end('ok');
    });
  });
  server.on('connect', (req: IncomingMessage, socket) => {
    connects.push(req.url ?? '');
    socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, seen, connects, server };
}

function get(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingMessage['headers']; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      let body = '';
      res.setEncoding('latin1').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A POST with an empty JSON body. */
function post(port: number, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end('{}');
  });
}

let up: Awaited<ReturnType<typeof upstream>>;
const open: EgressProxy[] = [];
beforeAll(async () => {
  up = await upstream();
});
afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
});
afterAll(() => {
  up.server.closeAllConnections();
  up.server.close();
});

async function proxyWith(o: {
  allow?: (host: string, port: number) => 'named' | 'wildcard' | null;
  routes?: ProxyRoute[];
  env?: NodeJS.ProcessEnv;
  meter?: AnswerMeter;
  refuses?: (method: string, path: string) => string | null;
}) {
  const p = await startEgressProxy({
    socketDir: null,
    routes: o.routes ?? [],
    reach: o.allow ?? (() => null),
    env: o.env ?? {},
    ...(o.meter ? { answered: o.meter.watch.bind(o.meter) } : {}),
    ...(o.refuses ? { refuses: o.refuses } : {}),
  });
  open.push(p);
  return p;
}

const route = (): ProxyRoute => ({
  name: 'model',
  upstream: `http://127.0.0.1:${up.port}/base/`,
  keys: [{ placeholder: PLACEHOLDER, value: KEY, headers: ['x-api-key'] }],
});

describe('a model route', () => {
  it('puts the key where the placeholder was, under the upstream path, with the upstream as Host', async () => {
    const p = await proxyWith({ routes: [route()] });
    const port = p.listeners.model as number;
    const r = await get(port, '/v1/messages?x=1', { 'x-api-key': PLACEHOLDER, host: 'evil.test', cookie: PLACEHOLDER });
    expect(r.status).toBe(200);
    const s = up.seen.at(-1);
    expect(s?.url).toBe('/base/v1/messages?x=1');
    expect(s?.headers['x-api-key']).toBe(KEY);
    expect(s?.headers.host).toBe(`127.0.0.1:${up.port}`);
    // Only in the key's own header.
    expect(s?.headers.cookie).toBe(PLACEHOLDER);
  });

  it('refuses a request without the placeholder, and an absolute URL', async () => {
    const p = await proxyWith({ routes: [route()] });
    const port = p.listeners.model as number;
    const before = up.seen.length;
    expect((await get(port, '/v1/messages', { 'x-api-key': 'a guess' })).status).toBe(401);
    expect(await raw(port, `GET http://127.0.0.1:${up.port}/x HTTP/1.1\r\nHost: x\r\n\r\n`, 3000)).toMatch(
      /^HTTP\/1\.1 400/,
    );
    expect(up.seen.length).toBe(before);
  });

  it('masks the key in what comes back, headers and body, even split across chunks', async () => {
    const p = await proxyWith({ routes: [route()] });
    const port = p.listeners.model as number;
    const echo = await get(port, '/echo', { 'x-api-key': PLACEHOLDER });
    expect(`${JSON.stringify(echo.headers)}${echo.body}`).not.toContain(KEY);
    expect(echo.headers['x-echo']).toBe('*'.repeat(KEY.length));
    const split = await get(port, '/split', { 'x-api-key': PLACEHOLDER });
    expect(split.body).toBe(`[${'*'.repeat(KEY.length)}]..`);
    expect(up.seen.at(-1)?.headers['accept-encoding']).toBe('identity');
  });

  // Failed before its fix: an upstream that compressed its answer anyway (a gateway that ignores
  // accept-encoding) passed the key it echoed through the mask, which searched compressed bytes.
  it('masks the key in an answer the upstream compressed anyway (gzip, deflate, br); refuses an encoding it cannot read', async () => {
    const p = await proxyWith({ routes: [route()] });
    const port = p.listeners.model as number;
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const r = await get(port, `/packed/${encoding}`, { 'x-api-key': PLACEHOLDER });
      expect(r.status, encoding).toBe(400);
      expect(r.headers['content-encoding'], encoding).toBeUndefined();
      expect(r.body, encoding).toBe(`{"error": "bad key ${'*'.repeat(KEY.length)}"}`);
    }
    const unknown = await get(port, '/packed/zstd', { 'x-api-key': PLACEHOLDER });
    expect(unknown.status).toBe(502);
    expect(unknown.body).toContain("cannot be searched for the model's key (zstd)");
    expect(unknown.body).not.toContain(KEY);
  });

  it('counts the model use its answers state, compressed or not; nothing for a request it refused or a route without keys', async () => {
    const meter = new AnswerMeter();
    const p = await proxyWith({ routes: [route(), { ...route(), name: 'login', keys: [] }], meter });
    for (const encoding of ['identity', 'gzip', 'br'])
      expect((await get(p.listeners.model as number, `/used/${encoding}`, { 'x-api-key': PLACEHOLDER })).status).toBe(
        200,
      );
    expect((await get(p.listeners.model as number, '/used/identity')).status).toBe(401);
    expect((await get(p.listeners.login as number, '/used/identity')).status).toBe(200);
    expect(meter.metered()).toEqual({ m: { input: 90, cached: 0, written: 0, output: 36, calls: 3, costUsd: null } });
    // A stream that states no use is counted by its sizes: the request the proxy forwarded, the stream.
    const hidden = new AnswerMeter();
    const q = await proxyWith({ routes: [route()], meter: hidden });
    expect((await post(q.listeners.model as number, '/used/hidden', { 'x-api-key': PLACEHOLDER })).status).toBe(200);
    expect(hidden.metered().unknown?.input).toBe(1);
    expect(hidden.metered().unknown?.output).toBeGreaterThan(10);
  });

  it('does not forward a request whose spend no answer would state (a batch), on a route with keys', async () => {
    const p = await proxyWith({ routes: [route()], refuses: uncountedSpend });
    const before = up.seen.length;
    const batch = await post(p.listeners.model as number, '/v1/messages/batches', { 'x-api-key': PLACEHOLDER });
    expect(batch.status).toBe(403);
    expect(batch.body).toMatch(/POST \/v1\/messages\/batches is not forwarded: a batch spends/);
    expect(up.seen.length).toBe(before);
    expect(
      (await get(p.listeners.model as number, '/v1/messages/batches/b1', { 'x-api-key': PLACEHOLDER })).status,
    ).toBe(200);
  });

  it("without keys (a login's own credentials), passes requests as they are", async () => {
    const p = await proxyWith({ routes: [{ ...route(), keys: [] }] });
    await get(p.listeners.model as number, '/v1/x', { authorization: 'Bearer own-login' });
    expect(up.seen.at(-1)?.headers.authorization).toBe('Bearer own-login');
  });

  it('a base URL that is not one is said on every request', async () => {
    const p = await proxyWith({ routes: [{ ...route(), upstream: 'ftp://x' }] });
    const r = await get(p.listeners.model as number, '/v1', { 'x-api-key': PLACEHOLDER });
    expect(r.status).toBe(502);
    expect(r.body).toContain('its base URL is not an http(s) URL: ftp://x');
  });
});

describe('the proxy', () => {
  it('refuses and counts what the allowlist lacks; lets through what it names', async () => {
    const p = await proxyWith({ allow: (host, port) => (host === '127.0.0.1' && port === up.port ? 'named' : null) });
    const port = p.listeners.proxy as number;
    expect(await raw(port, 'CONNECT example.com:443 HTTP/1.1\r\n\r\n', 3000)).toMatch(
      /^HTTP\/1\.1 403[\s\S]*example\.com:443 is refused/,
    );
    expect(await raw(port, 'GET http://10.0.0.1:8080/ HTTP/1.1\r\nHost: 10.0.0.1:8080\r\n\r\n', 3000)).toMatch(
      /^HTTP\/1\.1 403/,
    );
    // A tunnel to the allowed host carries whatever the agent sends (the proxy never reads it).
    const tunnel = await raw(
      port,
      `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\nGET /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      3000,
    );
    expect(tunnel).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/);
    const plain = await raw(
      port,
      `GET http://127.0.0.1:${up.port}/p HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nConnection: close\r\n\r\n`,
      3000,
    );
    expect(plain).toMatch(/^HTTP\/1\.1 200/);
    expect(up.seen.at(-1)?.url).toBe('/p');
    expect([...p.refused()]).toEqual([
      ['example.com:443', 1],
      ['10.0.0.1:8080', 1],
    ]);
  });

  it('keeps what it could not reach (a name that does not resolve, a closed port, a route), not what it refused', async () => {
    const closed = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as AddressInfo;
        s.close(() => resolve(port));
      });
    });
    const p = await proxyWith({
      allow: (host) => (host === 'example.com' ? null : 'named'),
      routes: [{ ...route(), upstream: `http://127.0.0.1:${closed}/v1` }],
    });
    const port = p.listeners.proxy as number;
    expect(await raw(port, 'CONNECT nowhere.invalid:443 HTTP/1.1\r\n\r\n', 3000)).toMatch(
      /^HTTP\/1\.1 502[\s\S]*nowhere\.invalid:443 could not be reached/,
    );
    expect(await raw(port, `GET http://127.0.0.1:${closed}/ HTTP/1.1\r\nHost: x\r\n\r\n`, 3000)).toMatch(
      /^HTTP\/1\.1 502/,
    );
    expect((await get(p.listeners.model as number, '/m', { 'x-api-key': PLACEHOLDER })).status).toBe(502);
    await raw(port, 'CONNECT example.com:443 HTTP/1.1\r\n\r\n', 3000);
    expect([...p.unreachable().keys()]).toEqual(['nowhere.invalid:443', `127.0.0.1:${closed}`]);
    expect(p.unreachable().get(`127.0.0.1:${closed}`)).toMatch(/ECONNREFUSED/);
    expect([...p.refused().keys()]).toEqual(['example.com:443']);
  });

  it('never takes a wildcard to an internal address (this machine, cloud metadata)', async () => {
    const p = await proxyWith({ allow: () => 'wildcard' });
    const port = p.listeners.proxy as number;
    expect(await raw(port, `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`, 3000)).toMatch(
      /^HTTP\/1\.1 403[\s\S]*internal address/,
    );
    expect(
      await raw(port, 'GET http://169.254.169.254/latest/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n', 3000),
    ).toMatch(/^HTTP\/1\.1 403/);
    expect([...p.refused().keys()]).toEqual([`127.0.0.1:${up.port}`, '169.254.169.254:80']);
  });

  it("never takes a wildcard to an internal address through the machine's proxy either, in any form", async () => {
    const env = { HTTPS_PROXY: `http://127.0.0.1:${up.port}`, HTTP_PROXY: `http://127.0.0.1:${up.port}` };
    const p = await proxyWith({ allow: () => 'wildcard', env });
    const port = p.listeners.proxy as number;
    const before = up.connects.length;
    const own = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && !i.internal && i.family === 'IPv4')?.address;
    for (const target of [
      `[::ffff:127.0.0.1]:${up.port}`,
      `[::ffff:7f00:1]:${up.port}`,
      `0.0.0.0:${up.port}`,
      '169.254.169.254:80',
      '[::ffff:169.254.169.254]:80',
      '[64:ff9b::a9fe:a9fe]:80',
      '10.1.2.3:80',
      '192.0.2.2:443',
      'localhost:443',
      ...(own ? [`${own}:${up.port}`] : []),
    ])
      expect(await raw(port, `CONNECT ${target} HTTP/1.1\r\n\r\n`, 3000), target).toMatch(
        /^HTTP\/1\.1 403[\s\S]*internal address/,
      );
    expect(await raw(port, 'GET http://10.1.2.3/ HTTP/1.1\r\nHost: 10.1.2.3\r\n\r\n', 3000)).toMatch(/^HTTP\/1\.1 403/);
    // None reached the machine's proxy; a public name does.
    expect(up.connects.length).toBe(before);
    await raw(port, 'CONNECT 93.184.215.14:443 HTTP/1.1\r\n\r\n', 3000);
    expect(up.connects.at(-1)).toBe('93.184.215.14:443');
  });

  it("goes out through the machine's proxy, but not for what NO_PROXY names or loopback", async () => {
    const env = { HTTPS_PROXY: `http://127.0.0.1:${up.port}`, NO_PROXY: '.skip.test' };
    const p = await proxyWith({ allow: () => 'named', env });
    const port = p.listeners.proxy as number;
    // The machine's proxy (the upstream, answering 502 to CONNECT) is asked; the agent hears it failed.
    expect(await raw(port, 'CONNECT api.example.com:443 HTTP/1.1\r\n\r\n', 3000)).toMatch(
      /^HTTP\/1\.1 502[\s\S]*answered 502/,
    );
    expect(up.connects.at(-1)).toBe('api.example.com:443');
    const before = up.connects.length;
    await raw(port, 'CONNECT a.skip.test:443 HTTP/1.1\r\n\r\n', 3000);
    await raw(port, `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`, 3000);
    expect(up.connects.length).toBe(before);
  });

  it('holds a bounded number of connections, and closing ends every tunnel', async () => {
    const p = await proxyWith({ allow: () => 'named' });
    const port = p.listeners.proxy as number;
    const tunnel = connect({ host: '127.0.0.1', port }, () =>
      tunnel.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`),
    );
    await new Promise((r) => tunnel.once('data', r));
    const closed = new Promise((r) => tunnel.once('close', r));
    await p.close();
    open.splice(0);
    await closed;
  });

  it('leaves nothing open when one of its listeners cannot open', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ff-net-'));
    await mkdir(join(dir, 'model.sock')); // the route's socket cannot be made; the proxy's opens first
    const pipes = () => process.getActiveResourcesInfo().filter((r) => r === 'PipeWrap').length;
    const before = pipes();
    await expect(
      startEgressProxy({ socketDir: dir, routes: [route()], reach: () => 'named', env: {} }),
    ).rejects.toThrow(/EADDRINUSE/);
    await new Promise((r) => setTimeout(r, 50));
    expect(pipes()).toBe(before);
    expect(existsSync(dir)).toBe(false);
  });
});

describe("a sandboxed session's socket folder", () => {
  it('sweeps the folders a killed forkflush left, not a live one nor a link', async () => {
    const dead = spawnSync(process.execPath, ['-e', '0']).pid as number;
    const keeper = spawn('sleep', ['30']);
    const left = `/tmp/ff-net-${dead}-left`;
    const live = `/tmp/ff-net-${keeper.pid}-live`;
    const target = await mkdtemp(join(tmpdir(), 'kept-'));
    const link = `/tmp/ff-net-${dead}-link`;
    try {
      await mkdir(join(left, 'gone.sock'), { recursive: true });
      await mkdir(live);
      await symlink(target, link);
      const egress = await startEgress({
        config: {
          agent: { kind: 'command' },
          setup: { commands: [] },
          sandbox: { mode: 'auto', read: [], write: [] },
        } as unknown as Parameters<typeof startEgress>[0]['config'],
        env: {},
        sandboxed: true,
      });
      await egress.close();
      expect(existsSync(left)).toBe(false);
      expect(existsSync(live)).toBe(true);
      expect(existsSync(target)).toBe(true);
      expect(egress.bind && existsSync(egress.bind)).toBe(false);
    } finally {
      keeper.kill();
      await rm(live, { recursive: true, force: true });
      await rm(link, { force: true });
    }
  });
});
