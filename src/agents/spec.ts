// The shape of an agent kind: a spec declares what is its CLI's own (facts and readers, no control
// flow), and the session runner (runner.ts) does the rest the same way for every kind.
import type { Config } from '../core/config.js';
import type { ExitReason } from '../core/state.js';
import type { Spent } from '../core/usage.js';
import type { LoginFile } from '../io/logins.js';
import type { RunResult } from '../io/process.js';
import type { AgentSession } from './agent.js';
import type { Lines } from './transcript.js';

/** A CLI's package, pinned: what `npm run test:agents` and the Action install (scripts/install-agent-clis.mjs). */
export interface CliFacts {
  executable: string;
  package: string;
  /** The version forkflush was tested with. */
  version: string;
  installer: 'npm' | 'pip';
  /** The secret its GitHub worker step reads (`forkflush init --github` writes it). */
  secret: { name: string; note: string };
}

/** One episode as a spec sees it: the session, the agent's config, and the folders of its own. */
export interface Episode extends AgentSession {
  agent: Config['agent'];
  /** agent.command, or the CLI's executable. */
  executable: string;
  /** `<context>/home`: the CLI's home, carried with the context. */
  home: string;
}

/** A carried conversation that cannot go on, and why (the episode then starts a fresh one). */
export interface Unusable {
  unusable: string;
}

/** What one run of the CLI is, and how to read it: made by `AgentSpec.start` for each episode. */
export interface CliRun {
  /** What runs, when not `Episode.executable`. */
  executable?: string;
  args: string[];
  /** The CLI's own variables, over the session's environment and forkflush's contract. */
  env?: Record<string, string>;
  /** Variables of the session's environment the CLI must not get. */
  unset?: string[];
  input?: string;
  cwd?: string;
  /** Login files copied into its home for the run, removed afterwards (io/logins.ts installLogins). */
  logins?: LoginFile[];
  /** What the episode has spent so far (null: nothing yet), read every `pollMs` while it runs (unless `watch` is false) and once at its end (`run`). */
  spent?: (run?: RunResult) => Promise<Spent | null>;
  pollMs?: number;
  watch?: boolean;
  /** Bounds of the CLI's own kind, checked while it runs: why it must stop now, or null. */
  bounds?: () => Promise<string | null>;
  /** Why no usage is known, when `spent` says nothing in the end ("Codex recorded no session"). */
  noUsage?: () => string | null;
  /** How the run ended in the CLI's terms; `restart`: it found no conversation to resume (the runner starts afresh). */
  ending?: (run: RunResult) => Ending;
  /** forkflush's record of the conversation (session.json), asked before the run and after it; null: none. */
  record?: (run?: RunResult) => Promise<Record<string, unknown> | null>;
  /** Runs when the CLI's process has ended, whatever happened. */
  after?: () => Promise<void>;
}

export interface Ending {
  exit?: ExitReason;
  /** The CLI's own line that says why it failed (its error event, its result's message), and the provider's HTTP status where it states one. */
  why?: string | null;
  status?: number | null;
  note?: string;
  restart?: string;
}

/** A variable that holds a key. */
export interface KeyVariable {
  name: string;
  /** The variable the agent gets the placeholder in, when it is not `name` (Codex reads OPENAI_API_KEY for a provider of its own). */
  placeholderIn?: string;
  /** The request headers the CLI sends this key in: the only places the proxy puts the real key. */
  headers: readonly string[];
}

/** A model API whose calls can go through forkflush's proxy, which puts the real key where the CLI put a placeholder. */
export interface ModelRoute {
  /** Lower case: the proxy's socket for it, notes. */
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

/** One route as the proxy runs it: where it goes and the keys it puts in. */
export interface PlannedRoute {
  name: string;
  /** The upstream base URL: the user's own, or the API's. */
  upstream: string;
  /** The keys, each behind its placeholder; none: the CLI's own credentials pass as they are (a login). */
  keys: { placeholder: string; value: string; headers: readonly string[] }[];
}

/** Routes a CLI's own config names, and that config pointed at the proxy (`urls`: each route's address). */
export interface ConfigRoutes {
  routes: PlannedRoute[];
  env(urls: Readonly<Record<string, string>>): Record<string, string>;
}

/** What a CLI reaches on the network, and which of its keys the proxy can hold for it (worker/egress.ts; README, "Safety"). */
export interface EgressFacts {
  /** The API and login hosts its CLI reaches, allowed through the proxy by default. */
  hosts: readonly string[];
  /** The model APIs it takes a base URL and a key for from its environment. */
  routes: readonly ModelRoute[];
  /** Model APIs its own config in the environment names (opencode's), each key behind a `placeholder()`. */
  configRoutes?: (env: NodeJS.ProcessEnv, placeholder: () => string) => ConfigRoutes | null;
  /** What of its credentials the proxy cannot take from the agent, and why. */
  notProxied: string;
}

/** What counts as a login: any of these variables set, an argument of `args`, or a login file of `files`. */
export interface LoginFacts {
  /** Variables that hold a key (then no login file is copied in), or `NAME=value`. */
  keys: readonly string[];
  /** Other variables that make it log in otherwise (a cloud provider, an endpoint of the user's). */
  other?: readonly string[];
  /** An argument in agent.args that names a login or provider of the user's own. */
  args?: RegExp;
  /** Its login files in the user's home, and where they go in the episode's `home`. */
  files?: (home: string) => LoginFile[];
  /** What it lacks ("API key and no login"), and how to give it one. */
  lacks?: string;
  how: string;
}

export interface AgentSpec<Saved = unknown> {
  kind: string;
  /** How messages name it: "Claude Code". */
  name: string;
  cli?: CliFacts;
  /** Environment variables it needs (its keys, endpoints, switches): names, or prefixes with *. */
  passEnv: readonly string[];
  egress: EgressFacts;
  /** What counts as a login; the runner refuses to start a CLI that has none (adapterOf). */
  login?: LoginFacts;
  /** The conversation's id in session.json: its key there (default `sessionId`) and the shape of an id. */
  session?: { key?: string; id: RegExp };
  /** The carried conversation (`record`: session.json, `id` checked by `session`), moved where the CLI looks. */
  resume?: (e: Episode, record: Record<string, unknown>, id: string) => Promise<Saved | Unusable>;
  /** This episode's run of the CLI (`saved`: the carried conversation, null for a fresh one). */
  start: (e: Episode, saved: Saved | null) => Promise<CliRun>;
  /** Its transcript in a job log: one short line per message and tool call (transcript.ts). */
  transcript?: (text: string, out: Lines, other: string[]) => void;
  /** More of the transcript, from files it keeps in its context (Gemini's session file), since the episode began. */
  contextTranscript?: (contextDir: string, since: Date, out: Lines) => Promise<boolean>;
  /** Its final message in its stdout (the map's judge answers in it), or null when there is none. */
  finalMessage: (stdout: string) => string | null;
  /** The version its log states, if it states one. */
  version?: (log: string) => string | null;
}

/** Longer prompts go on stdin: one argument may not exceed 128 KiB on Linux. */
export const MAX_PROMPT_ARG = 100_000;

/** The shape of a session id most CLIs choose (and forkflush chooses for them): a UUID. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Makes a spec, typed by its saved conversation within, and as any spec without. */
export function defineSpec<Saved>(spec: AgentSpec<Saved>): AgentSpec {
  return spec as unknown as AgentSpec;
}
