// forkflush's egress proxy: the agent's only way out of a sandbox that has no network of its own.
// The proxy listener takes CONNECT (HTTPS: it sees the host name, never the content) and
// absolute-form requests (plain HTTP), lets through only what `reach` allows, and counts what it
// refuses. Each model route forwards what is sent to it to one upstream, with the real key put
// where the agent put its placeholder, and the key masked in what comes back. It listens on Unix
// sockets in a folder the agent's sandbox binds (a forwarder inside carries 127.0.0.1 there:
// egress-forwarder.ts), or, without a sandbox, on 127.0.0.1.
import { lookup } from 'node:dns/promises';
import { rm } from 'node:fs/promises';
import {
  createServer,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import {
  EGRESS_HEADERS_TIMEOUT_MS,
  EGRESS_MAX_CONNECTIONS,
  EGRESS_MAX_DIALS,
  EGRESS_MAX_REFUSED_TARGETS,
  EGRESS_MAX_WAITING,
} from '../core/bounds.js';
import { masked } from './egress-mask.js';
import {
  dial,
  isInternal,
  limiter,
  machineProxy,
  type ProxyAddress,
  screenLookup,
  splice,
  tunnel,
} from './egress-upstream.js';

/** How the agent may reach a host and port: named in the allowlist, covered by a wildcard, or not at all. */
export type Reach = 'named' | 'wildcard' | null;

export interface ProxyRoute {
  name: string;
  /** The upstream base URL: each request's path goes after its path. */
  upstream: string;
  /** Each key behind its placeholder, and the headers it may be put in; none: requests pass as they are. */
  keys: readonly { placeholder: string; value: string; headers: readonly string[] }[];
}

export interface EgressProxyOptions {
  /** The folder for the Unix sockets (the sandbox binds it); null: TCP on 127.0.0.1. */
  socketDir: string | null;
  routes: readonly ProxyRoute[];
  reach(host: string, port: number): Reach;
  /** The environment whose HTTPS_PROXY, HTTP_PROXY and NO_PROXY are the machine's way out. */
  env: NodeJS.ProcessEnv;
  /** Each answer of a route with keys, plain, as the agent gets it, and its request's size so far (worker/answer-meter.ts). */
  answered?(body: Readable, contentType: string | string[] | undefined, requestBytes: () => number): void;
  /** Why a route does not forward a request (a spend no answer would state), or null. */
  refuses?(method: string, path: string): string | null;
}

export interface EgressProxy {
  /** Where each listener is ('proxy', and each route by name): a socket path, or a port on 127.0.0.1. */
  listeners: Record<string, string | number>;
  /** What was refused, by host:port. */
  refused(): ReadonlyMap<string, number>;
  /** Allowed targets that could not be reached (no network, a name that does not resolve), by host:port: the last error. */
  unreachable(): ReadonlyMap<string, string>;
  /** Connections to allowed targets so far: how many reached them (a tunnel opened, an answer came), how many failed. */
  traffic(): { reached: number; failed: number };
  close(): Promise<void>;
}

/** Headers that belong to one connection, never forwarded. */
const HOP =
  'connection keep-alive proxy-connection proxy-authorization proxy-authenticate te trailer transfer-encoding upgrade'.split(
    ' ',
  );

class Refused extends Error {}

/** A connection's word on its upstream: it could not be reached (or failed before it answered), or it answered. */
interface Watch {
  failed(e: Error): void;
  reached(): void;
  /** A model route's answer, plain, as the agent gets it: read for the use it states. */
  answered?(body: Readable, contentType: string | string[] | undefined, requestBytes: () => number): void;
}

export async function startEgressProxy(o: EgressProxyOptions): Promise<EgressProxy> {
  // 1. What the listeners share: the sockets to close, the refusals counted, the way out.
  const out = egressWay(o.env);
  // 2. The proxy listener: CONNECT and plain HTTP to what the allowlist lets through.
  const proxy = createServer();
  proxy.on('connect', connectHandler(o, out));
  proxy.on('request', requestHandler(o, out));
  // 3. One listener per model route, forwarding to its upstream with the key put in.
  const servers: Record<string, Server> = { proxy };
  const agents: (HttpAgent | HttpsAgent)[] = [];
  for (const route of o.routes) {
    const server = createServer();
    const forward = routeForwarder(route, out, o);
    if (forward.agent) agents.push(forward.agent);
    server.on('request', forward.handle);
    server.on('connect', (_req: IncomingMessage, client: Socket) =>
      hangUp(client, 'HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\n\r\n'),
    );
    servers[route.name] = server;
  }
  const close = async () => {
    for (const server of Object.values(servers)) server.close();
    for (const s of out.sockets) s.destroy();
    for (const a of agents) a.destroy();
    if (o.socketDir) await rm(o.socketDir, { recursive: true, force: true });
  };
  // 4. Every listener open, or none.
  const listeners: Record<string, string | number> = {};
  try {
    for (const [name, server] of Object.entries(servers)) {
      server.maxConnections = EGRESS_MAX_CONNECTIONS;
      server.headersTimeout = EGRESS_HEADERS_TIMEOUT_MS;
      server.on('connection', (s: Socket) => out.track(s));
      server.on('clientError', (_e, s: Socket) => s.destroy());
      listeners[name] = await listen(server, o.socketDir ? join(o.socketDir, `${name}.sock`) : null);
    }
  } catch (e) {
    // A listener that could not open leaves none of the others open (they would keep forkflush alive).
    await close();
    throw e;
  }
  const traffic = () => ({ reached: out.counts.reached, failed: out.counts.failed });
  return { listeners, refused: () => out.refused, unreachable: () => out.unreachable, traffic, close };
}

type EgressWay = ReturnType<typeof egressWay>;

/**
 * The proxy's way out and its account: every socket tracked (closed with the proxy), refused
 * targets counted (the first EGRESS_MAX_REFUSED_TARGETS by name), and `open`, a connection to an
 * allowed target: through the machine's proxy where it has one, else straight to the address the
 * name resolves to (checked once, and connected to as checked), a few dials at a time.
 */
function egressWay(env: NodeJS.ProcessEnv) {
  const refused = new Map<string, number>();
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    return s;
  };
  const refuse = (target: string) => {
    const key = refused.has(target) || refused.size < EGRESS_MAX_REFUSED_TARGETS ? target : 'other targets';
    refused.set(key, (refused.get(key) ?? 0) + 1);
  };
  const unreachable = new Map<string, string>();
  const counts = { reached: 0, failed: 0 };
  const fail = (target: string, e: unknown) => {
    counts.failed++;
    if (unreachable.has(target) || unreachable.size < EGRESS_MAX_REFUSED_TARGETS)
      unreachable.set(target, (e as Error).message);
  };
  /** What a connection to `target` tells: it failed, or the target answered. */
  const watch = (target: string): Watch => ({ failed: (e) => fail(target, e), reached: () => counts.reached++ });
  const machine = machineProxy(env);
  const dials = limiter(EGRESS_MAX_DIALS, EGRESS_MAX_WAITING);
  // The machine's proxy resolves a name itself: what it would reach is checked here first (a name
  // this machine cannot resolve is the proxy's to resolve, and goes as it is).
  const screen = async (host: string, reach: 'named' | 'wildcard') => {
    if (reach !== 'wildcard') return;
    const address = isIP(host) ? host : (await screenLookup(host))?.address;
    if (address && isInternal(address)) throw new Refused(`${host} is at an internal address`);
  };
  const open = (host: string, port: number, reach: 'named' | 'wildcard', tls: boolean) =>
    dials(async () => {
      const via = machine.for(host, tls);
      if (via) {
        await screen(host, reach);
        return track(await tunnel(via, host, port));
      }
      const address = isIP(host) ? host : (await lookup(host)).address;
      if (reach === 'wildcard' && isInternal(address)) throw new Refused(`${host} is at an internal address`);
      return track(await dial(address, port));
    });
  return { refused, unreachable, counts, sockets, track, refuse, fail, watch, machine, open, screen };
}

