// The run's record files are parsed, never cast: an old record gets the defaults of fields added
// since, and a broken or forged one is refused with the file and the field. Each carries a
// version; an older one is migrated step by step, a newer one refused.

import { readFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { GITHUB_RUN_RECORD, parseGitHubRunRecord } from '../../src/core/github-run-record.js';
import {
  LOCAL_RUN_RECORD,
  migrate,
  parseLocalRun,
  parseRunState,
  RecordError,
  readRecord,
  recordFile,
  recordText,
  STATE_RECORD,
} from '../../src/core/records.js';
import { RunStore, writeAtomic } from '../../src/local/store.js';
import { cliWith } from '../integration/cli-io.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'records');
const OLD_STATE = readFileSync(join(FIXTURES, 'state-v1-before-sandbox.json'), 'utf8');
/** A local run folder's records as forkflush wrote them before records carried versions. */
const LOCAL_RUN = join(FIXTURES, 'local-run-before-versions');
const LOCAL_STATE_TEXT = readFileSync(join(LOCAL_RUN, 'state.json'), 'utf8');
const LOCAL_INFO_TEXT = readFileSync(join(LOCAL_RUN, 'run.json'), 'utf8');
/** GitHub's run.json as the app wrote it before records carried versions. */
const GITHUB_FILES_TEXT = readFileSync(join(FIXTURES, 'github-run-v1-before-versions.json'), 'utf8');

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

  it("keeps an agent's failure, its retries and how its spend is known, and refuses a kind it does not know", () => {
    const state = JSON.parse(OLD_STATE);
    const e = state.rounds[0].episodes[0];
    e.result = {
      ...e.result,
      exit: 'crash',
      failure: { kind: 'auth', quote: 'Error: 401 invalid x-api-key', fix: 'set ANTHROPIC_API_KEY' },
      retries: [{ kind: 'overload', quote: '529 Overloaded', waitedSeconds: 15 }],
      unchanged: true,
      spentBasis: 'none',
    };
    e.interruptedSpent = 0.2;
    e.interruptedBasis = 'estimated';
    const read = parseRunState(JSON.stringify(state), 'state.json').rounds[0]?.episodes[0];
    expect(read?.result).toMatchObject({
      failure: e.result.failure,
      retries: e.result.retries,
      unchanged: true,
      spentBasis: 'none',
    });
    expect(read).toMatchObject({ interruptedSpent: 0.2, interruptedBasis: 'estimated' });
    e.result.failure.kind = 'bad-luck';
    expect(() => parseRunState(JSON.stringify(state), 'state.json')).toThrow(/failure\.kind/);
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
    expect(parseGitHubRunRecord(JSON.stringify(files), 'run.json')).toEqual(files);
  });

  it('refuses a record with a field of the wrong kind', () => {
    expect(() =>
      parseGitHubRunRecord(JSON.stringify({ ...files, issue: '7' }), 'refs/forkflush/issue-7/state:run.json'),
    ).toThrow(/^refs\/forkflush\/issue-7\/state:run\.json: issue: /);
  });
});

