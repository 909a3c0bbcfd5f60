import { describe, expect, it } from 'vitest';
import {
  appendToJournal,
  boundedResult,
  commitMessage,
  journalEntry,
  parseCommitMessage,
} from '../../src/core/journal.js';
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
    // As a terminal shows them: colour codes take no room, a carriage return starts the line again.
    ['\x1b[32m0.75\x1b[0m\n', 0.75],
    ['case 1/3\rcase 2/3\rcase 3/3\r17\n', 17],
    ['0.5\nworking...\r\x1b[K\n', 0.5],
    ['progress\n0.5\r', 0.5],
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
    ['\x1b[1mscore: 3\x1b[0m\n', "the grader's last line is not a number: score: 3"],
  ])('gives no score for %j', (out, reason) => {
    expect(parseScore(out)).toEqual({ score: null, reason });
  });

  it('says a last line was cut where only the end of a long output was kept, and reads one kept whole', () => {
    const cut = parseScore('true}, {"test": 9, "ok": true}], "score": 7}\n', 1000);
    expect(cut).toEqual({
      score: null,
      reason:
        "the grader's last line is longer than the 1,000 characters forkflush reads of its output: print the score on a line of its own, last",
    });
    expect(parseScore('…progress\n{"score": 7}\n', 1000)).toEqual({ score: 7 });
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
      unit: 'tokens',
      result: { ...r, reason: 'the grader exited with code 1: boom' },
    });
    expect(parseCommitMessage('a plain commit', 'x')).toBeNull();
  });

  it('records a judge the machine starved (the round is void) in a trailer, and reads only a resource back', () => {
    const r = result(null, 6, {
      reason: 'the machine ran out of memory while the judge graded this branch, twice',
      machineShort: 'memory',
      commit: 'abc',
    });
    const msg = commitMessage('run1', c.budget.unit, e, r);
    expect(msg).toMatch(/^Forkflush-Machine-Short: memory$/m);
    expect(parseCommitMessage(msg, 'abc')?.result.machineShort).toBe('memory');
    const forged = msg.replace('Forkflush-Machine-Short: memory', 'Forkflush-Machine-Short: everything');
    expect(parseCommitMessage(forged, 'abc')?.result).not.toHaveProperty('machineShort');
  });

  it("reads back an agent's failure, its retries, an unchanged workspace and an estimated spend", () => {
    const r = result(0, 0.004, {
      exit: 'crash',
      commit: 'abc',
      failure: { kind: 'auth', quote: 'Error: 401 invalid x-api-key, see #12 @team', fix: 'set ANTHROPIC_API_KEY' },
      retries: [{ kind: 'rate-limit', quote: '429 Too Many Requests', waitedSeconds: 15.5 }],
      unchanged: true,
      spentBasis: 'estimated',
    });
    const msg = commitMessage('run1', c.budget.unit, e, r);
    expect(msg).toContain('Forkflush-Unchanged: yes\nForkflush-Spent-Basis: estimated\n');
    // Inert on GitHub, as it was on reading.
    expect(msg).not.toContain('#12');
    expect(parseCommitMessage(msg, 'abc')?.result).toEqual(r);
    // Nonsense in the trailers is no failure.
    const forged = msg.replace(/Forkflush-Failure: .*/, 'Forkflush-Failure: {"kind":"root","quote":"x"}');
    expect(parseCommitMessage(forged, 'abc')?.result.failure).toBeUndefined();
  });
});

