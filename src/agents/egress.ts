// What egress control needs to know of each agent kind, in one table the agent specs will take in:
// the hosts its CLI reaches for its model and its login (allowed through forkflush's proxy by
// default), and the model APIs whose calls can go through the proxy, which puts the real key in
// the request where the CLI put a placeholder, so that the agent never holds the key. worker/egress.ts
// applies it the same way for every kind. What a CLI cannot be given through the proxy is said in
// `notProxied` (README, "Safety").
// Sources: each CLI's base-URL variable is in ../shared/docs/agents.md and the adapters' headers;
// the login hosts are the token endpoints in the CLIs' own bundles (Claude Code 2.1.332:
// platform.claude.com/v1/oauth/token; Codex 0.171.0: auth.openai.com; Gemini CLI 0.61.0:
// oauth2.googleapis.com, cloudcode-pa.googleapis.com; Copilot CLI 1.0.102: api.github.com).
import { randomBytes } from 'node:crypto';
import type { Config } from '../core/config.js';

/** A variable that holds a key. */
export interface KeyVariable {
  name: string;
  /** The variable the agent gets the placeholder in, when it is not `name` (Codex reads OPENAI_API_KEY for a provider of its own). */
  placeholderIn?: string;
  /** The request headers the CLI sends this key in: the only places the proxy puts the real key. */
  headers: readonly string[];
}

/** A model API whose calls can go through the proxy. */
export interface ModelRoute {
  /** Its name (the proxy's socket for it, notes): lower case. */
  name: string;
  /** The variables the CLI reads its base URL from: the first set holds the user's own (a gateway); each gets the proxy's address. */
  baseUrl: readonly string[];
  /** The API's own base URL, where the user set none; null: proxied only with one of the user's (Copilot's own provider). */
  upstream: string | null;
  /** The variables that may hold its key, in the CLI's order of preference. */
  keys: readonly KeyVariable[];
  /** Any of these set (and not "false" or "0") makes the CLI use another API (Bedrock, Vertex AI): no route then. */
  offWhen?: readonly string[];
}

export interface AgentEgress {
  /** The API and login hosts its CLI reaches, allowed through the proxy by default. */
  hosts: readonly string[];
  routes: readonly ModelRoute[];
  /** What of its credentials the proxy cannot take from the agent, and why. */
  notProxied: string;
}

const BEARER = ['authorization'];
const ANTHROPIC: ModelRoute = {
  name: 'anthropic',
  baseUrl: ['ANTHROPIC_BASE_URL'],
  upstream: 'https://api.anthropic.com',
  keys: [
    { name: 'ANTHROPIC_API_KEY', headers: ['x-api-key'] },
    { name: 'ANTHROPIC_AUTH_TOKEN', headers: BEARER },
  ],
};
const OPENAI: ModelRoute = {
  name: 'openai',
  baseUrl: ['OPENAI_BASE_URL'],
  upstream: 'https://api.openai.com/v1',
  keys: [{ name: 'OPENAI_API_KEY', headers: BEARER }],
};
const GEMINI: ModelRoute = {
  name: 'gemini',
  baseUrl: ['GOOGLE_GEMINI_BASE_URL'],
  upstream: 'https://generativelanguage.googleapis.com',
  keys: [
    { name: 'GEMINI_API_KEY', headers: ['x-goog-api-key'] },
    { name: 'GOOGLE_API_KEY', headers: ['x-goog-api-key'] },
  ],
  offWhen: ['GOOGLE_GENAI_USE_VERTEXAI'],
};
/** The model APIs of the providers aider and opencode talk to, for their default hosts. */
const PROVIDER_HOSTS = [
  'api.anthropic.com',
  'api.openai.com',
  'generativelanguage.googleapis.com',
  'api.deepseek.com',
  'openrouter.ai',
  'api.groq.com',
  'api.mistral.ai',
  'api.cohere.com',
  'api.x.ai',
];

