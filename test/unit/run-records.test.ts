// The run's record files are parsed, never cast: an old record gets the defaults of fields added
// since, and a broken or forged one is refused with the file and the field.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRunFiles, parseRunState, RecordError } from '../../src/core/records.js';

const OLD_STATE = readFileSync(
  join(import.meta.dirname, '..', 'fixtures', 'records', 'state-v1-before-sandbox.json'),
  'utf8',
);

describe('state.json', () => {
  it('reads a record written before the sandbox existed, with the defaults of the new fields', () => {
    const state = parseRunState(OLD_STATE, 'state.json');
    expect(state.config.sandbox).toEqual({ mode: 'auto', read: [], write: [] });
    expect(state.config.grader).toMatchObject({ network: false, env: [] });
    expect(state.config.agent.env).toEqual([]);
    // What it held is kept as it was.
    expect(state.config.budget).toEqual({ total: 40, unit: 'tokens', episode: 24 });
    expect(state.rounds.length).toBeGreaterThan(0);
    expect(state.rounds[0]?.episodes[0]?.result?.score).toEqual(expect.any(Number));
  });

  it('refuses a record whose commit is not a commit id, naming the field', () => {
    const state = JSON.parse(OLD_STATE);
    state.rounds[0].episodes[1].base = 'HEAD~1';
    expect(() => parseRunState(JSON.stringify(state), '.forkflush/x/state.json')).toThrow(
      new RecordError(
        '.forkflush/x/state.json: rounds.0.episodes.1.base: must be a commit id (not a forkflush run record)',
      ),
    );
  });

  it('refuses a config the schema would refuse, and text that is not JSON', () => {
    const state = JSON.parse(OLD_STATE);
    state.config.journal = '../../outside.md';
    expect(() => parseRunState(JSON.stringify(state), 'state.json')).toThrow(
      /^state\.json: config\.journal: must be a path inside the repository/,
    );
    expect(() => parseRunState('{"version": 1,', 'state.json')).toThrow(/^state\.json: not valid JSON/);
    expect(() => parseRunState('{"version": 2}', 'state.json')).toThrow(/^state\.json: version: /);
  });
});

describe('run.json (GitHub)', () => {
  const files = {
    task: '# Make it faster',
    templates: {},
    configPath: '.github/autoresearch.yml',
    defaultBranch: 'main',
    issue: 7,
    commentId: null,
    stopped: false,
    dispatched: {},
    published: {},
    settled: [],
    finalPr: null,
    bestCommit: null,
    lastNightly: null,
    claims: {},
  };

  it('reads what the app writes', () => {
    expect(parseRunFiles(JSON.stringify(files), 'run.json')).toEqual(files);
  });

  it('refuses a record with a field of the wrong kind', () => {
    expect(() =>
      parseRunFiles(JSON.stringify({ ...files, issue: '7' }), 'refs/forkflush/issue-7/state:run.json'),
    ).toThrow(/^refs\/forkflush\/issue-7\/state:run\.json: issue: /);
  });
});
