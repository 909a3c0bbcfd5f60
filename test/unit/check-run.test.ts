// An episode's check run: protected paths it changed are annotated on their files. What an agent
// wrote reaches GitHub as inert text, in bodies GitHub takes whatever their size.
import { describe, expect, it } from 'vitest';
import { finalPrBody, issueComment } from '../../src/core/github-status.js';
import { checkConclusion, checkRunOutput, episodePrBody, loserComment } from '../../src/core/github-text.js';
import { simulate } from '../../src/core/plan.js';
import { allEpisodes, type EpisodeResult, type RunState } from '../../src/core/state.js';
import { config, result } from './helpers.js';

const bytes = (s: string) => Buffer.byteLength(s);

describe('check run annotations', () => {
  const state = simulate(config(), (e) => ({ spent: e.allowance, score: e.branch }));
  const e = state.rounds[0]?.episodes[0];
  if (!e) throw new Error('no episode');

  it('annotate each protected path the agent changed, at most 50, and fail the check', () => {
    const paths = ['grade.mjs', ...Array.from({ length: 60 }, (_, i) => `tests/t${i}.js`)];
    const r = result(null, 1, { protectedChanged: paths, reason: 'the agent changed protected paths' });
    const out = checkRunOutput(state, e, r, null);
    expect(out.annotations).toHaveLength(50);
    expect(out.annotations?.[0]).toEqual({
      path: 'grade.mjs',
      start_line: 1,
      end_line: 1,
      annotation_level: 'failure',
      title: 'protected path changed',
      message:
        'The agent changed this protected path (grader.protected). forkflush restored it before grading, and the episode got no score.',
    });
    expect(checkConclusion(r)).toBe('failure');
  });

  it('carry no annotations when nothing protected changed', () => {
    expect(checkRunOutput(state, e, result(3, 1), null)).not.toHaveProperty('annotations');
  });
});

describe('agent text on GitHub', () => {
  const finished = simulate(config(), (e) => ({ spent: e.allowance, score: e.branch }));
  const e = finished.rounds[0]?.episodes[0];
  if (!e) throw new Error('no episode');

  /** The run with every episode's result changed, as a forged commit could make it (no bounds). */
  function everyResult(change: Partial<EpisodeResult>): RunState {
    const s = structuredClone(finished);
    for (const x of allEpisodes(s)) if (x.result) Object.assign(x.result, change);
    return s;
  }

  it('puts what usage was priced from in code, and no line ending breaks the summary table', () => {
    const pricedFrom = 'gpt | x\r| injected | row |\r\n@someone [link](https://example.com)';
    const r = result(3, 1, { usage: { inputTokens: 1, outputTokens: 1, costUsd: 1, turns: 1, pricedFrom } });
    const { summary } = checkRunOutput(finished, e, r, null);
    const lines = summary.split(/\r\n?|\n/);
    expect(lines.every((l) => l.startsWith('| ') && l.endsWith(' |'))).toBe(true);
    expect(lines.find((l) => l.startsWith('| usage |'))).toBe(
      '| usage | 1/1 tokens, $1 priced by forkflush, 1 turns (`gpt \\| x\\| injected \\| row \\| @\u2060someone [link](https://example.com)`) |',
    );
  });

  it('shows journal lines without bidi controls, inert', () => {
    const details = { diffStat: 'fixes #2 | 1 +', journalTail: ['- admin\u202etxt.exe', '- fixes #3, thanks @you'] };
    const out = checkRunOutput(finished, e, result(3), details);
    expect(out.text).toBe(
      'Latest journal entries (NOTES.md):\n\n    - admintxt.exe\n    - f\u2060ixes #\u20603, thanks @\u2060you',
    );
    expect(out.summary).toContain('| changes | `f\u2060ixes #\u20602 \\| 1 +` |');
  });

  it('cuts a check run output to 65,535 bytes, on a character', () => {
    const details = { diffStat: '', journalTail: ['日'.repeat(30_000), '😀'.repeat(20_000)] };
    const out = checkRunOutput(finished, e, result(null, 1, { reason: 'é'.repeat(40_000) }), details);
    for (const text of [out.summary, out.text]) {
      expect(bytes(text)).toBeLessThanOrEqual(65_535);
      expect(bytes(text)).toBeGreaterThan(65_000);
      expect(text).not.toMatch(/\p{Cs}/u); // no lone surrogate
      expect(text.endsWith('\n... (cut by forkflush)')).toBe(true);
    }
  });

  it('cuts the issue comment and the pull request bodies to 65,536 bytes', () => {
    const huge = everyResult({ score: null, reason: '😀'.repeat(20_000), exit: 'setup' });
    const x = allEpisodes(huge)[0];
    if (!x?.result) throw new Error('no result');
    const bodies = [
      issueComment(huge, 'finished'),
      episodePrBody(huge, x, x.result),
      loserComment(huge, x, null),
      finalPrBody(huge, 7),
    ];
    for (const body of bodies) {
      expect(bytes(body)).toBeLessThanOrEqual(65_536);
      expect(body).not.toMatch(/\p{Cs}/u); // no lone surrogate
    }
    expect(bodies[0]?.startsWith('<!-- forkflush:')).toBe(true);
  });

  it("makes agent text inert in the bodies, and keeps forkflush's own closing keyword", () => {
    const s = everyResult({ note: 'fixes #3, cc @org/team' });
    const failed = { ...result(null, 1, { reason: 'resolves #4', exit: 'setup' }) };
    const body = finalPrBody(s, 7);
    expect(body.startsWith('Closes #7.\n')).toBe(true);
    expect(body).toContain('`f\u2060ixes #\u20603, cc @\u2060org/team`');
    expect(body).not.toContain('fixes #3');
    const x = { ...e, result: failed };
    expect(episodePrBody(s, x, failed)).toContain('`r\u2060esolves #\u20604`');
    expect(loserComment(s, x, null)).toContain('`r\u2060esolves #\u20604`');
  });
});
