// Where an agent may connect through forkflush's proxy (sandbox.network): host patterns, how one
// matches a host and port, and the package registries a task's setup commands name. Pure: the
// proxy (io/egress-proxy.ts) asks `matchHost` for every connection, the worker builds the list.

/** A host the config may name: a name, `*.` a domain's subdomains, `*` any host; with `:port` or not. */
const NAME = /^(?:\*|\*\.[a-z0-9-]+(?:\.[a-z0-9-]+)*|[a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/i;

/** The ports a pattern without one allows: HTTPS and plain HTTP. */
export const DEFAULT_PORTS = [443, 80];

/** Why `pattern` is not a host pattern, or null when it is one. */
export function hostPatternProblem(pattern: string): string | null {
  const m = NAME.exec(pattern);
  if (!m)
    return 'must be a host name, *.domain, * or an address, with :port or not (api.example.com, *.example.com, 127.0.0.1:8080)';
  if (m[1] !== undefined && (Number(m[1]) < 1 || Number(m[1]) > 65535)) return 'must have a port from 1 to 65535';
  return null;
}

/**
 * How a pattern list lets the agent reach `host:port`: 'named' when a pattern names the host
 * itself, 'wildcard' when only `*` or `*.domain` covers it (the proxy then refuses internal
 * addresses: a wildcard must not lead to this machine's loopback or a cloud's metadata service),
 * null when none does. Host names compare without case and a final dot.
 */
export function matchHost(patterns: readonly string[], host: string, port: number): 'named' | 'wildcard' | null {
  const h = normalHost(host);
  let found: 'named' | 'wildcard' | null = null;
  for (const p of patterns) {
    const { name, port: allowed } = splitPattern(p);
    if (allowed === null ? !DEFAULT_PORTS.includes(port) : allowed !== port) continue;
    if (name === h) return 'named';
    if (name === '*' || (name.startsWith('*.') && h.endsWith(name.slice(1)))) found = 'wildcard';
  }
  return found;
}

/** A host as the proxy compares it: lower case, no final dot, an IPv6 address without brackets. */
export function normalHost(host: string): string {
  return host
    .toLowerCase()
    .replace(/\.$/, '')
    .replace(/^\[(.*)\]$/, '$1');
}

function splitPattern(pattern: string): { name: string; port: number | null } {
  const bracketed = /^\[(.*)\](?::(\d+))?$/.exec(pattern);
  if (bracketed) return { name: normalHost(bracketed[1] ?? ''), port: bracketed[2] ? Number(bracketed[2]) : null };
  const colon = pattern.lastIndexOf(':');
  return colon === -1
    ? { name: normalHost(pattern), port: null }
    : { name: normalHost(pattern.slice(0, colon)), port: Number(pattern.slice(colon + 1)) };
}

/**
 * The package registries a setup command installs from, by the tools it runs: what the agent may
 * need to install one more package in its episode. A tool is a word of the command (its last path
 * part: `./node_modules/.bin/pnpm` is pnpm).
 */
const REGISTRIES: { tools: string[]; hosts: string[] }[] = [
  { tools: ['npm', 'npx', 'pnpm', 'yarn', 'corepack', 'bun'], hosts: ['registry.npmjs.org', 'registry.yarnpkg.com'] },
  {
    tools: ['pip', 'pip3', 'uv', 'uvx', 'poetry', 'pipenv', 'pdm', 'pipx'],
    hosts: ['pypi.org', 'files.pythonhosted.org'],
  },
  { tools: ['cargo'], hosts: ['crates.io', 'index.crates.io', 'static.crates.io'] },
  { tools: ['go'], hosts: ['proxy.golang.org', 'sum.golang.org'] },
  { tools: ['gem', 'bundle', 'bundler'], hosts: ['rubygems.org', 'index.rubygems.org'] },
  {
    tools: ['mvn', 'mvnw', 'gradle', 'gradlew'],
    hosts: ['repo.maven.apache.org', 'repo1.maven.org', 'plugins.gradle.org'],
  },
  { tools: ['conda', 'mamba', 'micromamba'], hosts: ['conda.anaconda.org', 'repo.anaconda.com'] },
  { tools: ['composer'], hosts: ['repo.packagist.org'] },
  { tools: ['dotnet', 'nuget'], hosts: ['api.nuget.org'] },
];

/** The registries the setup commands name (`python -m pip` counts as pip), each once. */
export function registriesFor(commands: readonly string[]): string[] {
  const words = new Set(
    commands.flatMap((c) => c.split(/[\s;&|()`'"]+/).map((w) => w.split('/').at(-1) ?? '')).filter(Boolean),
  );
  const hosts = REGISTRIES.filter((r) => r.tools.some((t) => words.has(t))).flatMap((r) => r.hosts);
  return [...new Set(hosts)];
}

/**
 * The note an episode gets for what the proxy refused: "the agent was refused 3 connections:
 * example.com:443 (2), 10.0.0.1:80 (1)", the most refused first; null when nothing was.
 */
/** Allowed targets the proxy could not reach (target: the last error), said with what to check; null when none. */
export function unreachableNote(unreachable: ReadonlyMap<string, string>, shown = 3): string | null {
  if (unreachable.size === 0) return null;
  const listed = [...unreachable].slice(0, shown).map(([target, why]) => `${target} (${why})`);
  const more = unreachable.size > shown ? `, and ${unreachable.size - shown} more` : '';
  return `forkflush's proxy could not reach ${listed.join(', ')}${more}: is this machine online, or does it reach the internet only through a proxy of its own (set HTTPS_PROXY for forkflush)?`;
}

export function refusedNote(refused: ReadonlyMap<string, number>, shown = 5): string | null {
  const all = [...refused.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const total = all.reduce((n, [, c]) => n + c, 0);
  if (total === 0) return null;
  const listed = all.slice(0, shown).map(([target, n]) => `${target} (${n})`);
  const more = all.length > shown ? `, and ${all.length - shown} more` : '';
  return `the agent was refused ${total} connection${total === 1 ? '' : 's'}: ${listed.join(', ')}${more}`;
}
