// The job's repository on the forge. Every git command that talks to it gets the token as an
// extra HTTP header on its own command line (`-c http.extraheader=...`), so the token is never
// written to a git config, a file or an environment variable the agent inherits.
import type { Git } from '../io/git.js';

export interface PushedRef {
  ref: string;
  /** git push --porcelain's flag: ' ' fast-forward, '+' forced, '*' new, '=' up to date, '!' rejected. */
  flag: string;
  /** e.g. "[rejected] (non-fast-forward)". */
  summary: string;
}

export class Remote {
  private readonly auth: string[];

  constructor(
    readonly url: string,
    token: string,
  ) {
    this.auth = authArgs(url, token);
  }

  /** The remote's commits for the refs named (exact names); refs it does not have are left out. */
  async listRefs(git: Git, refs: string[]): Promise<Map<string, string>> {
    const out = await this.run(git, ['ls-remote', this.url, ...refs]);
    const found = new Map<string, string>();
    for (const line of out.split('\n')) {
      const [sha, name] = line.split('\t');
      if (sha && name && refs.includes(name)) found.set(name, sha);
    }
    return found;
  }

  async fetch(git: Git, refspecs: string[]): Promise<void> {
    await this.run(git, ['fetch', '--quiet', '--no-tags', this.url, ...refspecs]);
  }

  /**
   * Pushes the refspecs in one transaction (all land or none). A rejection is a result, not an
   * error: the caller reads each ref's status. Transport and permission failures throw.
   */
  async pushAtomic(git: Git, refspecs: string[]): Promise<PushedRef[]> {
    const out = await this.run(git, ['push', '--porcelain', '--atomic', this.url, ...refspecs], [0, 1]);
    const refs = out
      .split('\n')
      .map((line) => /^(.)\t[^\t]*:([^\t]+)\t(.*)$/.exec(line))
      .filter((m) => m !== null)
      .map((m) => ({ flag: m[1] as string, ref: m[2] as string, summary: m[3] as string }));
    if (refs.length === 0) throw new Error(`git push to ${this.url} reported no refs: ${out.trim() || '(no output)'}`);
    return refs;
  }

  private async run(git: Git, args: string[], okCodes = [0]): Promise<string> {
    const r = await git.exec([...this.auth, ...args], { check: false });
    if (r.exitCode !== null && okCodes.includes(r.exitCode)) return r.stdout;
    // Said without the auth arguments: GitError would quote the whole command line, header included.
    const why = r.stderr.trim().split('\n').slice(-3).join(' ') || `exit ${r.exitCode}`;
    throw new Error(`git ${args[0]} ${this.url} failed: ${why}`);
  }
}

/**
 * The `-c` arguments that authenticate one command against an https remote (basic auth with the
 * token as password, as GitHub expects from a GitHub App or Actions token). Plain http gets the
 * token only on this machine (a GitHub server on loopback, as in tests): a token never crosses a
 * network in clear. Other remotes (file://) need none.
 */
export function authArgs(url: string, token: string): string[] {
  if (!token || !sendsCredentials(url)) return [];
  return ['-c', `http.extraheader=AUTHORIZATION: basic ${basicCredentials(token)}`];
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
