// The forkflush Action's reference as `init --github --action REPO@TAG` writes it: pinned to the
// tag's full commit SHA, with a comment naming the version (`uses: acme/forkflush@<sha> # v0.1.0`),
// so that what the workflows run cannot change under them when a tag moves. The tag is resolved
// with `git ls-remote` against github.com, through git's own credentials and settings (a private
// repository works where `git clone` does; no token of forkflush's); when it cannot be (offline, no
// such tag), the tag is written and the user is told the one command that pins it.
import { tmpdir } from 'node:os';
import { UserError } from '../core/errors.js';
import { runProcess } from '../io/process.js';

/** How long resolving the tag may take before init writes the tag itself (a slow or absent network). */
export const ACTION_PIN_TIMEOUT_MS = 20_000;

/** The reference to write, the version to name after it, and what the user must do when it is not pinned. */
export interface PinnedAction {
  /** `REPO@SHA`, or `REPO@REF` as given when it could not be pinned. */
  action: string;
  /** The tag it was pinned from, named in a comment after it. */
  version?: string;
  /** Why it is not pinned, and how to pin it. */
  note?: string;
}

/** `REPO@REF` pinned to its commit (a full SHA given is kept as it is); git runs with `env`. */
export async function pinAction(action: string, env: NodeJS.ProcessEnv): Promise<PinnedAction> {
  const at = action.lastIndexOf('@');
  const repo = at > 0 ? action.slice(0, at) : action;
  const ref = at > 0 ? action.slice(at + 1) : '';
  // What GitHub takes in `uses:` for a repository's Action: OWNER/REPO@REF (a ref git accepts).
  if (!/^[A-Za-z0-9-]+\/[A-Za-z0-9._-]+$/.test(repo) || !/^[A-Za-z0-9._/-]+$/.test(ref) || /\.\.|^\/|\/$/.test(ref))
    throw new UserError(
      `--action: ${JSON.stringify(action)} is not OWNER/REPO@REF (the forkflush repository and a release tag or commit, e.g. acme/forkflush@v0.1.0)`,
    );
  if (/^[0-9a-f]{40}$/.test(ref)) return { action };
  const url = `https://github.com/${repo}`;
  const how = `pin it: \`git ls-remote ${url} 'refs/tags/${ref}^{}' 'refs/tags/${ref}'\` prints its commit; write \`uses: ${repo}@<that commit> # ${ref}\` in .github/workflows/forkflush.yml`;
  const r = await runProcess('git', ['ls-remote', url, `refs/tags/${ref}`, `refs/tags/${ref}^{}`], {
    cwd: tmpdir(),
    // Never a prompt for a password: init may run where nobody answers.
    env: { ...env, GIT_TERMINAL_PROMPT: '0' },
    timeoutMs: ACTION_PIN_TIMEOUT_MS,
  });
  const sha = commitOfTag(r.stdout, ref);
  if (r.exitCode === 0 && sha) return { action: `${repo}@${sha}`, version: ref };
  const why =
    r.exitCode === 0
      ? `${url} has no tag ${ref}`
      : r.stopped === 'timeout'
        ? `git ls-remote ${url} took over ${ACTION_PIN_TIMEOUT_MS / 1000} s`
        : `git ls-remote ${url} failed: ${(r.spawnError ?? r.stderr).trim().split('\n')[0]}`;
  return { action, note: `the workflows use ${action}, a tag, not its commit (${why}); ${how}.` };
}

/** The commit a tag names in `git ls-remote` output: an annotated tag's peeled line (`^{}`) first. */
export function commitOfTag(listing: string, tag: string): string | null {
  const lines = listing.split('\n').map((l) => l.split('\t'));
  const find = (name: string) => lines.find(([sha, ref]) => ref === name && /^[0-9a-f]{40}$/.test(sha ?? ''))?.[0];
  return find(`refs/tags/${tag}^{}`) ?? find(`refs/tags/${tag}`) ?? null;
}
