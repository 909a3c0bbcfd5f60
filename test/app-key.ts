// Vitest's global setup for the chaos suite: the GitHub box's app private key (test/github/app-auth.ts),
// made once for the whole run and handed to the test workers in FORKFLUSH_TEST_APP_KEY. An RSA key
// costs a few tenths of a CPU-second, and each shard file evaluates app-auth.ts afresh.
import { generateKeyPairSync } from 'node:crypto';

export default function setup(): void {
  // Set before the test workers start: they inherit it.
  process.env.FORKFLUSH_TEST_APP_KEY ??= generateKeyPairSync('rsa', { modulusLength: 2048 })
    .privateKey.export({ type: 'pkcs1', format: 'pem' })
    .toString();
}
