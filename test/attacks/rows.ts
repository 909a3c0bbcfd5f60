// What the rows of rounds 7 and 8 share: a forgery without and with its trick, and whether the
// honest-grader rows can run a real pytest (CI installs python3-pytest; they skip loudly without).
import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';
import { type makeAttackRepo, runLocal } from './helpers.js';

/** Two rows: the forgery without its trick (voided, `named` in the reason) and with it (voided all the same). */
export function controlAndTrick(
  task: (trick: boolean) => ReturnType<typeof makeAttackRepo>,
  control: string,
  named: RegExp,
  trick: string,
): void {
  it(control, async () => {
    const { result } = await runLocal(task(false));
    expect(result.score).toBeNull();
    expect(result.reason).toMatch(named);
  }, 600_000);
  it(trick, async () => {
    const { result } = await runLocal(task(true));
    expect(result.score, result.reason ?? result.note ?? '').not.toBe(100);
  }, 600_000);
}

export function hasPytest(): boolean {
  try {
    execFileSync('python3', ['-c', 'import pytest'], { stdio: 'ignore' });
    return true;
  } catch {
    console.warn(
      '\n*** pytest is not installed (apt-get install python3-pytest): the honest pytest grader rows are SKIPPED ***\n',
    );
    return false;
  }
}
