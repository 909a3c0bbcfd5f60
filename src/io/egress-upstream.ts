// How forkflush's egress proxy (egress-proxy.ts) goes out: straight to an address (never an
// internal one for a wildcard), or through the machine's own proxy (HTTPS_PROXY, HTTP_PROXY,
// NO_PROXY), a few connections opened at a time.
import { BlockList, connect, isIP, type Socket } from 'node:net';
import { EGRESS_DIAL_TIMEOUT_MS } from '../core/bounds.js';

/** Addresses a wildcard never leads to: this machine, private networks, link-local (cloud metadata). */
const INTERNAL = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
] as const)
  INTERNAL.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
] as const)
  INTERNAL.addSubnet(net, bits, 'ipv6');

export function isInternal(address: string): boolean {
  const family = isIP(address);
  return family !== 0 && INTERNAL.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

/** Two sockets joined both ways; either ending or failing ends both. */
export function splice(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const end = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', end).on('close', end);
  b.on('error', end).on('close', end);
}

export function dial(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port, noDelay: true });
    s.setTimeout(EGRESS_DIAL_TIMEOUT_MS, () => s.destroy(new Error('timed out')));
    s.once('connect', () => {
      s.setTimeout(0);
      resolve(s);
    });
    s.once('error', reject);
  });
}

/** A tunnel to host:port through an HTTP proxy (CONNECT). */
export function tunnel(via: ProxyAddress, host: string, port: number): Promise<Socket> {
  return dial(via.hostname, Number(via.port || 80)).then(
    (s) =>
      new Promise((resolve, reject) => {
        const target = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
        const auth = via.auth['proxy-authorization']
          ? `Proxy-Authorization: ${via.auth['proxy-authorization']}\r\n`
          : '';
        s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
        let got = Buffer.alloc(0);
        const onData = (d: Buffer) => {
          got = Buffer.concat([got, d]);
          const end = got.indexOf('\r\n\r\n');
          if (end === -1) {
            if (got.length > 16_384) s.destroy(new Error('the proxy answered with too long a header'));
            return;
          }
          s.off('data', onData);
          const status = /^HTTP\/1\.[01] (\d{3})/.exec(got.subarray(0, end).toString('latin1'))?.[1];
          if (status !== '200')
            return void s.destroy(new Error(`the machine's proxy answered ${status ?? 'something else'}`));
          const rest = got.subarray(end + 4);
          if (rest.length > 0) s.unshift(rest);
          s.off('error', reject);
          resolve(s);
        };
        s.on('data', onData);
        s.once('error', reject);
        s.once('close', () => reject(new Error("the machine's proxy closed the connection")));
      }),
  );
}

export interface ProxyAddress {
  hostname: string;
  port: string;
  auth: Record<string, string>;
}

export interface MachineProxy {
  /** The proxy to go through for `host` (https: for TLS), or null to go straight. */
  for(host: string, tls: boolean): ProxyAddress | null;
}

/**
 * The machine's own way out (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, either case): http:// proxies
 * only; loopback never goes through one.
 */
export function machineProxy(env: NodeJS.ProcessEnv): MachineProxy {
  const read = (name: string) => env[name.toLowerCase()] || env[name.toUpperCase()] || '';
  const parse = (text: string): ProxyAddress | null => {
    try {
      const u = new URL(text);
      if (u.protocol !== 'http:') return null;
      const auth: Record<string, string> = u.username
        ? {
            'proxy-authorization': `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`,
          }
        : {};
      return { hostname: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port, auth };
    } catch {
      return null;
    }
  };
  const https = parse(read('https_proxy'));
  const http = parse(read('http_proxy'));
  const skip = read('no_proxy')
    .split(',')
    .map((s) => s.trim().toLowerCase().replace(/:\d+$/, ''))
    .filter(Boolean);
  const bypass = (host: string) =>
    host === 'localhost' ||
    host === '::1' ||
    (isIP(host) === 4 && host.startsWith('127.')) ||
    skip.some(
      (s) =>
        s === '*' ||
        host === s.replace(/^\*?\./, '') ||
        host.endsWith(s.startsWith('.') ? s : `.${s.replace(/^\*\./, '')}`),
    );
  return {
    for(host, tls) {
      const via = tls ? https : http;
      return via && !bypass(host.toLowerCase()) ? via : null;
    },
  };
}

/** Runs at most `most` tasks at once, `waiting` more queued; past that a task is refused at once. */
export function limiter(most: number, waiting: number): <T>(task: () => Promise<T>) => Promise<T> {
  let running = 0;
  const queue: (() => void)[] = [];
  return async (task) => {
    // A slot is handed from a task that ends to the first one waiting.
    if (running < most) running++;
    else if (queue.length >= waiting) throw new Error('too many connections are being opened at once');
    else await new Promise<void>((go) => queue.push(go));
    try {
      return await task();
    } finally {
      const next = queue.shift();
      if (next) next();
      else running--;
    }
  };
}