describe('record versions', () => {
  // A record file with a history, as one will look after two changes: version 1 called the name
  // `title`; version 2 had one `tag`, version 3 a list of `tags`.
  const NOTE = recordFile({
    name: 'note.json',
    schema: z.object({ version: z.literal(3), name: z.string(), tags: z.array(z.string()) }),
    version: 3,
    migrations: {
      1: ({ title, ...rest }) => ({ ...rest, name: title }),
      2: ({ tag, ...rest }) => ({ ...rest, tags: typeof tag === 'string' ? [tag] : [] }),
    },
    unversioned: 1,
  });

  it('brings an older record up one step at a time, then checks it with the schema', () => {
    expect(readRecord(NOTE, '{"version": 1, "title": "a", "tag": "x"}', 'note.json')).toEqual({
      version: 3,
      name: 'a',
      tags: ['x'],
    });
    expect(readRecord(NOTE, '{"version": 2, "name": "b"}', 'note.json')).toEqual({ version: 3, name: 'b', tags: [] });
    expect(readRecord(NOTE, '{"version": 3, "name": "c", "tags": ["y"]}', 'note.json')).toEqual({
      version: 3,
      name: 'c',
      tags: ['y'],
    });
    // A record without a version is the file's first form.
    expect(migrate(NOTE, { title: 'd' }, 'note.json')).toEqual({ version: 3, name: 'd', tags: [] });
    // What a step makes is still checked.
    expect(() => readRecord(NOTE, '{"version": 1, "title": 5}', 'x/note.json')).toThrow(
      new RecordError(
        'x/note.json: name: Invalid input: expected string, received number (not a forkflush run record)',
      ),
    );
  });

  it('refuses a record of a newer version, and says what to do', () => {
    expect(() => readRecord(NOTE, '{"version": 4, "name": "e"}', 'x/note.json')).toThrow(
      new RecordError(
        'x/note.json: version: written by a newer forkflush (version 4); this one reads up to 3: upgrade forkflush',
      ),
    );
  });

  it('refuses a version that is not one, and one older than any step', () => {
    for (const version of ['"2"', '0', '1.5', 'null']) {
      expect(() => readRecord(NOTE, `{"version": ${version}}`, 'note.json')).toThrow(
        new RecordError(
          `note.json: version: must be a whole number from 1, got ${version} (not a forkflush run record)`,
        ),
      );
    }
    const recent = recordFile({ ...NOTE, migrations: { 2: NOTE.migrations[2] as never }, unversioned: null });
    expect(() => readRecord(recent, '{"version": 1, "title": "a"}', 'note.json')).toThrow(
      new RecordError('note.json: version: 1 is older than this forkflush reads (versions 2 to 3)'),
    );
    expect(() => readRecord(recent, '{"name": "a"}', 'note.json')).toThrow(
      new RecordError('note.json: version: missing (not a forkflush run record)'),
    );
    expect(() => readRecord(NOTE, '[1, 2]', 'note.json')).toThrow(
      new RecordError('note.json: not a JSON object (not a forkflush run record)'),
    );
  });

  it('takes only a history without gaps', () => {
    const step = (r: Record<string, unknown>) => r;
    expect(() => recordFile({ ...NOTE, migrations: { 1: step } })).toThrow(
      'note.json: no migration from version 2 to 3',
    );
    expect(() => recordFile({ ...NOTE, migrations: { 1: step, 2: step, 3: step } })).toThrow(
      'note.json: a migration from version 3, which is not below version 3',
    );
    expect(() => recordFile({ ...NOTE, migrations: { 2: step }, unversioned: 1 })).toThrow(
      'note.json: records without a version are version 1, which it cannot read',
    );
  });

  it('writes version 1 of every run record file today, and reads nothing newer', () => {
    for (const file of [STATE_RECORD, GITHUB_RUN_RECORD, LOCAL_RUN_RECORD]) {
      expect(file.version).toBe(1);
      expect(file.migrations).toEqual({});
    }
    expect(() => parseRunState(JSON.stringify({ ...JSON.parse(OLD_STATE), version: 2 }), 'x/state.json')).toThrow(
      new RecordError(
        'x/state.json: version: written by a newer forkflush (version 2); this one reads up to 1: upgrade forkflush',
      ),
    );
    expect(() =>
      parseGitHubRunRecord(JSON.stringify({ ...JSON.parse(GITHUB_FILES_TEXT), version: 7 }), 'ref:run.json'),
    ).toThrow(
      new RecordError(
        'ref:run.json: version: written by a newer forkflush (version 7); this one reads up to 1: upgrade forkflush',
      ),
    );
    expect(() => parseLocalRun(JSON.stringify({ ...JSON.parse(LOCAL_INFO_TEXT), version: 2 }), 'x/run.json')).toThrow(
      /^x\/run\.json: version: written by a newer forkflush \(version 2\); this one reads up to 1: upgrade forkflush$/,
    );
  });

  it('refuses a state.json without a version: it has always had one', () => {
    const { version: _v, ...state } = JSON.parse(OLD_STATE);
    expect(() => parseRunState(JSON.stringify(state), 'x/state.json')).toThrow(
      new RecordError('x/state.json: version: missing (not a forkflush run record)'),
    );
  });
});

