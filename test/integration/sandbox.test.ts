// Where bubblewrap is installed (CI installs it) the sandbox must work: every sandboxed test would
// otherwise run unconfined without a word, as `sandbox: auto` allows.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { probeSandbox } from '../../src/io/sandbox.js';

function installed(): boolean {
  try {
    execFileSync('bwrap', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const bwrap = installed();
if (!bwrap)
  console.warn('\n*** bubblewrap is not installed: the sandbox tests are SKIPPED (apt-get install bubblewrap) ***\n');

describe.skipIf(!bwrap)('the sandbox on this machine', () => {
  it('works where bubblewrap is installed, and runs as nobody under root', async () => {
    const probe = await probeSandbox();
    expect(probe).toHaveProperty('sandbox');
    if ('sandbox' in probe && process.getuid?.() === 0) expect(probe.sandbox.user).toEqual({ uid: 65534, gid: 65534 });
  });
});
