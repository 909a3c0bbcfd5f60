// The job's repository on the forge. Every git command that talks to it runs in the records
// repository (forkflush's own, outside every sandbox) and gets the token as an HTTP header
// through its environment (GIT_CONFIG_COUNT), scoped to the forge's URL: never on a command line
// (/proc/<pid>/cmdline is world-readable), never in a file. The records repository's config is
// written afresh before each such command, and the user's global config is not read, so an
// `insteadOf` or a credential helper planted there cannot redirect the token.
import { NETWORK_GIT_STALL_SECONDS } from '../core/bounds.js';
import type { GitResult } from '../io/git.js';
import type { RecordsRepo } from './records.js';

export interface PushedRef {
  ref: string;
  /** git push --porcelain's flag: ' ' fast-forward, '+' forced, '*' new, '=' up to date, '!' rejected. */
  flag: string;
  /** e.g. "[rejected] (non-fast-forward)". */
  summary: string;
}

export class Remote {
  private readonly auth: NodeJS.ProcessEnv;

  constructor(
    readonly url: string,
    token: string,
    private readonly records: RecordsRepo,
  ) {
    this.auth = authEnv(url, token);
  }

  /** The remote's commits for the refs named (exact names); refs it does not have are left out. */
  async listRefs(refs: string[]): Promise<Map<string, string>> {
    const out = await this.run(['ls-remote', this.url, ...refs]);
    const found = new Map<string, string>();
    for (const line of out.split('\n')) {
      const [sha, name] = line.split('\t');
      if (sha && name && refs.includes(name)) found.set(name, sha);
    }
    return found;
  }

  /** Fetches refs into the records repository under the same names. */
  async fetch(refs: string[]): Promise<void> {
    if (refs.length > 0) await this.run(['fetch', '--quiet', '--no-tags', this.url, ...refs.map((r) => `+${r}:${r}`)]);
  }

  /**
   * Fetches one commit by its id, with no ref to name it: the run's base, which a branch may have
   * left by now (GitHub serves any commit reachable from a ref).
   */
  async fetchCommit(sha: string): Promise<void> {
    await this.run(['fetch', '--quiet', '--no-tags', this.url, sha]);
  }

  /** Fetches commits by their ids in one command (a map's snapshots, some on refs deleted since). */
  async fetchCommits(shas: string[]): Promise<void> {
    if (shas.length > 0) await this.run(['fetch', '--quiet', '--no-tags', this.url, ...shas]);
  }

  /**
   * Pushes the refspecs in one transaction (all land or none). A rejection is a result, not an
   * error: the caller reads each ref's status. Transport and permission failures throw. With a
   * lease, `lease.ref` moves only from `lease.expect` (else "[rejected] (stale info)"), also when
   * the ref is gone.
   */
  async pushAtomic(refspecs: string[], lease?: { ref: string; expect: string }): Promise<PushedRef[]> {
    const leased = lease ? [`--force-with-lease=${lease.ref}:${lease.expect}`] : [];
    const out = await this.run(['push', '--porcelain', '--atomic', ...leased, this.url, ...refspecs], [0, 1]);
    const refs = out
      .split('\n')
      .map((line) => /^(.)\t[^\t]*:([^\t]+)\t(.*)$/.exec(line))
      .filter((m) => m !== null)
      .map((m) => ({ flag: m[1] as string, ref: m[2] as string, summary: m[3] as string }));
    if (refs.length === 0) throw new Error(`git push to ${this.url} reported no refs: ${out.trim() || '(no output)'}`);
    return refs;
  }

  private async run(args: string[], okCodes = [0]): Promise<string> {
    await this.records.resetConfig();
    // A server that stops answering fails the command within a minute, not at GIT_TIMEOUT_MS: git's
    // own stall bound for http (bytes per second, for so many seconds).
    const stall = { GIT_HTTP_LOW_SPEED_LIMIT: '1000', GIT_HTTP_LOW_SPEED_TIME: String(NETWORK_GIT_STALL_SECONDS) };
    const r: GitResult = await this.records.git.exec(args, { check: false, env: { ...this.auth, ...stall } });
    if (r.exitCode !== null && okCodes.includes(r.exitCode)) return r.stdout;
    const why = r.stderr.trim().split('\n').slice(-3).join(' ') || `exit ${r.exitCode}`;
    throw new Error(`git ${args[0]} ${this.url} failed: ${why}`);
  }
}

/**
 * The environment that authenticates one command against an https remote (basic auth with the
 * token as password, as GitHub expects from a GitHub App or Actions token), for that remote's
 * URLs only. Plain http gets the token only on this machine (a GitHub server on loopback, as in
 * tests): a token never crosses a network in clear. Other remotes (file://) need none.
 */
export function authEnv(url: string, token: string): NodeJS.ProcessEnv {
  const isolated = { GIT_CONFIG_GLOBAL: '/dev/null' };
  if (!token || !sendsCredentials(url)) return isolated;
  const origin = new URL(url).origin;
  return {
    ...isolated,
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: `http.${origin}/.extraheader`,
    GIT_CONFIG_VALUE_0: `AUTHORIZATION: basic ${basicCredentials(token)}`,
  };
}

/** The header's credentials: they encode the token, so the log masks them too. */
export function basicCredentials(token: string): string {
  return Buffer.from(`x-access-token:${token}`, 'utf8').toString('base64');
}

function sendsCredentials(url: string): boolean {
  const lower = url.toLowerCase();
  if (lower.startsWith('https://')) return true;
  if (!lower.startsWith('http://')) return false;
  const host = new URL(url).hostname;
  return host === '127.0.0.1' || host === 'localhost' || host === '[::1]';
}