export const AGENT_EGRESS: Record<Config['agent']['kind'], AgentEgress> = {
  command: {
    hosts: [],
    // The SDKs' own variables: a program that takes its base URL from them works through the proxy.
    routes: [ANTHROPIC, OPENAI, GEMINI],
    notProxied: 'any other key agent.env lists: forkflush cannot know where the program sends it',
  },
  'claude-code': {
    hosts: ['api.anthropic.com', 'platform.claude.com', 'console.anthropic.com'],
    routes: [
      {
        ...ANTHROPIC,
        keys: [...ANTHROPIC.keys, { name: 'CLAUDE_CODE_OAUTH_TOKEN', headers: BEARER }],
        offWhen: ['CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX', 'CLAUDE_CODE_USE_FOUNDRY'],
      },
    ],
    notProxied:
      "the login file (~/.claude/.credentials.json), whose OAuth token Claude Code refreshes itself; Bedrock's, Vertex AI's and Foundry's cloud credentials",
  },
  codex: {
    hosts: ['api.openai.com', 'chatgpt.com', 'auth.openai.com'],
    routes: [
      {
        ...OPENAI,
        // With a base URL Codex runs a provider of forkflush's own that reads OPENAI_API_KEY (agents/codex.ts configToml).
        keys: [...OPENAI.keys, { name: 'CODEX_API_KEY', placeholderIn: 'OPENAI_API_KEY', headers: BEARER }],
      },
    ],
    notProxied: 'the ChatGPT login (auth.json), whose tokens Codex refreshes itself; Azure OpenAI keys',
  },
  copilot: {
    hosts: ['api.github.com', '*.githubcopilot.com'],
    routes: [
      {
        name: 'provider',
        baseUrl: ['COPILOT_PROVIDER_BASE_URL'],
        upstream: null,
        keys: [
          { name: 'COPILOT_PROVIDER_BEARER_TOKEN', headers: BEARER },
          // The header follows COPILOT_PROVIDER_TYPE: openai (a bearer token), anthropic, azure.
          { name: 'COPILOT_PROVIDER_API_KEY', headers: ['authorization', 'x-api-key', 'api-key'] },
        ],
      },
    ],
    notProxied:
      'its GitHub login (COPILOT_GITHUB_TOKEN), which the CLI trades with GitHub for Copilot tokens itself; COPILOT_PROVIDER_API_KEY_COMMAND and keys in COPILOT_PROVIDER_HEADERS',
  },
  gemini: {
    hosts: [
      'generativelanguage.googleapis.com',
      'cloudcode-pa.googleapis.com',
      'oauth2.googleapis.com',
      'www.googleapis.com',
    ],
    routes: [GEMINI],
    notProxied:
      "Login with Google (oauth_creds.json), whose token the CLI refreshes itself; Vertex AI's Google Cloud credentials",
  },
  aider: {
    hosts: PROVIDER_HOSTS,
    // aider documents OPENAI_API_BASE for an OpenAI endpoint (aider/website/docs/llms/openai-compat.md); LiteLLM also reads OPENAI_BASE_URL.
    routes: [{ ...OPENAI, baseUrl: ['OPENAI_API_BASE', 'OPENAI_BASE_URL'] }],
    notProxied:
      "other providers' keys (LiteLLM sends each to an endpoint of its own, which aider documents for OpenAI only); aider itself cannot be installed here, so this is tested against a fake of it",
  },
  opencode: {
    // Its catalogue, and npm: it installs a provider's SDK package when the provider is first used.
    hosts: [...PROVIDER_HOSTS, 'models.dev', 'registry.npmjs.org'],
    // Its providers are routed through its inline config instead (opencodeProviders).
    routes: [],
    notProxied:
      'keys its built-in providers read from the environment (ANTHROPIC_API_KEY, ...) and its login (auth.json), whose endpoints come from its catalogue; a provider in OPENCODE_CONFIG_CONTENT with options.baseURL is proxied, its options.apiKey too',
  },
};

/** One route as the proxy runs it: where it goes and the keys it puts in. */
export interface PlannedRoute {
  name: string;
  /** The upstream base URL (the user's own, or the API's), or why there is none to use. */
  upstream: string;
  /** The keys, each behind its placeholder; none: the CLI's own credentials pass as they are (a login). */
  keys: { placeholder: string; value: string; headers: readonly string[] }[];
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
 * it has a key for (the key goes behind a placeholder), or a base URL of the user's own (a login's
 * credentials then pass through). Every key variable a route knows leaves the agent's environment.
 */
export function egressPlan(kind: Config['agent']['kind'], env: NodeJS.ProcessEnv): EgressPlan {
  const spec = AGENT_EGRESS[kind];
  const routes: PlannedRoute[] = [];
  const edits: ((out: NodeJS.ProcessEnv, urls: Readonly<Record<string, string>>) => void)[] = [];
  for (const r of spec.routes) {
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
  const opencode = kind === 'opencode' ? opencodeProviders(env) : null;
  if (opencode) routes.push(...opencode.routes);
  return {
    hosts: spec.hosts,
    routes,
    agentEnv(urls) {
      const out = { ...env };
      for (const edit of edits) edit(out, urls);
      if (opencode) out.OPENCODE_CONFIG_CONTENT = opencode.config(urls);
      return out;
    },
  };
}

/**
 * opencode's providers in its inline config (OPENCODE_CONFIG_CONTENT): each with a base URL of its
 * own goes through a route, its literal key (not `{env:...}` or `{file:...}`) behind a placeholder.
 */
function opencodeProviders(
  env: NodeJS.ProcessEnv,
): { routes: PlannedRoute[]; config(urls: Readonly<Record<string, string>>): string } | null {
  let config: unknown;
  try {
    config = JSON.parse(env.OPENCODE_CONFIG_CONTENT ?? '');
  } catch {
    return null;
  }
  const providers = isObject(config) && isObject(config.provider) ? config.provider : null;
  if (!providers) return null;
  const routes: PlannedRoute[] = [];
  const names = new Map<string, string>();
  for (const [id, p] of Object.entries(providers)) {
    const options = isObject(p) && isObject(p.options) ? p.options : null;
    const base = typeof options?.baseURL === 'string' ? options.baseURL : null;
    if (!options || !base) continue;
    const name = `opencode-${routes.length}`;
    const key = typeof options.apiKey === 'string' && !/^\{(env|file):/.test(options.apiKey) ? options.apiKey : null;
    const p0 = key ? placeholder() : null;
    routes.push({
      name,
      upstream: base,
      keys:
        key && p0
          ? [{ placeholder: p0, value: key, headers: ['authorization', 'x-api-key', 'x-goog-api-key', 'api-key'] }]
          : [],
    });
    names.set(id, name);
    if (p0) options.apiKey = p0;
  }
  if (routes.length === 0) return null;
  return {
    routes,
    config(urls) {
      for (const [id, name] of names) {
        const options = (providers[id] as { options: Record<string, unknown> }).options;
        options.baseURL = urls[name];
      }
      return JSON.stringify(config);
    },
  };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
