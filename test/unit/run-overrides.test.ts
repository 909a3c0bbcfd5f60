// Per-run overrides on GitHub (`/autoresearch start budget=50 branches=2`): each key checked, every
// problem named with what is valid; then applied to the config like the CLI's flags.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/core/config.js';
import { overridesInText, parseOverrides } from '../../src/core/run-overrides.js';

const CONFIG = 'grader:\n  command: node grade.mjs\nagent:\n  command: node agent.mjs\nbudget:\n  total: 100\n';

describe('parseOverrides', () => {
  it('reads budget, branches, strategy and model, in the order given', () => {
    expect(parseOverrides('budget=50 branches=2 strategy=best-of-n model=gpt-5.1')).toEqual({
      config: { budget: 50, branches: 2, strategy: 'best-of-n', model: 'gpt-5.1' },
      text: 'budget=50 branches=2 strategy=best-of-n model=gpt-5.1',
    });
  });

  it('names every bad key and what is valid', () => {
    expect(parseOverrides('budget=-1 colour=red branches=99 strategy=fast model budget=3')).toEqual({
      problems: [
        '`budget` is not a number above 0 (got `-1`): it sets budget.total: a number above 0',
        'unknown key `colour`: valid keys are `budget`, `branches`, `strategy`, `model`',
        '`branches` is not a whole number from 1 to 64 (got `99`): it sets fork.branches: a whole number from 1 to 64',
        '`strategy` is not a strategy (got `fast`): it sets strategy: one of fork-and-flush, single-run, best-of-n, fork-only, flush-only',
        "`model` has no value: it sets agent.model: the model's name (letters, digits and . _ - : / @, up to 100)",
        '`budget` is given twice',
      ],
    });
  });

  it('refuses a model name that could break out of the comment', () => {
    expect(parseOverrides('model=a`b')).toHaveProperty('problems');
  });
});

describe('overridesInText', () => {
  it('finds a start line in an issue', () => {
    expect(overridesInText('Make it faster.\n\n/autoresearch start budget=30 branches=3\n')).toBe(
      'budget=30 branches=3',
    );
    expect(overridesInText('Make it faster.')).toBeNull();
    expect(overridesInText('/autoresearch start')).toBeNull();
    // Read as a comment's command is: any case, a pasted zero-width space dropped.
    expect(overridesInText('Faster.\n/Autoresearch start\u200b budget=30')).toBe('budget=30');
  });
});

describe('the config with overrides', () => {
  it('is checked like any config: the model goes to agent.model, budget to the total', () => {
    const o = parseOverrides('budget=50 model=small');
    if (!('config' in o)) throw new Error('not read');
    const c = parseConfig(CONFIG, 'autoresearch.yml', o.config);
    expect([c.budget.total, c.agent.model]).toEqual([50, 'small']);
  });
});
