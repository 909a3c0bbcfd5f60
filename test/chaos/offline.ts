// Keeps a chaos shard off the network: every fetch and every http(s) request must go to
// 127.0.0.1, where each run's GitHub (the box) and app server listen. nock.disableNetConnect() with
// enableNetConnect('127.0.0.1') did this before, but nock's interceptors (@mswjs/interceptors)
// stand in every request: they rebuild and clone each fetch's Request and tee each body, a seventh
// of a shard's CPU for a check that passes every time. This checks the same thing at the door.
import http from 'node:http';
import https from 'node:https';
import { syncBuiltinESMExports } from 'node:module';

const ALLOWED = '127.0.0.1';

/** The error a request elsewhere fails with (as nock's NetConnectNotAllowedError did). */
function refused(where: string): Error {
  return new Error(`chaos: a request to ${where}, and nothing but ${ALLOWED} is reachable`);
}

function fetchTarget(input: unknown): URL {
  if (input instanceof URL) return input;
  if (typeof input === 'string') return new URL(input);
  return new URL((input as Request).url);
}

/** The host an http(s).request(...) call connects to, as Node reads its arguments. */
function requestHost(args: unknown[]): string {
  const [first, second] = args;
  if (typeof first === 'string') return new URL(first).hostname;
  if (first instanceof URL) return first.hostname;
  const options = (typeof second === 'object' && second !== null ? second : first) as
    | { hostname?: string; host?: string; socketPath?: string }
    | undefined;
  if (options?.socketPath) return `socket ${options.socketPath}`;
  return options?.hostname ?? options?.host?.replace(/:\d+$/, '') ?? 'localhost';
}

/** Refuses requests to anywhere but 127.0.0.1 until the returned function is called. */
export function offline(): () => void {
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    let url: URL;
    try {
      url = fetchTarget(input);
    } catch (e) {
      return Promise.reject(e);
    }
    if (url.hostname !== ALLOWED) return Promise.reject(refused(url.href));
    return realFetch(input, init);
  };
  const patched: [typeof http | typeof https, 'request' | 'get', (...args: any[]) => any][] = [];
  for (const mod of [http, https]) {
    for (const name of ['request', 'get'] as const) {
      const real = mod[name] as (...args: any[]) => any;
      patched.push([mod, name, real]);
      (mod as any)[name] = (...args: unknown[]) => {
        const host = requestHost(args);
        if (host !== ALLOWED) throw refused(host);
        return real(...args);
      };
    }
  }
  // `import { request } from 'node:http'` sees the guarded functions too.
  syncBuiltinESMExports();
  return () => {
    globalThis.fetch = realFetch;
    for (const [mod, name, real] of patched) (mod as any)[name] = real;
    syncBuiltinESMExports();
  };
}
