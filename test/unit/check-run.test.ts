// An episode's check run: protected paths it changed are annotated on their files.
import { describe, expect, it } from 'vitest';
import { checkConclusion, checkRunOutput } from '../../src/core/github-text.js';
import { simulate } from '../../src/core/plan.js';
import { config, result } from './helpers.js';

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
