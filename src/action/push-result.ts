// The episode job's last step: its result, and the context its agent left, pushed to the forge.
// The result was paid for, so nothing of the context holds it back (a context that cannot be
// committed or pushed is left behind), a transport failure is tried again, and the episode's ref
// moves only from where the round left it: a ref deleted meanwhile (its round decided without this
// result) is not made again, and one moved holds another attempt's result.
import { setTimeout as sleep } from 'node:timers/promises';
import { resultFromCommit } from '../core/journal.js';
import { contextRef, refName } from '../core/names.js';
import type { Episode, EpisodeResult } from '../core/state.js';
import type { Git } from '../io/git.js';
import { type ContextStore, encryptContext, packFolder, SEALED_CONTEXT } from './contexts.js';
import type { RecordsRepo } from './records.js';
import type { PushedRef, Remote } from './remote.js';
import type { ActionSettings } from './settings.js';

/** The pauses before the second and third try of a push that failed in transport (GitHub's 5xx). */
export const PUSH_RETRY_SECONDS = [2, 8];

export interface ResultPush {
  s: ActionSettings;
  log: (line: string) => void;
  records: RecordsRepo;
  remote: Remote;
  episode: Episode;
  /** The episode's ref, at the episode's base until a result lands on it. */
  branchRef: string;
  /** The folder of the context the agent left. */
  contextDir: string;
}

/**
 * Pushes the result and the context together. Returns 'ran' once this result is on the episode's
 * ref, or the result another attempt pushed first (it stands, and this context is not pushed over
 * it); throws when the result cannot land, saying why.
 */
export async function pushResult(
  p: ResultPush,
  result: EpisodeResult,
  store: ContextStore,
): Promise<'ran' | EpisodeResult> {
  const { s, log, remote, episode, branchRef } = p;
  const branch = refName(branchRef);
  const ownRef = contextRef(s.run, episode.id);
  const leftBehind = (why: string) =>
    log(
      `the context was not pushed (${why}): the result is pushed alone, and the lineage's next episode starts with an empty context`,
    );
  let context = await commitContext(p, store).catch((e: unknown) => {
    leftBehind(messageOf(e));
    return null;
  });
  const resultRef = `${result.commit}:${branchRef}`;
  const lease = { ref: branchRef, expect: episode.base };
  let pushed: PushedRef[] | null = null;
  if (context) {
    // Once: a context of up to 1 GiB that breaks the upload would break it again.
    const tried = await remote.pushAtomic([resultRef, `+${context}:${ownRef}`], lease).catch((e: unknown) => e);
    if (!Array.isArray(tried)) leftBehind(messageOf(tried));
    // A context the forge refuses (GitHub takes no file over 100 MiB, and a sealed context is one file).
    else if (tried.some((x) => x.flag === '!') && !moved(tried.find((x) => x.ref === branchRef)))
      leftBehind(describeRefusal(tried));
    else pushed = tried;
    if (pushed === null) context = null;
  }
  pushed ??= await pushTrying(remote, [resultRef], lease, log);
  const branchPush = pushed.find((x) => x.ref === branchRef);
  if (branchPush && branchPush.flag !== '!') {
    log(`pushed: ${branch}${context ? ` and ${ownRef}` : ' (no context ref)'}`);
    return 'ran';
  }
  if (!moved(branchPush)) throw new Error(`the push was refused: ${describeRefusal(pushed)}`);
  const now = (await remote.listRefs([branchRef])).get(branchRef);
  if (now === undefined) {
    throw new Error(
      `the episode's ref ${branch} was deleted while the episode ran (its round was decided without this result, or someone deleted it): the result ${short(result.commit)} is not pushed`,
    );
  }
  // An earlier try of this push landed, its answer lost in transport.
  if (now === result.commit) {
    log(`pushed: ${branch} (no context ref)`);
    return 'ran';
  }
  await remote.fetch([branchRef]);
  const winner = await recordedResult(p.records.git, now, s.run, episode);
  if (!winner)
    throw new Error(`the branch ${branch} moved to ${short(now)} while the episode ran, not to a result of it`);
  log(`another attempt pushed its result first (${short(winner.commit)}): this attempt's result is dropped`);
  return winner;
}

/** A push tried up to three times while it fails in transport; a refusal is an answer, not retried. */
async function pushTrying(
  remote: Remote,
  refspecs: string[],
  lease: { ref: string; expect: string },
  log: (line: string) => void,
): Promise<PushedRef[]> {
  for (const pause of PUSH_RETRY_SECONDS) {
    try {
      return await remote.pushAtomic(refspecs, lease);
    } catch (e) {
      log(`the push failed (${messageOf(e)}): trying again in ${pause} s`);
      await sleep(pause * 1000);
    }
  }
  return remote.pushAtomic(refspecs, lease);
}

/** Refused because the ref is not where the episode left it: moved (another attempt), or gone. */
function moved(p: PushedRef | undefined): boolean {
  return p !== undefined && /^\[rejected\] \((non-fast-forward|fetch first|stale info)\)/.test(p.summary);
}

/** The commit holding the context the episode left, as the store says; null when none is pushed. */
async function commitContext(
  { records, s, episode, contextDir }: ResultPush,
  store: ContextStore,
): Promise<string | null> {
  const message = `forkflush ${episode.id}: the context it left (run ${s.run})`;
  if (store === 'none') return null;
  if (store === 'plain' || !s.contextKey) return records.commitFolder(contextDir, message);
  const archive = await packFolder(contextDir);
  if (archive.length === 0) return null;
  return records.commitFile(SEALED_CONTEXT, encryptContext(s.contextKey, s.run, episode.id, archive), message);
}

/** The result a commit records for this episode (on its base, with its trailers), or null when it is not one. */
export async function recordedResult(git: Git, commit: string, run: string, e: Episode): Promise<EpisodeResult | null> {
  const [parents = '', ...rest] = (await git.out(['log', '-1', '--format=%P%n%B', commit])).split('\n');
  const read = resultFromCommit(run, e, { sha: commit, message: rest.join('\n'), parents: parents.split(' ') });
  return 'result' in read ? read.result : null;
}

export function describeRefusal(pushed: PushedRef[]): string {
  const refused = pushed.filter((p) => p.flag === '!' && !p.summary.includes('atomic push failed'));
  return (refused.length > 0 ? refused : pushed).map((p) => `${p.ref} ${p.summary}`).join('; ');
}

export function short(sha: string): string {
  return sha.slice(0, 10);
}

function messageOf(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? '';
}
