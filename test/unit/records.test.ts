import { describe, expect, it } from 'vitest';
import { appendToJournal, commitMessage, journalEntry, parseCommitMessage } from '../../src/core/journal.js';
import { parseScore } from '../../src/core/score.js';
import type { Episode } from '../../src/core/state.js';
import { closest } from '../../src/core/text.js';
import { config, result } from './helpers.js';

describe('parseScore', () => {
  it.each([
    ['12.5\n', 12.5],
    ['compiling\nchecking\n-3e2\n\n', -300],
    ['{"score": 0.91, "tests": 12}\n', 0.91],
    ['  42  \r\n', 42],
  ])('reads %j', (out, score) => {
    expect(parseScore(out)).toEqual({ score });
  });

  it.each([
    ['', 'the grader printed nothing on stdout'],
    ['NaN\n', 'the grader printed NaN, not a finite number'],
    ['Infinity\n', 'the grader printed Infinity, not a finite number'],
    ['score: 12\n', "the grader's last line is not a number: score: 12"],
    ['{"score": "high"}\n', `the grader's JSON has no numeric "score": {"score": "high"}`],
    ['{oops\n', "the grader's last line is not valid JSON: {oops"],
  ])('gives no score for %j', (out, reason) => {
    expect(parseScore(out)).toEqual({ score: null, reason });
  });
});

describe('journal and commit records', () => {
  const c = config();
  const e: Episode = {
    id: 'r2.b3',
    round: 2,
    branch: 3,
    lineage: 0,
    base: 'b',
    allowance: 24,
    context: 'fresh',
    contextFrom: null,
    directive: true,
    seed: 5,
  };

  it('writes one journal line per episode', () => {
    const line = journalEntry(c, 'fork 1', e, result(87.5, 22));
    expect(line).toBe(
      '- forkflush r2.b3 (fork 1, fresh context, told to try a different approach): score 87.5; spent 22 of 24 tokens; ended: finished.',
    );
    expect(appendToJournal('', line)).toBe(`# Journal\n\n${line}\n`);
    expect(appendToJournal('notes', line)).toBe(`notes\n${line}\n`);
  });

  it('reads back from the commit message exactly what it wrote', () => {
    const r = result(null, 30.25, {
      reason: 'the grader exited with code 1:\nboom',
      exit: 'budget',
      protectedChanged: ['grade.mjs'],
      note: 'charged its whole allowance',
      usage: { inputTokens: 1200, outputTokens: 340, costUsd: 0.0123, turns: 4, pricedFrom: 'table 2026-11' },
      agentSeconds: 1.5,
      graderSeconds: 0.25,
      wallSeconds: 2,
      commit: 'abc',
    });
    const msg = commitMessage('run1', c.budget.unit, e, r);
    expect(msg.split('\n')[0]).toBe('forkflush r2.b3: no score, spent 30.25 tokens');
    expect(parseCommitMessage(msg, 'abc')).toEqual({
      runId: 'run1',
      episode: 'r2.b3',
      result: { ...r, reason: 'the grader exited with code 1: boom' },
    });
    expect(parseCommitMessage('a plain commit', 'x')).toBeNull();
  });
});

describe('closest', () => {
  it('suggests near keys only', () => {
    expect(closest('forks', ['fork', 'grader'])).toBe('fork');
    expect(closest('branch_budgte', ['branches', 'branch_budget'])).toBe('branch_budget');
    expect(closest('zzzz', ['fork', 'grader'])).toBeUndefined();
  });
});

describe('commit details', () => {
  it('records the diff stat and the journal tail in the body, before the trailers', async () => {
    const { commitMessage, parseCommitDetails, parseCommitMessage } = await import('../../src/core/journal.js');
    const e = {
      id: 'r1.b0',
      round: 1,
      branch: 0,
      lineage: 0,
      base: 'b',
      allowance: 6,
      context: 'fresh' as const,
      contextFrom: null,
      directive: false,
      seed: 1,
    };
    const details = {
      diffStat: ' 2 files changed, 3 insertions(+)',
      journalTail: ['- tried walksat: 99.1', '- forkflush r1.b0 ...'],
    };
    const msg = commitMessage('run', config().budget.unit, e, result(5, 1), details);
    expect(parseCommitDetails(msg)).toEqual({
      diffStat: '2 files changed, 3 insertions(+)',
      journalTail: details.journalTail,
    });
    expect(parseCommitMessage(msg, 'c')?.result.score).toBe(5);
    expect(msg.trimEnd().split('\n\n').at(-1)?.startsWith('Forkflush-Run: run')).toBe(true);
    expect(parseCommitDetails(commitMessage('run', config().budget.unit, e, result(5, 1)))).toBeNull();
  });
});