/** CONNECT (HTTPS): a tunnel to an allowed host and port, or a refusal the agent can read. */
function connectHandler(o: EgressProxyOptions, out: EgressWay) {
  return (req: IncomingMessage, client: Socket, head: Buffer) => {
    out.track(client);
    client.on('error', () => client.destroy());
    const target = authority(req.url ?? '');
    if (!target) return hangUp(client, 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    const label = `${target.host}:${target.port}`;
    const reach = o.reach(target.host, target.port);
    if (!reach) {
      out.refuse(label);
      return hangUp(client, refusal(label));
    }
    out.open(target.host, target.port, reach, true).then(
      (upstream) => {
        out.counts.reached++;
        if (client.destroyed) return void upstream.destroy();
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        splice(client, upstream);
      },
      (e: unknown) => {
        if (e instanceof Refused) out.refuse(label);
        else out.fail(label, e);
        hangUp(client, e instanceof Refused ? refusal(label, e.message) : failure(label, e));
      },
    );
  };
}

/** An absolute-form request (plain HTTP): relayed to an allowed host and port, or answered 403. */
function requestHandler(o: EgressProxyOptions, out: EgressWay) {
  return (req: IncomingMessage, res: ServerResponse) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return void answer(res, 400, 'forkflush: this is a proxy: ask it for an absolute http:// URL, or CONNECT');
    }
    if (url.protocol !== 'http:') return void answer(res, 400, 'forkflush: https goes through CONNECT');
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const port = Number(url.port || 80);
    const label = `${host}:${port}`;
    const reach = o.reach(host, port);
    if (!reach) {
      out.refuse(label);
      return void answer(res, 403, `forkflush: ${label} is not allowed (sandbox.network)`);
    }
    const headers = forwarded(req);
    headers.host = url.host;
    const via = out.machine.for(host, false);
    if (via)
      return void out.screen(host, reach).then(
        () => relayThroughProxy(req, res, via, url.href, headers, null, out.watch(label)),
        (e: unknown) => {
          out.refuse(label);
          answer(res, 403, `forkflush: ${label}: ${(e as Error).message}`);
        },
      );
    const path = `${url.pathname}${url.search}`;
    const upstream = (socket: Socket) =>
      httpRequest({ createConnection: () => socket, method: req.method, path, headers });
    out.open(host, port, reach, false).then(
      (socket) => relay(req, res, upstream(socket), null, out.watch(label)),
      (e: unknown) => {
        if (e instanceof Refused) out.refuse(label);
        else out.fail(label, e);
        answer(res, e instanceof Refused ? 403 : 502, `forkflush: ${label}: ${(e as Error).message}`);
      },
    );
  };
}

