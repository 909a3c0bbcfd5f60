// A seal on a result commit: an HMAC of its message, tree and parent with a key that lives in
// the run folder, outside every sandbox. A result read back from a commit (after a crash) counts
// only if its seal holds: an agent can write trailers into a commit message, not the seal.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { SEAL_TRAILER as TRAILER } from '../core/journal.js';

export function newSealKey(): Buffer {
  return randomBytes(32);
}

/** The message with its seal as the last trailer. */
export function sealMessage(key: Buffer, message: string, tree: string, parent: string): string {
  const text = message.endsWith('\n') ? message : `${message}\n`;
  return `${text}${TRAILER}: ${mac(key, text, tree, parent)}\n`;
}

/** Whether the message carries a seal made with `key` for this tree and parent. */
export function verifySeal(key: Buffer, message: string, tree: string, parent: string): boolean {
  const m = new RegExp(`^${TRAILER}: ([0-9a-f]{64})\\n?$`, 'm').exec(message);
  if (!m) return false;
  const text = message.slice(0, m.index);
  const expected = Buffer.from(mac(key, text, tree, parent), 'hex');
  const found = Buffer.from(m[1] as string, 'hex');
  return expected.length === found.length && timingSafeEqual(expected, found);
}

function mac(key: Buffer, text: string, tree: string, parent: string): string {
  return createHmac('sha256', key).update(`${tree}\n${parent}\n${text}`).digest('hex');
}
