// What the judge's grader lacks, named from its failures: a package Node cannot load stops a run
// before any agent; a file the agent is to write does not.
import { describe, expect, it } from 'vitest';
import { judgeHint, MISSING_PACKAGE } from '../../src/core/judge-hints.js';

describe('a missing dependency', () => {
  it.each([
    "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'padder' imported from /w/grade.mjs",
    "Error: Cannot find module 'lodash'",
  ])('that Node names by its bare name is a package: %s', (reason) => {
    expect(MISSING_PACKAGE.test(reason)).toBe(true);
  });

  it.each([
    "Error: Cannot find module './solver'",
    "Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/w/solver.mjs' imported from /w/grade.mjs",
    "ModuleNotFoundError: No module named 'solution'",
  ])('that may be the file the agent is to write is not: %s', (reason) => {
    expect(MISSING_PACKAGE.test(reason)).toBe(false);
  });

  it('gets the hint to install it with setup.commands, Python too', () => {
    expect(judgeHint(["the grader exited with code 1: ModuleNotFoundError: No module named 'numpy'"])).toContain(
      'install it with setup.commands',
    );
    expect(judgeHint(['the grader exited with code 1: Error: boom'])).toBe('');
  });
});
