// A seal on a GitHub run's record: an HMAC of state.json and run.json with a key only the app
// holds. The record lives on a ref that any token with `contents: write` can rewrite (a worker
// job's, should it leak); a record the app did not write, say one whose grader command was
// swapped, fails the seal and is refused.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { RecordError } from '../core/records.js';

/** A record that is not the app's: its seal is missing or does not match. */
export class TamperedRecordError extends RecordError {
  override name = 'TamperedRecordError';
}

/**
 * The app's record key: FORKFLUSH_RECORD_KEY, else one derived from the webhook secret (hosted)
 * or from the app's private key (Actions mode with an app); null when there is nothing secret.
 */
export function recordKeyFrom(env: NodeJS.ProcessEnv): Buffer | null {
  const secret =
    env.FORKFLUSH_RECORD_KEY?.trim() ||
    env.WEBHOOK_SECRET?.trim() ||
    env.FORKFLUSH_APP_PRIVATE_KEY?.trim() ||
    env.PRIVATE_KEY?.trim();
  if (!secret) return null;
  return createHmac('sha256', 'forkflush record seal v1').update(secret).digest();
}

/**
 * A key of its own per repository: a record copied from another repository does not pass. By the
 * repository's id, which a rename or a transfer keeps; earlier releases keyed by `owner/repo`
 * (`byName`), which a rename broke, and their records are read with that key too.
 */
export function repositoryKey(key: Buffer, repository: { id: number } | { byName: string }): Buffer {
  const name = 'id' in repository ? `id:${repository.id}` : repository.byName.toLowerCase();
  return createHmac('sha256', key).update(name).digest();
}

/** run.json's text with its seal, for this state.json text. */
export function sealedFiles(key: Buffer, stateText: string, files: Record<string, unknown>): string {
  const { seal: _old, ...rest } = files;
  const body = JSON.stringify(rest, null, 1);
  return `${JSON.stringify({ ...rest, seal: mac(key, stateText, body) }, null, 1)}\n`;
}

/** Checks run.json's seal against state.json (made with one of `keys`); throws TamperedRecordError when it does not hold. */
export function checkSeal(keys: readonly Buffer[], stateText: string, filesText: string, where: string): void {
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(filesText) as Record<string, unknown>;
  } catch {
    throw new TamperedRecordError(`${where}: run.json is not valid JSON`);
  }
  const { seal, ...rest } = raw;
  const fix =
    "forkflush will not act on it; look at the ref's history, then remove the label and label the issue again to start over";
  if (typeof seal !== 'string' || !/^[0-9a-f]{64}$/.test(seal)) {
    throw new TamperedRecordError(
      `${where}: the run's record carries no seal of this app, so it was not written by it: ${fix}`,
    );
  }
  const body = JSON.stringify(rest, null, 1);
  const sealed = (key: Buffer) =>
    timingSafeEqual(Buffer.from(mac(key, stateText, body), 'hex'), Buffer.from(seal, 'hex'));
  if (!keys.some(sealed)) {
    throw new TamperedRecordError(
      `${where}: the run's record was changed outside forkflush (its seal does not match): ${fix}`,
    );
  }
}

function mac(key: Buffer, stateText: string, filesBody: string): string {
  const state = createHash('sha256').update(stateText).digest('hex');
  return createHmac('sha256', key).update(`${state}\n${filesBody}`).digest('hex');
}
