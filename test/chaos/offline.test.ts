// The chaos shards' network guard (offline.ts): 127.0.0.1 is reachable, nothing else is.
import http, { createServer, request as httpRequest } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { expect, it } from 'vitest';
import { offline } from './offline.js';

it('lets requests to 127.0.0.1 through and refuses every other host, until it is lifted', async () => {
  const server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const realFetch = globalThis.fetch;
  const online = offline();
  try {
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('ok');
    expect(await (await fetch(new Request(`http://127.0.0.1:${port}/`))).text()).toBe('ok');
    await expect(fetch('https://api.github.com/zen')).rejects.toThrow(/api\.github\.com.*nothing but 127\.0\.0\.1/);
    await expect(fetch(new URL('http://localhost:1/'))).rejects.toThrow(/localhost/);
    expect(() => https.request('https://api.github.com/zen')).toThrow(/api\.github\.com/);
    expect(() => http.get({ host: 'example.com', path: '/' })).toThrow(/example\.com/);
    expect(() => httpRequest('http://example.com/')).toThrow(/example\.com/);
    expect(() => http.request({ socketPath: '/tmp/x.sock' })).toThrow(/socket/);
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get({ hostname: '127.0.0.1', port, path: '/' }, (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve(text));
        })
        .on('error', reject);
    });
    expect(body).toBe('ok');
  } finally {
    online();
    server.close();
  }
  expect(globalThis.fetch).toBe(realFetch);
});
