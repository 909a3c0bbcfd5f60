// Egress control for one agent session: the agent's sandbox has no network of its own (loopback
// only), and forkflush's proxy (io/egress-proxy.ts) is its way out. The proxy lets through only the
// hosts its kind's CLI needs (its spec's `egress`), the package registries setup names and what
// sandbox.network allows, and forwards the model calls with the real key, so the agent holds only
// a placeholder. Without a sandbox the proxy listens on this machine's 127.0.0.1: the agent's
// environment still holds no key, but nothing stops it from connecting elsewhere (README, "Safety").
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdtemp, readdir, rm } from 'node:fs/promises';
import type { PlannedRoute } from '../agents/spec.js';
import { specOf } from '../agents/specs.js';
import { uncountedSpend } from '../core/answer-usage.js';
import type { AgentKind, Config } from '../core/config.js';
import { matchHost, refusedNote, registriesFor, unreachableNote } from '../core/egress.js';
import type { Tally } from '../core/usage.js';
import { forwarded, writeForwarder } from '../io/egress-forwarder.js';
import { type EgressProxy, startEgressProxy } from '../io/egress-proxy.js';
import { isAlive } from '../io/process-tree.js';
import { AnswerMeter } from './answer-meter.js';

/** Where the proxy and the routes are inside the sandbox: ports of its own loopback (nothing else listens there). */
const INSIDE_PORT = 18_080;

/** The variables that point a program at a proxy, set for the agent (NO_PROXY keeps its model calls direct). */
const PROXY_VARS = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'];
const NO_PROXY_VARS = ['NO_PROXY', 'no_proxy'];
const LOOPBACK = '127.0.0.1,localhost,::1';

export interface Egress {
  /** The agent's environment: placeholders for keys, base URLs and proxy variables at the proxy. */
  env: NodeJS.ProcessEnv;
  /** The folder the agent's sandbox must bind (the proxy's sockets and the forwarder), or null. */
  bind: string | null;
  /** The agent's command line behind the forwarder (in the sandbox), or as it is. */
  wrap(file: string, args: string[]): { file: string; args: string[] };
  /** What the proxy refused or could not reach, for the episode's note; null when nothing. */
  note(): string | null;
  /** Allowed targets the proxy could not reach so far, said with what to check; null when none. */
  unreachable(): string | null;
  /** Connections to allowed targets so far: how many reached them, how many failed. */
  traffic(): { reached: number; failed: number };
  /** How many connections the proxy refused so far. */
  refusedCount(): number;
  /** The model use the answers it relayed on routes with keys stated, by model (answer-meter.ts). */
  metered(): Tally;
  /** The keys the proxy holds: never in what forkflush records of the session (episode-agent.ts). */
  keys: string[];
  close(): Promise<void>;
}

/** The hosts the agent may reach through the proxy: its kind's, setup's registries, sandbox.network's. */
export function allowedHosts(
  config: Pick<Config, 'agent' | 'setup' | 'sandbox'>,
  kindHosts: readonly string[],
): string[] {
  const network = config.sandbox.network;
  if (network === 'none') return [];
  return [...new Set([...kindHosts, ...registriesFor(config.setup.commands), ...(network?.allow ?? [])])];
}

/**
 * Starts the proxy for one agent session whose environment (the allowlisted one) is `env`. The
 * machine's own HTTPS_PROXY and HTTP_PROXY in `machine` (forkflush's environment; default `env`)
 * become the proxy's way out, with their credentials (which the allowlisted one has not).
 */
export async function startEgress(o: {
  config: Pick<Config, 'agent' | 'setup' | 'sandbox'>;
  env: NodeJS.ProcessEnv;
  machine?: NodeJS.ProcessEnv;
  sandboxed: boolean;
}): Promise<Egress> {
  const plan = egressPlan(o.config.agent.kind, o.env);
  const hosts = allowedHosts(o.config, plan.hosts);
  // A short path under the real /tmp (a socket's is limited to about 100 bytes): every sandbox
  // has a /tmp of its own, so only the sandbox that binds this folder reaches the sockets. Not
  // listable; the sockets open to the sandbox's user (nobody, under root).
  const socketDir = o.sandboxed ? await socketFolder() : null;
  if (socketDir) await chmod(socketDir, 0o711);
  const meter = new AnswerMeter();
  const proxy = await startEgressProxy({
    socketDir,
    routes: plan.routes,
    reach: (host, port) => matchHost(hosts, host, port),
    env: o.machine ?? o.env,
    answered: (body, type, sent) => meter.watch(body, type, sent),
    refuses: uncountedSpend,
  }).catch(async (e: unknown) => {
    if (socketDir) await rm(socketDir, { recursive: true, force: true });
    throw e;
  });
  try {
    const keys = plan.routes.flatMap((r) => r.keys.map((k) => k.value));
    return { ...(await agentSide(proxy, socketDir, plan.agentEnv)), keys, metered: () => meter.metered() };
  } catch (e) {
    // The proxy and its folder go with a session that could not be set up.
    await proxy.close();
    throw e;
  }
}

/** Where each sandboxed session's sockets go: /tmp/ff-net-<pid of this forkflush>-<random>. */
const SOCKET_PREFIX = 'ff-net-';
const SOCKET_FOLDER = /^ff-net-(\d+)-/;

