// Vitest's global setup for every suite: the tests' temp folders (tmpdir()) go in one folder of
// this run's, removed when it ends, passed or failed. A run leaves nothing behind, and a CI disk
// holds one run's files at a time (an agent CLI may unpack hundreds of megabytes per episode).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeTree } from '../src/io/agent-files.js';

export default function setup(): () => Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'forkflush-tests-'));
  // Set before the test workers start: they inherit it, and os.tmpdir() reads it on every call.
  process.env.TMPDIR = root;
  return () => removeTree(root);
}
