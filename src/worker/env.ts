// What the agent and the grader may see of forkflush's environment: an allowlist, not a denylist.
// The system's basics (PATH, locale, proxies and certificates), the names the agent's adapter
// needs, and the names the user lists (agent.env, grader.env). Forge credentials never, even when
// listed: they are refused when the config is read, and dropped here again.
import { isForgeSecret } from '../core/secrets.js';

/** Always passed: what any program expects to find. HOME and TMPDIR are set by the worker. */
const BASICS = [
  'PATH',
  'LANG',
  'LANGUAGE',
  'LC_*',
  'TZ',
  'TERM',
  'COLORTERM',
  'NO_COLOR',
  'FORCE_COLOR',
  'CI',
  'USER',
  'LOGNAME',
  'SHELL',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'all_proxy',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'NODE_EXTRA_CA_CERTS',
  'REQUESTS_CA_BUNDLE',
];

/**
 * The variables of `env` whose names are basics or match `names` (exact, or a prefix ending in
 * `*`), without forge credentials.
 */
export function allowedEnv(env: NodeJS.ProcessEnv, names: readonly string[]): NodeJS.ProcessEnv {
  const patterns = [...BASICS, ...names];
  const exact = new Set(patterns.filter((p) => !p.endsWith('*')));
  const prefixes = patterns.filter((p) => p.endsWith('*')).map((p) => p.slice(0, -1));
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || isForgeSecret(name)) continue;
    if (!exact.has(name) && !prefixes.some((p) => name.startsWith(p))) continue;
    // A proxy's password is the machine's, and what the grader or setup runs is the agent's code:
    // passed only where the config lists the variable itself.
    out[name] = PROXIES.has(name) && !names.includes(name) ? withoutCredentials(value) : value;
  }
  return out;
}

const PROXIES = new Set(BASICS.filter((n) => /_proxy$/i.test(n) && !/^no_/i.test(n)));

/** A proxy URL without its user and password (a value that is not a URL, as it is). */
function withoutCredentials(value: string): string {
  try {
    const u = new URL(value);
    if (!u.username && !u.password) return value;
    u.username = '';
    u.password = '';
    return u.href.replace(/\/$/, value.endsWith('/') ? '/' : '');
  } catch {
    return value;
  }
}
