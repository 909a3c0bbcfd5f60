// Why a grading got no score, in the grader's own words: the reason a leaderboard row, a stop and a
// check run quote (worker/grade.ts runGrader), run as real shell commands.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { runGrader } from '../../src/worker/grade.js';

const grade = (command: string) =>
  runGrader(
    parseConfig(
      `grader: {command: ${JSON.stringify(command)}, timeout: 20}\nagent: {command: a}\nbudget: {total: 10}`,
      'test.yml',
    ),
    mkdtempSync(join(tmpdir(), 'grader-reasons-')),
    { PATH: process.env.PATH },
  );

describe("a failed grading's reason", () => {
  it("quotes the grader's error line, from stderr first", async () => {
    expect((await grade('echo 0.5; echo "Error: no module numpy" >&2; exit 1')).reason).toBe(
      'the grader exited with code 1: Error: no module numpy',
    );
    expect((await grade('echo "Traceback: boom"; exit 2')).reason).toBe(
      'the grader exited with code 2: Traceback: boom',
    );
  });

  it('says a score printed by a grader that then failed is not counted, rather than quote the number as the error', async () => {
    const g = await grade('echo 1; exit 3');
    expect(g.score).toBeNull();
    expect(g.reason).toBe(
      'the grader exited with code 3 after printing the score 1 (a grader that fails gets no score)',
    );
    expect((await grade('echo \'{"score": 7}\'; exit 1')).reason).toContain('after printing the score 7');
  });
});