/**
 * A new socket folder, after removing those a forkflush that is gone left (a SIGKILL or an OOM kill
 * skips the proxy's close): a folder whose pid names no live process holds only dead sockets.
 */
async function socketFolder(): Promise<string> {
  const names = await readdir('/tmp').catch(() => [] as string[]);
  for (const name of names) {
    const pid = Number(SOCKET_FOLDER.exec(name)?.[1] ?? 0);
    if (!(pid > 0) || pid === process.pid || isAlive(pid)) continue;
    // Only a folder of this user's: another user's (or a link planted here) is not ours to remove.
    const found = await lstat(`/tmp/${name}`).catch(() => null);
    if (found?.isDirectory() && found.uid === process.getuid?.()) {
      await rm(`/tmp/${name}`, { recursive: true, force: true }).catch(() => {});
    }
  }
  return mkdtemp(`/tmp/${SOCKET_PREFIX}${process.pid}-`);
}

/** The agent's side of a started proxy: its environment and its command line behind the forwarder. */
async function agentSide(
  proxy: EgressProxy,
  socketDir: string | null,
  agentEnv: (urls: Record<string, string>) => NodeJS.ProcessEnv,
): Promise<Omit<Egress, 'keys' | 'metered'>> {
  const names = Object.keys(proxy.listeners);
  // Inside the sandbox each listener gets a port of its loopback; outside, its own port here.
  const port = (name: string) => {
    const l = proxy.listeners[name];
    return typeof l === 'number' ? l : INSIDE_PORT + names.indexOf(name);
  };
  if (socketDir) for (const l of Object.values(proxy.listeners)) await chmod(l as string, 0o666);
  const script = socketDir ? await writeForwarder(socketDir) : null;
  const urls = Object.fromEntries(names.map((n) => [n, `http://127.0.0.1:${port(n)}`]));
  const env = agentEnv(urls);
  delete env.ALL_PROXY;
  delete env.all_proxy;
  for (const v of PROXY_VARS) env[v] = urls.proxy;
  for (const v of NO_PROXY_VARS) env[v] = LOOPBACK;
  // Node 22.21 and 24 take their proxy from these variables when told to (fetch and http alike).
  env.NODE_USE_ENV_PROXY = '1';
  const ports = Object.fromEntries(names.map((n) => [port(n), proxy.listeners[n] as string]));
  return {
    env,
    bind: socketDir,
    wrap: (file, args) => (script ? forwarded(script, ports, file, args) : { file, args }),
    note: () => [refusedNote(proxy.refused()), unreachableNote(proxy.unreachable())].filter(Boolean).join('; ') || null,
    unreachable: () => unreachableNote(proxy.unreachable()),
    traffic: () => proxy.traffic(),
    refusedCount: () => [...proxy.refused().values()].reduce((n, c) => n + c, 0),
    close: () => proxy.close(),
  };
}

export interface EgressPlan {
  hosts: readonly string[];
  routes: PlannedRoute[];
  /** The agent's environment once each route has its address (`urls`, by name): placeholders, no keys. */
  agentEnv(urls: Readonly<Record<string, string>>): NodeJS.ProcessEnv;
}

/** A placeholder key: the agent holds this, the proxy swaps it for the real one. */
function placeholder(): string {
  return `forkflush-placeholder-${randomBytes(16).toString('hex')}`;
}

const on = (v: string | undefined) => v !== undefined && v !== '' && v !== 'false' && v !== '0';

/**
 * The routes an agent of `kind` gets with the session environment `env`: one for each model API
 * its spec names that it has a key for (the key goes behind a placeholder), or a base URL of the
 * user's own (a login's credentials then pass through), and those its own config names. Every key
 * variable a route knows leaves the agent's environment.
 */
export function egressPlan(kind: AgentKind, env: NodeJS.ProcessEnv): EgressPlan {
  const facts = specOf(kind).egress;
  const routes: PlannedRoute[] = [];
  const edits: ((out: NodeJS.ProcessEnv, urls: Readonly<Record<string, string>>) => void)[] = [];
  for (const r of facts.routes) {
    if (r.offWhen?.some((v) => on(env[v]))) continue;
    const own = r.baseUrl.map((v) => env[v]?.trim()).find(Boolean);
    const present = r.keys.filter((k) => env[k.name]?.trim());
    const upstream = own ?? r.upstream;
    if (!upstream || (present.length === 0 && !own)) continue;
    const planned: PlannedRoute = { name: r.name, upstream, keys: [] };
    const placed = new Map<string, string>();
    for (const k of present) {
      const target = k.placeholderIn ?? k.name;
      if (placed.has(target)) continue;
      const p = placeholder();
      placed.set(target, p);
      planned.keys.push({ placeholder: p, value: (env[k.name] as string).trim(), headers: k.headers });
    }
    routes.push(planned);
    edits.push((out, urls) => {
      for (const k of r.keys) delete out[k.name];
      for (const [name, p] of placed) out[name] = p;
      for (const v of r.baseUrl) out[v] = urls[r.name];
    });
  }
  const own = facts.configRoutes?.(env, placeholder) ?? null;
  if (own) routes.push(...own.routes);
  return {
    hosts: facts.hosts,
    routes,
    agentEnv(urls) {
      const out = { ...env };
      for (const edit of edits) edit(out, urls);
      if (own) Object.assign(out, own.env(urls));
      return out;
    },
  };
}
