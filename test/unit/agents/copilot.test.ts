// The Copilot spec's readers, on outputs recorded from the real CLI (test/fixtures/agents/copilot/).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  eventsFileProblem,
  parseUsageFile,
  readTotals,
  sessionErrors,
  summarizeEvents,
  type Totals,
} from '../../../src/agents/copilot.js';
import { jsonLines } from '../../../src/core/json.js';
import { shareOf, usageOf } from '../../../src/core/usage.js';

const fixture = (name: string) =>
  readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'copilot', name), 'utf8');
const SESSION = '388d7dae-ba1f-4a3f-a68c-3585267d6c7b';
const usage = (name: string) => parseUsageFile(fixture(name)) as Totals;

describe('Copilot usage file', () => {
  it('reads per-model tokens and requests', () => {
    const t = usage('fresh.usage.json');
    expect(t.models).toEqual({
      'gpt-5-mini': { input: 3630, cached: 0, written: 0, output: 240, calls: 3, costUsd: null },
    });
    // Bring-your-own-key: AI credits are "unavailable", so the cost is priced from tokens.
    expect(t.nanoAiu).toBe(0);
  });

  it('is cumulative over a resumed session: the episode is the difference, priced with forkflush prices', () => {
    const now = usage('resumed.usage.json');
    expect(now.models['gpt-5-mini']?.calls).toBe(6);
    const { share, note } = shareOf(usage('fresh.usage.json').models, now.models);
    expect(note).toBeUndefined();
    expect(share['gpt-5-mini']).toMatchObject({ input: 3720, output: 240, calls: 3 });
    const u = usageOf({ tally: share });
    expect(u).toMatchObject({ inputTokens: 3720, outputTokens: 240, turns: 3 });
    expect(u.costUsd).toBeCloseTo((3720 * 0.25 + 240 * 2) / 1e6, 12); // no cache reads in this session
    expect(u.pricedFrom).toContain('gpt-5-mini');
  });

  it('says why an unreadable file cannot be read; AI credits where the CLI counted them', () => {
    expect(parseUsageFile('oops')).toMatch(/not JSON/);
    expect(parseUsageFile('{"x":1}')).toBe('the usage file has no modelMetrics');
    const hosted = parseUsageFile(
      JSON.stringify({
        totalNanoAiu: 2.5e9,
        aiCreditsStatus: 'ok',
        modelMetrics: { 'claude-sonnet-4.5': { requests: { count: 2 }, usage: { inputTokens: 10, outputTokens: 5 } } },
      }),
    ) as Totals;
    expect(hosted.nanoAiu).toBe(2.5e9);
  });

  it('reads the totals an earlier release saved in session.json', () => {
    const saved = JSON.parse(fixture('resumed.session.json'));
    expect(saved.sessionId).toBe(SESSION);
    expect(readTotals(saved.totals)).toEqual(usage('resumed.usage.json'));
    expect(readTotals({})).toEqual({ models: {}, nanoAiu: 0 });
  });
});

describe('Copilot session events', () => {
  it('counts turns and usage records (what the watcher bounds)', () => {
    const { turns, totals } = summarizeEvents([...jsonLines(fixture('resumed.events.jsonl'))]);
    expect(turns).toBe(6);
    expect(totals.models['gpt-5-mini']).toMatchObject({ input: 7350, output: 480, calls: 6 });
    // A session killed while the model hung: a turn started, nothing was used.
    expect(summarizeEvents([...jsonLines(fixture('killed.events.jsonl'))])).toEqual({
      turns: 1,
      totals: { models: {}, nanoAiu: 0 },
    });
  });

  it('accepts a resumable session and names what is wrong with others', () => {
    const text = fixture('resumed.events.jsonl');
    expect(eventsFileProblem(text, SESSION)).toBeNull();
    expect(eventsFileProblem(fixture('killed.events.jsonl'), SESSION)).toContain('belongs to session');
    expect(eventsFileProblem('{garbage\n', SESSION)).toBe('line 1 of its events.jsonl is not JSON');
    expect(eventsFileProblem('', SESSION)).toBe('its events.jsonl is empty');
    expect(eventsFileProblem('{"type":"user.message"}\n', SESSION)).toBe(
      'its events.jsonl does not begin with session.start',
    );
    const lines = text.trimEnd().split('\n');
    expect(eventsFileProblem([...lines.slice(0, 3), '{bad', ...lines.slice(3)].join('\n'), SESSION)).toBe(
      'line 4 of its events.jsonl is not JSON',
    );
    // A last line cut short by a kill is not a corruption.
    expect(eventsFileProblem(`${lines.join('\n')}\n{"type":"assis`, SESSION)).toBeNull();
  });
});

describe('Copilot --output-format json stdout', () => {
  it('reads the error of a failed run', () => {
    expect(sessionErrors(fixture('fresh.stdout.jsonl'))).toEqual([]);
    expect(sessionErrors(fixture('auth-error.stdout.jsonl')).at(-1)).toMatch(
      /^Authentication failed with provider at http:\/\/127\.0\.0\.1:\d+\/v1 \(HTTP 401\)/,
    );
  });
});
