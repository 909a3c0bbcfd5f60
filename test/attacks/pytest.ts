// The honest-grader rows run a real pytest (CI installs python3-pytest); where it is missing they
// skip, and say so loudly.
import { execFileSync } from 'node:child_process';

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
