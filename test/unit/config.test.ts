import { describe, expect, it } from 'vitest';
import { ConfigError, configJsonSchema, parseConfig, validKeysAt } from '../../src/core/config.js';
import { coveredSecret } from '../../src/core/secrets.js';

const minimal = `grader:
  command: node grade.mjs
agent:
  command: node agent.mjs
budget:
  total: 400
  unit: tokens
`;

function problems(text: string, overrides = {}): string[] {
  try {
    parseConfig(text, '.github/autoresearch.yml', overrides);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

describe('config', () => {
  it('fills in the paper defaults', () => {
    const c = parseConfig(minimal, 'x.yml');
    expect(c.strategy).toBe('fork-and-flush');
    // The paper's schedule (../shared/docs/method.md), written out: not read back from PAPER.
    expect(c.fork).toEqual({ branches: 4, at: [0.33, 0.66], branch_budget: 0.06, directives: 2 });
    expect(c.budget.episode).toBeCloseTo(0.06 * 400);
    expect(c.grader).toEqual({
      command: 'node grade.mjs',
      direction: 'maximize',
      timeout: 60,
      protected: [],
      network: false,
      env: [],
    });
    expect(c.sandbox).toEqual({ mode: 'auto', read: [], write: [] });
    expect(c.journal).toBe('NOTES.md');
    expect(c.task).toBe('TASK.md');
  });

  it('accepts the documented example config', () => {
    const c = parseConfig(
      `grader:
  command: node grade.mjs
  direction: minimize
  timeout: 30
  protected: [grade.mjs, tests/**]
agent:
  kind: command
  command: node agent.mjs
budget:
  total: 400
  unit: tokens
  episode: 24
strategy: best-of-n
fork:
  branches: 4
  at: [0.33, 0.66]
  branch_budget: 0.06
  directives: 2
journal: NOTES.md
`,
      'x.yml',
    );
    expect(c.grader.direction).toBe('minimize');
    expect(c.budget.episode).toBe(24);
    expect(c.strategy).toBe('best-of-n');
  });

  it('names file, line, column, key, what was found and what is valid', () => {
    const text = `${minimal}fork:\n  at: [0.3, 1.5]\n`;
    expect(problems(text)).toEqual([
      '.github/autoresearch.yml:9:13: fork.at[1] must be between 0 and 1 (exclusive), got 1.5',
    ]);
  });

  it('suggests the closest key for an unknown one', () => {
    const [p] = problems(`${minimal}forks:\n  branches: 2\n`);
    expect(p).toMatch(/^\.github\/autoresearch\.yml:8:1: unknown key "forks"; did you mean "fork"\?/);
    const [q] = problems(minimal.replace('  command: node grade.mjs', '  command: node grade.mjs\n  directon: max'));
    expect(q).toMatch(
      /:3:3: unknown key "grader.directon"; did you mean "direction"\? Valid keys of grader: command, direction/,
    );
  });

  it('lists the problems in the order of the file, not of the schema', () => {
    // budget comes before grader here; the schema checks grader first.
    const text = 'budget:\n  total: -1\ngrader:\n  command: node grade.mjs\n  direction: up\nagent:\n  command: x\n';
    const lines = problems(text).map((p) => Number(/^\.github\/autoresearch\.yml:(\d+):/.exec(p)?.[1]));
    expect(lines).toEqual([2, 5]);
  });

  it('reports every problem, not just the first', () => {
    const list = problems(minimal.replace('unit: tokens', 'unit: tokns').replace('total: 400', 'total: -1'));
    expect(list).toHaveLength(2);
    expect(list.join('\n')).toContain('budget.total must be above 0, got -1');
    expect(list.join('\n')).toContain(
      'budget.unit must be one of "usd", "tokens", "minutes", "evaluations", got "tokns"',
    );
  });

  it('says which required keys are missing and where', () => {
    const list = problems('grader:\n  direction: maximize\n');
    expect(list).toContain('.github/autoresearch.yml:2:3: grader.command is required (a string)');
    expect(list.some((p) => p.includes('agent is required'))).toBe(true);
    expect(list.some((p) => p.includes('budget is required'))).toBe(true);
  });

  it('reports YAML syntax errors with their position', () => {
    const [p] = problems('grader: [unclosed\n');
    expect(p).toMatch(/^\.github\/autoresearch\.yml:\d+:\d+: not valid YAML/);
  });

  it('rejects schedules that do not fit the budget or are out of order', () => {
    expect(problems(`${minimal}fork:\n  branches: 8\n`).join()).toContain(
      '3 fork rounds x 8 branches x 0.06 = 1.44 of the budget, more than all of it',
    );
    expect(problems(`${minimal}fork:\n  at: [0.6, 0.3]\n`).join()).toContain('fork.at must increase');
    expect(problems(`${minimal}fork:\n  branches: 2\n  directives: 3\n`).join()).toContain(
      'fork.directives must be at most fork.branches (2), got 3',
    );
    // single-run has no fork rounds, so the same numbers are fine there.
    expect(parseConfig(`${minimal}strategy: single-run\nfork:\n  branches: 8\n`, 'x').fork.branches).toBe(8);
  });

  it('words a rule the way the schema wrote it, with the key and what was found', () => {
    expect(problems(`${minimal}fork:\n  branch_budget: 0\n`)).toEqual([
      '.github/autoresearch.yml:9:18: fork.branch_budget must be a fraction above 0 and at most 1, got 0',
    ]);
    expect(problems(`${minimal}fork:\n  at: [0, 0.5]\n`)).toEqual([
      '.github/autoresearch.yml:9:8: fork.at[0] must be between 0 and 1 (exclusive), got 0',
    ]);
    // Rules zod checks without a wording of the schema's get ours.
    expect(problems(`${minimal}fork:\n  branches: 65\n`)).toContain(
      '.github/autoresearch.yml:9:13: fork.branches must be at most 64, got 65',
    );
    expect(problems(`${minimal}fork:\n  branches: 2.5\n`)).toEqual([
      '.github/autoresearch.yml:9:13: fork.branches must be a whole number, got 2.5',
    ]);
    expect(problems(`${minimal}task: ""\n`)).toEqual(['.github/autoresearch.yml:8:7: task must not be empty, got ""']);
  });

  it('offers the choice a misspelt one is close to, and none for a word far from all', () => {
    expect(problems(minimal.replace('unit: tokens', 'unit: token'))).toEqual([
      '.github/autoresearch.yml:7:9: budget.unit must be one of "usd", "tokens", "minutes", "evaluations", got "token"; did you mean "tokens"?',
    ]);
    expect(problems(minimal.replace('grade.mjs\n', 'grade.mjs\n  direction: minimise\n'))).toEqual([
      '.github/autoresearch.yml:3:14: grader.direction must be one of "maximize", "minimize", got "minimise"; did you mean "minimize"?',
    ]);
    // A mode given as a word, in the union of a mode and a mapping.
    expect(problems(`${minimal}sandbox: requird\n`)).toEqual([
      '.github/autoresearch.yml:8:10: sandbox must be one of "auto", "required", "off", got "requird"; did you mean "required"?',
    ]);
    expect(problems(`${minimal}sandbox:\n  mode: on\n`)[0]).not.toContain('did you mean');
  });

  it("names the section a section's key belongs in when it is written at the top", () => {
    expect(problems(`${minimal}branches: 6\n`).join()).toMatch(
      /:8:1: unknown key "branches"; it belongs in fork: \(fork: \{branches: \.\.\.\}\)\. Valid keys: task, grader/,
    );
    expect(problems(`${minimal}zzzz: 1\n`).join()).toMatch(/unknown key "zzzz"\. Valid keys: task/);
  });

  it('finds the mapping inside a union: sandbox as a mode or a mapping', () => {
    expect(problems(`${minimal}sandbox:\n  mode: on\n`)).toEqual([
      '.github/autoresearch.yml:9:9: sandbox.mode must be one of "auto", "required", "off", got "on"',
    ]);
    expect(problems(`${minimal}sandbox:\n  mod: off\n`)).toEqual([
      '.github/autoresearch.yml:9:3: unknown key "sandbox.mod"; did you mean "mode"? Valid keys of sandbox: mode, read, write, network',
    ]);
    expect(problems(`${minimal}sandbox: maybe\n`)).toEqual([
      '.github/autoresearch.yml:8:10: sandbox must be one of "auto", "required", "off", got "maybe"',
    ]);
    // Neither a mode nor a mapping: both alternatives are named.
    expect(problems(`${minimal}sandbox: 3\n`)).toEqual([
      '.github/autoresearch.yml:8:10: sandbox must be "auto", "required", "off", or a mapping, got 3',
    ]);
    expect(validKeysAt(['sandbox'])).toEqual(['mode', 'read', 'write', 'network']);
  });

  it('accepts $schema but never suggests or lists it', () => {
    expect(parseConfig(`$schema: ./schema.json\n${minimal}`, 'x').strategy).toBe('fork-and-flush');
    expect(validKeysAt([])).not.toContain('$schema');
    expect(validKeysAt([])).toEqual([
      'task',
      'grader',
      'agent',
      'setup',
      'budget',
      'strategy',
      'fork',
      'journal',
      'prompts',
      'schedule',
      'pull_requests',
      'limits',
      'compare',
      'map',
      'sandbox',
    ]);
    expect(validKeysAt(['fork'])).toEqual(['branches', 'at', 'branch_budget', 'directives', 'losers']);
    expect(validKeysAt(['fork', 'branches'])).toEqual([]);
    expect(validKeysAt(['nope'])).toEqual([]);
  });

  it('refuses a budget of more episodes than a run may plan, at budget.episode, saying it is an amount', () => {
    expect(problems(`${minimal}  episode: 0.06\n`)).toEqual([
      ".github/autoresearch.yml:8:12: budget.episode: 0.06 tokens an episode makes 6,666 episodes of budget.total (400 tokens), more than the 1000 a run may plan. budget.episode is an amount in tokens, not a share of the total (fork.branch_budget is a share): leave it out for the paper's 24 tokens, or raise it",
    ]);
    // The same after --budget: the total a run is given counts.
    expect(problems(`${minimal}  episode: 5\n`, { budget: 1_000_000 }).join()).toContain('makes 200,000 episodes');
    expect(parseConfig(`${minimal}  episode: 0.4\n`, 'x').budget.episode).toBe(0.4);
  });

  it('refuses a timeout of more than a week, which Node would fire at once past 24.8 days, naming the key', () => {
    // A month meant as "no limit": every episode and grading stopped as it started.
    const month = 30 * 24 * 3600;
    const text = minimal
      .replace('  command: node grade.mjs\n', `  command: node grade.mjs\n  timeout: ${month}\n`)
      .replace('  command: node agent.mjs\n', `  command: node agent.mjs\n  timeout: ${month}\n`);
    expect(problems(`${text}setup:\n  commands: [npm ci]\n  timeout: ${month}\n`)).toEqual([
      `.github/autoresearch.yml:3:12: grader.timeout must be at most 604800, got ${month}`,
      `.github/autoresearch.yml:6:12: agent.timeout must be at most 604800, got ${month}`,
      `.github/autoresearch.yml:12:12: setup.timeout must be at most 604800, got ${month}`,
    ]);
    expect(parseConfig(text.replaceAll(String(month), '604800'), 'x').agent.timeout).toBe(604800);
  });

  it('refuses evaluations an episode cannot grade with: under one grading, a round would spend past the budget', () => {
    const evals = (total: number, more = '') =>
      `${minimal.replace('total: 400\n  unit: tokens', `total: ${total}\n  unit: evaluations`)}${more}`;
    // Ten branches of 0.09 evaluations: each may grade once, 10 of 3.
    expect(problems(evals(3, 'fork:\n  branches: 10\n  branch_budget: 0.03\n'))).toEqual([
      '.github/autoresearch.yml:10:18: fork.branch_budget: 0.03 of budget.total (3 evaluations) gives each branch 0.09 evaluations, less than one grading (each may grade once, so a round of 10 would spend 10): raise budget.total to at least 34, or fork.branch_budget to at least 0.334',
    ]);
    // The paper's shares of a total under 17: under one each.
    expect(problems(evals(16)).join()).toContain('gives each branch 0.96 evaluations');
    expect(problems(evals(16, 'strategy: single-run\n'))).toEqual([
      '.github/autoresearch.yml:6:3: budget.episode: 0.96 evaluations an episode is less than one grading (each may grade once): set budget.episode to at least 1 (left out, it is 0.06 of budget.total: then raise budget.total to at least 17)',
    ]);
    expect(parseConfig(evals(17), 'x').budget.total).toBe(17);
    expect(parseConfig(evals(3, '  episode: 1\nstrategy: single-run\n'), 'x').budget.episode).toBe(1);
  });

  it('refuses a grader.protected that protects the journal, which every episode writes', () => {
    const text = minimal.replace(
      '  command: node grade.mjs\n',
      '  command: node grade.mjs\n  protected: [grade.mjs, "*.md"]\n',
    );
    expect(problems(text)).toEqual([
      '.github/autoresearch.yml:3:14: grader.protected: "*.md" protects the journal (NOTES.md), which every episode\'s prompt asks the agent to write: every episode that did would get no score. Take the journal out of grader.protected (or name another file as journal)',
    ]);
    expect(parseConfig(`${text}journal: journal/LOG.txt\n`, 'x').journal).toBe('journal/LOG.txt');
  });

  it('refuses a sandbox folder inside a sandbox.write one, where an agent could make it a link', () => {
    const text = `${minimal}sandbox:\n  read: [/data/sets, /srv/cache/models/]\n  write: [/srv/cache]\n`;
    expect(problems(text)).toEqual([
      ".github/autoresearch.yml:9:9: sandbox.read: /srv/cache/models/ is inside sandbox.write's /srv/cache, where the agents write: one could make it a link to anywhere. Leave it out (/srv/cache is shown whole), or name a folder outside it",
    ]);
    expect(parseConfig(`${minimal}sandbox:\n  read: [/srv/cache2]\n  write: [/srv/cache]\n`, 'x').sandbox.read).toEqual(
      ['/srv/cache2'],
    );
  });

  it('refuses a journal that is the script a command runs, which its notes would break', () => {
    const text = `${minimal}journal: ./agent.mjs\n`;
    expect(problems(text)).toEqual([
      ".github/autoresearch.yml:8:10: journal: ./agent.mjs is the script agent.command runs (`node agent.mjs`), which forkflush would append the agents' notes to: name another file, such as NOTES.md",
    ]);
  });

  it('applies command-line overrides before validating', () => {
    const c = parseConfig(minimal, 'x', { strategy: 'single-run', budget: 100, branches: 2 });
    expect(c.strategy).toBe('single-run');
    expect(c.budget.total).toBe(100);
    expect(c.budget.episode).toBeCloseTo(6);
    expect(c.fork.branches).toBe(2);
    expect(c.fork.directives).toBe(2);
    expect(parseConfig(minimal, 'x', { branches: 1 }).fork.directives).toBe(1);
    // An explicit directives count above the new K is the user's to fix.
    expect(problems(`${minimal}fork:\n  directives: 2\n`, { branches: 1 }).join()).toContain(
      'fork.directives must be at most',
    );
  });

  it('publishes a JSON Schema with the defaults and no extra keys', () => {
    const schema = configJsonSchema() as {
      properties: Record<string, { properties?: Record<string, { default?: unknown }> }>;
      additionalProperties: boolean;
      required: string[];
    };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(expect.arrayContaining(['grader', 'agent', 'budget']));
    expect(schema.properties.fork?.properties?.at?.default).toEqual([0.33, 0.66]);
    expect(schema.properties.grader?.properties?.direction?.default).toBe('maximize');
  });
});

describe('the published schema file', () => {
  it('is up to date with the config schema (npm run schema)', async () => {
    const { readFileSync } = await import('node:fs');
    const committed = JSON.parse(
      readFileSync(new URL('../../schema/autoresearch.schema.json', import.meta.url), 'utf8'),
    );
    expect(committed).toEqual(configJsonSchema());
  });
});

describe('agent.env and grader.env patterns', () => {
  it.each([
    ['G*', 'GITHUB_TOKEN'],
    ['ACTIONS_ID*', 'ACTIONS_ID_TOKEN_REQUEST_TOKEN'],
    ['INPUT_*', 'INPUT_…'],
    ['IN*', 'INPUT_…'],
    ['INPUT_MODEL*', 'INPUT_…'],
    ['F*', 'FORKFLUSH_…'],
    ['W*', 'WEBHOOK_SECRET'],
  ])('refuses %s, which covers %s', (pattern, covered) => {
    expect(coveredSecret(pattern.slice(0, -1))).toBe(covered);
  });

  it('lets through prefixes that cover no credential', () => {
    for (const p of ['AWS_', 'ANTHROPIC_', 'HF_', 'OPENAI_', 'GOOGLE_']) expect(coveredSecret(p)).toBeNull();
  });
});