/** A model route: each request to the upstream, its placeholder swapped for the key, the key masked in the answer. */
function routeForwarder(
  route: ProxyRoute,
  out: EgressWay,
  { answered, refuses }: Pick<EgressProxyOptions, 'answered' | 'refuses'>,
): { handle: (req: IncomingMessage, res: ServerResponse) => void; agent: HttpAgent | HttpsAgent | null } {
  let base: URL | null = null;
  try {
    base = new URL(route.upstream);
  } catch {}
  const problem =
    !base || (base.protocol !== 'http:' && base.protocol !== 'https:')
      ? `its base URL is not an http(s) URL: ${route.upstream}`
      : null;
  const tls = base?.protocol === 'https:';
  const via = base && !problem ? out.machine.for(base.hostname.replace(/^\[(.*)\]$/, '$1'), tls) : null;
  const agent = problem || via ? null : tls ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  const secrets = route.keys.map((k) => Buffer.from(k.value));
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (problem || !base) return void answer(res, 502, `forkflush: the ${route.name} route cannot forward: ${problem}`);
    if (!req.url?.startsWith('/'))
      return void answer(res, 400, 'forkflush: this address takes paths of the model API only');
    const refused = route.keys.length > 0 ? refuses?.(req.method ?? 'GET', req.url) : null;
    if (refused) return void answer(res, 403, `forkflush: ${refused}`);
    const headers = forwarded(req);
    let swapped = false;
    for (const k of route.keys)
      for (const h of k.headers) {
        const v = headers[h];
        if (typeof v === 'string' && v.includes(k.placeholder)) {
          headers[h] = v.replaceAll(k.placeholder, k.value);
          swapped = true;
        }
      }
    if (route.keys.length > 0 && !swapped)
      return void answer(
        res,
        401,
        "forkflush: the model's key is added only to requests that carry the placeholder key this agent was given",
      );
    headers.host = base.host;
    // What comes back is searched for the key: it must come back uncompressed.
    if (secrets.length > 0) headers['accept-encoding'] = 'identity';
    const path = `${base.pathname.replace(/\/$/, '')}${req.url}`;
    const target = { host: base.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(base.port || (tls ? 443 : 80)) };
    const watch = { ...out.watch(`${target.host}:${target.port}`), answered };
    const make = (createConnection?: () => Socket) =>
      (tls ? httpsRequest : httpRequest)({
        ...target,
        method: req.method,
        path,
        headers,
        ...(createConnection ? { createConnection } : { agent: agent ?? undefined }),
        ...(tls ? { servername: isIP(target.host) ? undefined : target.host } : {}),
      });
    if (!via) return void relay(req, res, make(), secrets, watch);
    if (!tls) return relayThroughProxy(req, res, via, `${base.origin}${path}`, headers, secrets, watch);
    tunnel(via, target.host, target.port).then(
      (raw) => {
        const secure = tlsConnect({ socket: out.track(raw), servername: target.host });
        relay(
          req,
          res,
          make(() => secure),
          secrets,
          watch,
        );
      },
      (e: unknown) => {
        watch.failed(e as Error);
        answer(res, 502, `forkflush: ${route.name}: ${(e as Error).message}`);
      },
    );
  };
  return { handle, agent };
}