describe('records an older worker reads', () => {
  // The app saves a run's config with its defaults filled in, and a worker parses it strictly (a
  // key it skipped could be one that confines the agent). So a key a release writes by default
  // would stop every run in flight whose worker Action is pinned to an older release.
  it('hold no config key by default that release 0.1.0 did not write', () => {
    const known = JSON.parse(readFileSync(join(FIXTURES, 'config-default-keys-0.1.0.json'), 'utf8')).keys as string[];
    // A run from before most keys existed, saved again now: every default is filled in.
    const state = parseRunState(OLD_STATE, 'state.json');
    const written: string[] = [];
    const walk = (value: unknown, path: string) => {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) written.push(path);
      else for (const [key, inner] of Object.entries(value)) walk(inner, path ? `${path}.${key}` : key);
    };
    walk(JSON.parse(recordText(STATE_RECORD, state)).config, '');
    const added = written.filter((k) => !known.includes(k));
    expect(
      added,
      `written by default, unknown to a 0.1.0 worker: ${added.join(', ')}. Leave the key out of the record unless the user sets it (optional, no default in the schema; the default applied where it is used)`,
    ).toEqual([]);
    // The check sees the keys the record holds.
    expect(written).toContain('sandbox.mode');
  });
});

describe('records from before versions', () => {
  it("reads GitHub's run.json, which had no version, as version 1, and writes it back with one", () => {
    const files = parseGitHubRunRecord(GITHUB_FILES_TEXT, 'refs/forkflush/issue-7/state:run.json');
    expect(files).toEqual(JSON.parse(GITHUB_FILES_TEXT));
    const text = recordText(GITHUB_RUN_RECORD, files);
    expect(JSON.parse(text)).toEqual({ version: 1, ...files });
    expect(Object.keys(JSON.parse(text))[0]).toBe('version');
    expect(parseGitHubRunRecord(text, 'run.json')).toEqual(files);
  });

  it("reads a local run's state.json and run.json through its store, and writes them back the same", async () => {
    const dir = await tempRun();
    const store = new RunStore(dir);
    const info = await store.info();
    expect(info).toEqual(JSON.parse(LOCAL_INFO_TEXT));
    const state = await store.load();
    expect(state).toMatchObject({ version: 1, status: 'finished', id: info.id });
    expect(state.rounds.map((r) => r.kind)).toEqual(['fork', 'serial', 'serial', 'fork', 'serial', 'serial']);
    // Nothing was lost on the way: the state is saved as it was written (keys may move), with only
    // the config keys added since (setup, pull_requests, limits) filled in with their defaults.
    await store.save(state);
    const before = JSON.parse(LOCAL_STATE_TEXT);
    expect(before.config.pull_requests).toBeUndefined();
    expect(JSON.parse(await readFile(join(dir, 'state.json'), 'utf8'))).toEqual({
      ...before,
      config: {
        ...before.config,
        setup: { commands: [], timeout: 600, network: true, env: [], cache: false },
        pull_requests: 'final',
        limits: { runs_per_repo: 3 },
      },
    });
    // A new run.json carries its version first, and reads back as it was given.
    const fresh = new RunStore(join(dir, 'again'));
    await fresh.init(info);
    const written = JSON.parse(await readFile(fresh.path('run.json'), 'utf8'));
    expect(written).toEqual({ version: 1, ...info });
    expect(Object.keys(written)[0]).toBe('version');
    expect(await fresh.info()).toEqual(info);
  });
});

