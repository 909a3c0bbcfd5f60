// A handler's context: the GitHub API of the event's repository, the clock, and a logger that says
// which delivery, run, round and episode each line is about; and how a handler meets a run
// record this app did not write.
import type { Context } from 'probot';
import pkg from '../../package.json' with { type: 'json' };
import { GitHubApi } from '../github/api.js';
import { TamperedRecordError } from '../github/record-seal.js';
import type { SyncContext } from '../github/sync.js';

export interface AppOptions {
  now?: () => Date;
  /** Actions mode: the tick's workflow, which the app enables while a run needs it (GITHUB.tickWorkflow). */
  tick?: string;
  /** Seals the run records (src/github/record-seal.ts); null: they are not sealed. */
  recordKey?: Buffer | null;
}

/** The fields of a log line that say what it is about. */
export interface LogFields {
  run?: string;
  round?: number;
  episode?: string;
  [key: string]: unknown;
}

type Log = Context['log'];

/** A handler's context: the sync's, and the event's logger (delivery, run, round, episode). */
export interface AppContext extends SyncContext {
  logger: Log;
  log: (line: string, fields?: LogFields) => void;
}

/** The forkflush release this app is, stamped on every run record it saves. */
export const RELEASE: string = pkg.version;

/** Makes the context of one event's handler. */
export type ContextOf = (context: Context, fields?: LogFields) => AppContext;

/** The contexts of the app's handlers, with its options. */
export function contexts(options: AppOptions): ContextOf {
  const now = options.now ?? (() => new Date());
  return (context, fields = {}) => {
    const { owner, repo } = context.repo();
    const logger = context.log.child({ delivery: context.id, ...fields });
    const id = (context.payload as { repository?: { id?: unknown } }).repository?.id;
    return {
      api: new GitHubApi(
        context.octokit,
        owner,
        repo,
        options.recordKey ?? null,
        RELEASE,
        typeof id === 'number' ? id : null,
      ),
      now: now(),
      ...(options.tick ? { tick: options.tick } : {}),
      logger,
      log: (line, more) => logger.info(more ?? {}, line),
    };
  };
}

/**
 * Runs a handler's work; a run record this app did not write stops it. The person who asked (a
 * label, a command) is told on the issue, once per event (`key`); a job's event only logs it.
 */
export async function answeringTampered(
  ctx: AppContext,
  asker: { issue: number; key: string } | null,
  work: () => Promise<unknown>,
) {
  try {
    await work();
  } catch (e) {
    if (!(e instanceof TamperedRecordError)) throw e;
    ctx.logger.warn(`forkflush: refused a run record: ${e.message}`);
    if (asker) await ctx.api.issues.commentOnce(asker.issue, asker.key, `forkflush did nothing: ${e.message}.`);
  }
}
