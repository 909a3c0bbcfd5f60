// The events a run has acted on, as bounded lists of keys in its record: a webhook delivery GitHub
// sends twice, or a command a second delivery carries again, is acted on once.
import { SEEN_MAX_KEYS } from './bounds.js';

/** The key of a webhook delivery (its X-GitHub-Delivery). */
export function deliveryKey(id: string): string {
  return `delivery:${id}`;
}

/** The key of an issue comment (a command): one comment is one command, whatever delivers it. */
export function commentKey(id: number): string {
  return `comment:${id}`;
}

/** Whether any of the keys is in the list. */
export function seenAny(list: readonly string[] | undefined, keys: readonly string[]): boolean {
  return keys.some((k) => list?.includes(k));
}

/** The list with the keys added as the newest, the oldest dropped beyond SEEN_MAX_KEYS. */
export function remember(list: readonly string[] | undefined, keys: readonly string[]): string[] {
  const kept = (list ?? []).filter((k) => !keys.includes(k));
  return [...kept, ...keys].slice(-SEEN_MAX_KEYS);
}