describe('run.json (local)', () => {
  it('reads what forkflush wrote', () => {
    expect(parseLocalRun(LOCAL_INFO_TEXT, 'run.json')).toEqual(JSON.parse(LOCAL_INFO_TEXT));
  });

  it('names the file and the field of a record that is corrupt, lacks a field or has one of the wrong kind', async () => {
    const dir = await tempRun();
    const store = new RunStore(dir);
    const file = join(dir, 'run.json');
    const info = JSON.parse(LOCAL_INFO_TEXT);

    await writeFile(file, LOCAL_INFO_TEXT.slice(0, 40));
    await expect(store.info()).rejects.toThrow(new RegExp(`^${pattern(file)}: not valid JSON \\(`));
    await expect(store.info()).rejects.toBeInstanceOf(RecordError);

    const { concurrency: _c, ...lacking } = info;
    await writeFile(file, JSON.stringify(lacking));
    await expect(store.info()).rejects.toThrow(
      new RecordError(`${file}: concurrency: missing (expected number) (not a forkflush run record)`),
    );

    await writeFile(file, JSON.stringify({ ...info, templates: { branch: 3 } }));
    await expect(store.info()).rejects.toThrow(
      new RecordError(
        `${file}: templates.branch: Invalid input: expected string, received number (not a forkflush run record)`,
      ),
    );

    await writeFile(file, JSON.stringify({ ...info, startedAt: 'yesterday' }));
    await expect(store.info()).rejects.toThrow(
      new RecordError(`${file}: startedAt: must be a date and time (ISO 8601) (not a forkflush run record)`),
    );

    await rm(file);
    await expect(store.info()).rejects.toThrow(
      new RecordError(`${file}: missing: the run folder is not a whole forkflush run`),
    );
  });

  it('makes `forkflush status` say what is wrong in one line, without a stack trace', async () => {
    const dir = await tempRun();
    const task = join(dir, '..', '..');
    const env = { PATH: process.env.PATH };
    const ok = await cliWith(['status', task], { env });
    expect(ok).toMatchObject({ code: 0, err: '' });
    expect(ok.out).toMatch(/^run 20261130-100000 \(.*\)\nStrategy fork-and-flush, .*: finished\.\nBest score: 40 /);
    const { concurrency: _c, ...lacking } = JSON.parse(LOCAL_INFO_TEXT);
    await writeFile(join(dir, 'run.json'), JSON.stringify(lacking));
    const r = await cliWith(['status', task], { env });
    expect(r.code).not.toBe(0);
    expect(r.out).toBe('');
    expect(r.err.trimEnd().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(
      /^forkflush: .*run\.json: concurrency: missing \(expected number\) \(not a forkflush run record\)\n$/,
    );
    expect(r.err).not.toMatch(/\bat .*:\d+:\d+/);
  });
});

const made: string[] = [];
afterEach(async () => {
  for (const dir of made.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A task folder holding the local fixture run; returns the run's folder. */
async function tempRun(): Promise<string> {
  const task = await mkdtemp(join(tmpdir(), 'forkflush-records-'));
  made.push(task);
  const dir = join(RunStore.runsDir(task), JSON.parse(LOCAL_INFO_TEXT).id);
  await mkdir(dir, { recursive: true });
  await cp(LOCAL_RUN, dir, { recursive: true });
  return dir;
}

function pattern(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('writing a record file', () => {
  it('takes many writes of one file at once: each whole, none failing, one of them last', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'forkflush-atomic-'));
    try {
      const file = join(dir, 'results.json');
      const texts = Array.from(
        { length: 40 },
        (_, i) => `${JSON.stringify({ write: i, pad: 'x'.repeat(i * 1000) })}\n`,
      );
      await Promise.all(texts.map((t) => writeAtomic(file, t)));
      expect(texts).toContain(await readFile(file, 'utf8'));
      expect(await readdir(dir)).toEqual(['results.json']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
