// The agent's checkout: GITHUB_WORKSPACE, holding the episode's branch and nothing else. It is
// made from scratch each time, so a self-hosted runner's leftovers never leak into an episode.
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Git } from '../io/git.js';
import type { Remote } from './remote.js';

export interface Workspace {
  git: Git;
  /** The workspace's .git folder. */
  gitDir: string;
  /** Where the episode's branch was on the remote. */
  head: string;
}

/**
 * Empties the folder, makes a repository there and checks out the branch from the remote, with its
 * whole history (the worker needs the base commit; agents read the history). No remote is
 * configured and no credential is stored: `.git/config` is git's defaults only.
 */
export async function checkoutBranch(dir: string, remote: Remote, branch: string): Promise<Workspace> {
  await mkdir(dir, { recursive: true });
  for (const entry of await readdir(dir)) await rm(join(dir, entry), { recursive: true, force: true });
  const git = new Git(dir);
  await git.exec(['init', '--quiet']);
  const tracking = `refs/remotes/origin/${branch}`;
  await remote.fetch(git, [`+refs/heads/${branch}:${tracking}`]);
  const head = await git.revParse(tracking);
  if (!head) throw new Error(`the branch ${branch} was fetched but ${tracking} is missing`);
  await git.exec(['-c', 'checkout.workers=0', 'checkout', '--quiet', '-B', branch, head]);
  return { git, gitDir: join(dir, '.git'), head };
}
