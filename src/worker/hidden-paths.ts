// A path the sandbox hides, named as the cause of a failure: the agent (or its shell) says a
// program or a file was not found, and it is there outside the sandbox. A fake CLI on a PATH
// folder under /tmp (the sandbox's /tmp is its own), a script in the home folder or in the
// repository itself (both hidden): the fix is sandbox.read, or the repository's own copy, never
// agent.command. The pre-flight (local/preflight.ts) finds most of these before a run starts;
// this names the ones it could not see (a path an agent's own script names).
import { stat } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import type { AgentFailure } from '../core/failure.js';
import { quoteLine } from '../core/failure.js';
import { findExecutable } from '../io/executables.js';
import { isInside } from '../io/sandbox.js';

export interface HiddenPathContext {
  /** The episode's workspace (a path in it is not hidden). */
  workspace: string;
  /** The PATH the agent had: a bare program name is looked for there. */
  path: string;
  /** The repository and forkflush's folders: a file there is named relative to the repository instead. */
  repositories: string[];
}

/**
 * The failure of a path the agent could not find and the sandbox hides (it exists outside), or
 * null. `missing` are what the agent's output says was not found (core/failure.ts notFoundPaths);
 * `text` that output, for the agent's own line.
 */
export async function hiddenPathFailure(
  missing: string[],
  text: string,
  c: HiddenPathContext,
): Promise<AgentFailure | null> {
  for (const name of missing) {
    const outside = await whereOutside(name, c);
    if (!outside) continue;
    const isFolder = (await stat(outside).catch(() => null))?.isDirectory() === true;
    const folder = isFolder ? outside : dirname(outside);
    const line = text.split('\n').find((l) => l.includes(name)) ?? `${name}: not found`;
    const repo = c.repositories.find((r) => isInside(outside, r));
    return {
      kind: 'hidden-path',
      quote: quoteLine(line),
      fix: repo
        ? `${outside} is in the repository, which the sandbox hides (the workspace is the episode's checkout of it): ` +
          `name it relative to the repository (${relative(repo, outside)}) in the config, then start a new run`
        : `${outside} is there, but the sandbox hides ${folder}: add it to the config (sandbox: {read: [${JSON.stringify(folder)}]}), ` +
          'or move it into the repository, then start a new run',
    };
  }
  return null;
}

/** Where a name the agent could not find is outside the sandbox, if it is there and not in the workspace. */
async function whereOutside(name: string, c: HiddenPathContext): Promise<string | null> {
  let found: string | null = null;
  if (isAbsolute(name)) found = (await stat(name).catch(() => null)) ? resolve(name) : null;
  else if (!name.includes('/')) found = await findExecutable(name, c.path);
  // A relative path with a folder is the workspace's: missing there, it is missing, not hidden.
  if (!found || isInside(found, c.workspace)) return null;
  return found;
}
