// How forkflush's egress proxy (egress-proxy.ts) goes out: straight to an address (never an
// internal one for a wildcard), or through the machine's own proxy (HTTPS_PROXY, HTTP_PROXY,
// NO_PROXY), a few connections opened at a time.
import { lookup } from 'node:dns/promises';
import { BlockList, connect, isIP, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { EGRESS_DIAL_TIMEOUT_MS, EGRESS_SCREEN_LOOKUP_MS } from '../core/bounds.js';

/**
 * Addresses a wildcard never leads to: this machine (its loopback and every address of its own),
 * private and shared networks, link-local (cloud metadata), and the reserved, documentation,
 * benchmark and multicast ranges no public service is at.
 */
const INTERNAL = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  INTERNAL.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  INTERNAL.addSubnet(net, bits, 'ipv6');

/** An IPv4 address an IPv6 one carries (::ffff:a.b.c.d, NAT64's 64:ff9b::a.b.c.d), else null. */
function carriedIpv4(address: string): string | null {
  const m = /^(?:::ffff:|64:ff9b::)(?:0:)?(.+)$/i.exec(address);
  if (!m) return null;
  const rest = m[1] as string;
  if (isIP(rest) === 4) return rest;
  const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(rest);
  if (!hex) return null;
  const [a, b] = [Number.parseInt(hex[1] as string, 16), Number.parseInt(hex[2] as string, 16)];
  return [a >> 8, a & 255, b >> 8, b & 255].join('.');
}

/** This machine's own addresses (every interface's), read once. */
let own: Set<string> | null = null;
const ownAddresses = () => {
  own ??= new Set(
    Object.values(networkInterfaces())
      .flat()
      .map((i) => i?.address.toLowerCase().replace(/%.*$/, '') ?? ''),
  );
  return own;
};

export function isInternal(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  const v4 = family === 6 ? carriedIpv4(address) : null;
  if (v4) return isInternal(v4);
  return INTERNAL.check(address, family === 6 ? 'ipv6' : 'ipv4') || ownAddresses().has(address.toLowerCase());
}

/** A name as this machine resolves it, within EGRESS_SCREEN_LOOKUP_MS; null when it cannot say in time. */
export function screenLookup(host: string): Promise<{ address: string } | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), EGRESS_SCREEN_LOOKUP_MS);
  });
  return Promise.race([lookup(host).catch(() => null), late]).finally(() => clearTimeout(timer));
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
