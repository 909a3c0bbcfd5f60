// The compare: key of the config, and the variants of a comparison (a name plus keys it changes).
import { describe, expect, it } from 'vitest';
import { configMapping, fixedKeyProblem, parseVariantFlag, variantConfigText } from '../../src/core/compare/config.js';
import { type ConfigError, configJsonSchema, parseConfig } from '../../src/core/config.js';

const BASE = 'grader: {command: node grade.mjs}\nagent: {command: node agent.mjs}\nbudget: {total: 40, unit: tokens}\n';

function problems(text: string): string[] {
  try {
    parseConfig(text, 'c.yml');
    return [];
  } catch (e) {
    return (e as ConfigError).problems;
  }
}

describe('compare: in the config', () => {
  it('takes strategies, seeds and variants', () => {
    const c = parseConfig(
      `${BASE}compare:\n  strategies: [fork-and-flush, single-run]\n  seeds: 3\n  variants:\n    - name: one-fork\n      set: {fork.at: [0.5]}\n    - name: as-is\n`,
      'c.yml',
    );
    expect(c.compare).toEqual({
      strategies: ['fork-and-flush', 'single-run'],
      seeds: 3,
      variants: [
        { name: 'one-fork', set: { 'fork.at': [0.5] } },
        { name: 'as-is', set: {} },
      ],
    });
    expect(parseConfig(BASE, 'c.yml').compare).toBeUndefined();
  });

  it('says what is wrong, where', () => {
    expect(problems(`${BASE}compare:\n  seed: 3\n`)).toEqual([
      'c.yml:5:3: unknown key "compare.seed"; did you mean "seeds"? Valid keys of compare: strategies, seeds, variants',
    ]);
    expect(problems(`${BASE}compare:\n  strategies: [fork-and-flash]\n`)[0]).toMatch(
      /^c\.yml:5:16: compare\.strategies\[0\]/,
    );
    expect(problems(`${BASE}compare:\n  seeds: 0\n`)[0]).toMatch(/^c\.yml:5:10: compare\.seeds/);
    expect(problems(`${BASE}compare:\n  variants: [{name: a}, {name: a}]\n`)[0]).toMatch(/names the variant "a" twice/);
    expect(problems(`${BASE}compare:\n  variants: [{name: "a b"}]\n`)[0]).toMatch(/must be a short name/);
  });

  it('is in the JSON Schema', () => {
    const schema = configJsonSchema() as { properties: Record<string, { properties?: Record<string, unknown> }> };
    expect(Object.keys(schema.properties.compare?.properties ?? {})).toEqual(['strategies', 'seeds', 'variants']);
  });
});

describe('--variant NAME=KEY=VALUE,...', () => {
  it('reads values as YAML, commas in brackets belonging to the value', () => {
    expect(parseVariantFlag('two-forks=fork.at=[0.33, 0.66],fork.branches=8')).toEqual({
      name: 'two-forks',
      set: { 'fork.at': [0.33, 0.66], 'fork.branches': 8 },
    });
    expect(parseVariantFlag('plain=')).toEqual({ name: 'plain', set: {} });
    expect(parseVariantFlag('p=prompts.branch="a,b.md"')).toEqual({ name: 'p', set: { 'prompts.branch': 'a,b.md' } });
  });

  it('says how to write one', () => {
    expect(parseVariantFlag('a b=fork.at=1')).toEqual({ problem: expect.stringMatching(/must be a short name/) });
    expect(parseVariantFlag('k=fork.branches')).toEqual({
      problem: expect.stringMatching(/"fork.branches" is not KEY=VALUE/),
    });
    expect(parseVariantFlag('k=fork.at=[0.5')).toEqual({ problem: expect.stringMatching(/not valid YAML/) });
  });
});

describe('a variant config', () => {
  const raw =
    configMapping(`${BASE}fork: {branches: 4, at: [0.33, 0.66]}\ngrader_extra: 1\ncompare: {seeds: 2}\n`) ?? {};

  it("is the user's config with the keys set, compare: dropped and the user's config file protected", () => {
    const text = variantConfigText(raw, { name: 'one', set: { 'fork.at': [0.5], sandbox: { mode: 'off' } } }, [
      '.github/autoresearch.yml',
    ]);
    const out = configMapping(text);
    expect(out).toMatchObject({
      fork: { branches: 4, at: [0.5] },
      sandbox: { mode: 'off' },
      grader: { command: 'node grade.mjs', protected: ['.github/autoresearch.yml'] },
    });
    expect(out?.compare).toBeUndefined();
    expect(text.split('\n')[0]).toBe(
      "# forkflush compare: variant one of the task's config (written by forkflush; do not edit)",
    );
  });

  it('merges nested values key by key', () => {
    const out = configMapping(variantConfigText(raw, { name: 'n', set: { fork: { branches: 8 } } }, []));
    expect(out?.fork).toEqual({ branches: 8, at: [0.33, 0.66] });
  });

  it('may not change the grader, the task, the budget or the strategy', () => {
    expect(fixedKeyProblem({ name: 'a', set: { 'budget.total': 5 } })).toBe(
      'variant a: budget.total cannot vary: every run of a compare spends the same budget (use --budget)',
    );
    expect(fixedKeyProblem({ name: 'a', set: { budget: { total: 5 } } })).toMatch(/budget\.total cannot vary/);
    expect(fixedKeyProblem({ name: 'a', set: { strategy: 'single-run' } })).toMatch(/use --strategies/);
    expect(fixedKeyProblem({ name: 'a', set: { budget: { episode: 5 }, 'agent.model': 'x' } })).toBeNull();
  });
});