describe('what an agent wrote, in a result and its commit', () => {
  const e = { id: 'r1.b0' };
  const WJ = '\u2060';

  it('is bounded: reason and note 1000 characters, 50 paths of 300, usage strings 200, cleaned; idempotent', () => {
    const paths = Array.from({ length: 80 }, (_, i) => `${'d/'.repeat(200)}${i}.js`);
    const r = result(null, 1, {
      reason: `the agent changed protected paths: ${paths.join(', ')}`,
      note: `\u202e${'é'.repeat(5000)}`,
      protectedChanged: paths,
      usage: {
        inputTokens: 1,
        outputTokens: 2,
        costUsd: 0.5,
        turns: null,
        pricedFrom: `\u001b[31m@model ${'x'.repeat(500)}`,
      },
    });
    const b = boundedResult(r);
    expect(b.reason).toHaveLength(1000);
    expect(b.reason?.endsWith('… (cut)')).toBe(true);
    expect(b.note?.startsWith('éé')).toBe(true); // the bidi override is gone
    expect(b.note).toHaveLength(1000);
    expect(b.protectedChanged).toHaveLength(50);
    expect(b.protectedChanged.every((p) => p.length <= 300)).toBe(true);
    // Cleaned, but not made inert: that is for what goes to GitHub (commitMessage, github-text).
    expect(b.usage?.pricedFrom?.startsWith('@model x')).toBe(true);
    expect(b.usage?.pricedFrom).toHaveLength(200);
    expect(b.usage).toMatchObject({ inputTokens: 1, outputTokens: 2, costUsd: 0.5, turns: null });
    expect(b).toMatchObject({ commit: r.commit, score: null, spent: 1, exit: 'finished' });
    expect(boundedResult(b)).toEqual(b);
    // The cut never makes a closing keyword (the marker starts with no space).
    const keyword = boundedResult(result(null, 1, { reason: `${'a'.repeat(988)} fixes #1` }));
    expect(boundedResult(keyword)).toEqual(keyword);
  });

  it('is bounded when read from a commit of any size', () => {
    const huge = 'y'.repeat(100_000);
    const message = [
      'forged',
      '',
      'Forkflush-Run: run',
      'Forkflush-Episode: r1.b0',
      'Forkflush-Score: none',
      `Forkflush-Score-Reason: ${huge}`,
      'Forkflush-Spent: 1',
      'Forkflush-Exit: finished',
      `Forkflush-Protected-Changed: ${Array.from({ length: 5000 }, (_, i) => `p${i}`).join(', ')}`,
      `Forkflush-Note: ${huge}`,
      `Forkflush-Usage: {"inputTokens":1,"outputTokens":1,"costUsd":null,"turns":null,"pricedFrom":"${huge}","junk":{"deep":"${huge}"}}`,
    ].join('\n');
    const r = parseCommitMessage(message, 'c')?.result;
    expect(r?.reason).toHaveLength(1000);
    expect(r?.note).toHaveLength(1000);
    expect(r?.protectedChanged).toHaveLength(50);
    expect(r?.usage).toEqual({
      inputTokens: 1,
      outputTokens: 1,
      costUsd: null,
      turns: null,
      pricedFrom: expect.any(String),
    });
    expect(r?.usage?.pricedFrom).toHaveLength(200);
    const failure = parseCommitMessage(
      `${message}\nForkflush-Failure: {"kind":"quota","quote":"${huge}","fix":"${huge}"}\nForkflush-Retries: ${JSON.stringify(Array.from({ length: 40 }, () => ({ kind: 'overload', quote: huge, waitedSeconds: 1 })))}`,
      'c',
    )?.result;
    expect(failure?.failure?.quote).toHaveLength(300);
    expect(failure?.failure?.fix).toHaveLength(1000);
    expect(failure?.retries).toHaveLength(10);
    expect(failure?.retries?.every((t) => t.quote.length === 300)).toBe(true);
    // An exit forkflush never writes is no episode commit.
    expect(parseCommitMessage(message.replace('Exit: finished', 'Exit: @everyone'), 'c')).toBeNull();
  });

  it('closes no issue and mentions nobody once merged, and its paths read back as they were', () => {
    const r = result(null, 1, {
      reason: 'fixes #12',
      note: 'cc @someone, resolves org/other#3',
      protectedChanged: ['packages/@scope/grade.mjs', 'closes #4.txt'],
      usage: { inputTokens: 1, outputTokens: 1, costUsd: 1, turns: 1, pricedFrom: 'GH-9 @org/team' },
    });
    const details = {
      diffStat: ' fixes #5 | 2 +',
      journalTail: ['- Closes: https://github.com/o/r/issues/6', '- @you'],
    };
    const msg = commitMessage('run', 'tokens', e, r, details);
    const bare = msg.replaceAll(WJ, '');
    for (const active of [
      'fixes #12',
      '@someone',
      'resolves org/other#3',
      '@scope',
      'closes #4',
      'GH-9',
      '@org',
      'fixes #5',
      'Closes:',
      '@you',
    ]) {
      expect(bare).toContain(active);
      expect(msg).not.toContain(active);
    }
    expect(parseCommitMessage(msg, 'c')?.result.protectedChanged).toEqual(r.protectedChanged);
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