/** Relays a plain HTTP request through the machine's own proxy: the absolute URL as its path, the proxy's credentials added. */
function relayThroughProxy(
  req: IncomingMessage,
  res: ServerResponse,
  via: ProxyAddress,
  url: string,
  headers: Record<string, string | string[]>,
  secrets: Buffer[] | null,
  watch: Watch,
): void {
  const upstream = httpRequest({
    host: via.hostname,
    port: via.port || 80,
    method: req.method,
    path: url,
    headers: { ...headers, ...via.auth },
  });
  relay(req, res, upstream, secrets, watch);
}

/** Pipes a request to its upstream and the answer back, the secrets masked in the answer. */
function relay(
  req: IncomingMessage,
  res: ServerResponse,
  up: ReturnType<typeof httpRequest>,
  secrets: Buffer[] | null,
  watch: Watch,
): void {
  up.on('response', (answerMsg: IncomingMessage) => {
    watch.reached();
    const headers = forwarded(answerMsg);
    const te = answerMsg.headers['transfer-encoding'];
    const out = secrets?.length ? masked(answerMsg, headers, secrets, te) : { headers, body: answerMsg };
    if ('problem' in out) {
      answerMsg.resume();
      return answer(res, 502, `forkflush: ${out.problem}`);
    }
    res.writeHead(answerMsg.statusCode ?? 502, out.headers);
    out.body.on('error', () => res.destroy()).pipe(res);
    if (secrets?.length) watch.answered?.(out.body, headers['content-type'], () => sent);
    answerMsg.on('error', () => res.destroy());
  });
  // The agent hung up first: the upstream's error that follows is its doing, not the upstream's.
  let hungUp = false;
  up.on('error', (e) => {
    if (res.headersSent || hungUp) return void res.destroy();
    watch.failed(e);
    answer(res, 502, `forkflush: the upstream failed: ${e.message}`);
  });
  req.on('error', () => {
    hungUp = true;
    up.destroy();
  });
  res.on('close', () => {
    hungUp = !res.writableFinished;
    if (hungUp) up.destroy();
  });
  req.pipe(up);
  let sent = 0;
  req.on('data', (chunk: Buffer) => (sent += chunk.length));
}

/** The headers of a request or an answer that go on: none of one connection's, none for a proxy. */
function forwarded({ headers, method }: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && !HOP.includes(k)) out[k] = v;
  // A request's chunked body unframed (Node frames no GET's) would be read as requests smuggled past every check.
  if (method && headers['transfer-encoding'] && !headers['content-length']) out['transfer-encoding'] = 'chunked';
  return out;
}

function answer(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' }).end(`${text}\n`);
}

/** A CONNECT's answer, written raw: a refusal (403), or a target that could not be reached (502). */
function rawAnswer(status: string, text: string): string {
  const body = `forkflush: ${text}\n`;
  return `HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}
const refusal = (label: string, why = 'it is not in the allowlist (sandbox.network)') =>
  rawAnswer('403 Forbidden', `${label} is refused: ${why}`);
const failure = (label: string, e: unknown) =>
  rawAnswer('502 Bad Gateway', `${label} could not be reached: ${(e as Error).message}`);

/** host:port of a CONNECT, or null when it is not one (an IPv6 address in brackets). */
function authority(text: string): { host: string; port: number } | null {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]/\s@]+):(\d{1,5})$/.exec(text);
  const port = Number(m?.[2]);
  if (!m?.[1] || !(port >= 1 && port <= 65535)) return null;
  return { host: m[1].replace(/^\[(.*)\]$/, '$1').toLowerCase(), port };
}

/**
 * Answers a CONNECT and closes the connection once the answer is out. A socket a CONNECT hands
 * over is half-open and not read: ended alone, it would wait for the agent forever.
 */
function hangUp(client: Socket, answer: string): void {
  client.end(answer, () => client.destroy());
}

function listen(server: Server, socket: string | null): Promise<string | number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if (socket) server.listen(socket, () => resolve(socket));
    else server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
  });
}
