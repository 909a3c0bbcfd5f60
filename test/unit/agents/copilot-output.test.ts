// The pure Copilot CLI readers, on outputs recorded from the real CLI (test/fixtures/agents/copilot/).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  addTotals,
  creditsForUsd,
  episodeUsage,
  eventsFileProblem,
  parseJsonLines,
  parseJsonOutput,
  parseUsageFile,
  readSavedTotals,
  subtractTotals,
  summarizeEvents,
} from '../../../src/agents/copilot-output.js';

const fixture = (name: string) =>
  readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'copilot', name), 'utf8');
const SESSION = '388d7dae-ba1f-4a3f-a68c-3585267d6c7b';

describe('Copilot usage file', () => {
  it('reads per-model tokens and requests', () => {
    const t = parseUsageFile(fixture('fresh.usage.json'));
    expect(t.models).toEqual({
      'gpt-5-mini': { inputTokens: 3630, outputTokens: 240, cacheReadTokens: 0, cacheWriteTokens: 0, requests: 3 },
    });
    // Bring-your-own-key: AI credits are "unavailable", so the cost is priced from tokens.
    expect(t.creditsAvailable).toBe(false);
  });

  it('is cumulative over a resumed session: the episode is the difference', () => {
    const before = parseUsageFile(fixture('fresh.usage.json'));
    const now = parseUsageFile(fixture('resumed.usage.json'));
    expect(now.models['gpt-5-mini']?.requests).toBe(6);
    const { delta, note } = subtractTotals(now, before);
    expect(note).toBeUndefined();
    expect(delta.models['gpt-5-mini']).toMatchObject({ inputTokens: 3720, outputTokens: 240, requests: 3 });
    expect(addTotals(before, delta)).toEqual(now);
    expect(subtractTotals(now, null)).toEqual({ delta: now });
  });

  it('charges a running total that went down whole, and says so: spend is never under-reported', () => {
    const before = parseUsageFile(fixture('resumed.usage.json'));
    const now = parseUsageFile(fixture('fresh.usage.json'));
    const { delta, note } = subtractTotals(now, before);
    expect(delta.models['gpt-5-mini']).toMatchObject({ inputTokens: 3630, outputTokens: 240, requests: 3 });
    expect(note).toMatch(/running totals went down \(inputTokens, outputTokens, requests\)/);
  });

  it('says why an unreadable file cannot be read', () => {
    expect(() => parseUsageFile('oops')).toThrow('not JSON');
    expect(() => parseUsageFile('{"x":1}')).toThrow('no modelMetrics');
  });

  it('prices tokens with forkflush prices, or takes AI credits at $0.01 when the CLI counted them', () => {
    const { delta } = subtractTotals(
      parseUsageFile(fixture('resumed.usage.json')),
      parseUsageFile(fixture('fresh.usage.json')),
    );
    const u = episodeUsage(delta);
    expect(u).toMatchObject({ inputTokens: 3720, outputTokens: 240, turns: 3 });
    expect(u.costUsd).toBeCloseTo((3720 * 0.25 + 240 * 2) / 1e6, 12); // no cache reads in this session
    expect(u.pricedFrom).toContain('gpt-5-mini');
    const hosted = parseUsageFile(
      JSON.stringify({
        totalNanoAiu: 2.5e9,
        aiCreditsStatus: 'ok',
        modelMetrics: { 'claude-sonnet-4.5': { requests: { count: 2 }, usage: { inputTokens: 10, outputTokens: 5 } } },
      }),
    );
    expect(hosted.creditsAvailable).toBe(true);
    expect(episodeUsage(hosted)).toEqual({ inputTokens: 10, outputTokens: 5, costUsd: 0.025, turns: 2 });
  });

  it('round-trips the totals the adapter saved in session.json', () => {
    const saved = JSON.parse(fixture('resumed.session.json'));
    expect(saved.sessionId).toBe(SESSION);
    expect(readSavedTotals(saved.totals)).toEqual(parseUsageFile(fixture('resumed.usage.json')));
    expect(readSavedTotals(null)).toBeNull();
  });

  it('never asks for fewer AI credits than the CLI minimum', () => {
    expect(creditsForUsd(0.05)).toBe(30);
    expect(creditsForUsd(1.234)).toBe(124);
  });
});

describe('Copilot session events', () => {
  it('counts turns and usage records (what the watcher bounds)', () => {
    const { events, rest, bad } = parseJsonLines(fixture('resumed.events.jsonl'));
    expect(bad).toBe(0);
    expect(rest).toBe('');
    const { turns, totals } = summarizeEvents(events);
    expect(turns).toBe(6);
    expect(totals.models['gpt-5-mini']).toMatchObject({ inputTokens: 7350, outputTokens: 480, requests: 6 });
    // A session killed while the model hung: a turn started, nothing was used.
    const killed = summarizeEvents(parseJsonLines(fixture('killed.events.jsonl')).events);
    expect(killed).toEqual({ turns: 1, totals: { models: {}, nanoAiu: 0, creditsAvailable: false } });
  });

  it('keeps an unfinished last line for the next read', () => {
    const text = fixture('resumed.events.jsonl');
    const cut = text.slice(0, text.indexOf('\n', 5000) + 40);
    const { events, rest } = parseJsonLines(cut);
    expect(rest.length).toBe(39);
    expect(events.length).toBeGreaterThan(1);
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
  it('reads the result line of a finished run', () => {
    expect(parseJsonOutput(fixture('fresh.stdout.jsonl'))).toEqual({ exitCode: 0, sessionId: SESSION, errors: [] });
  });

  it('reads the error of a failed run', () => {
    const facts = parseJsonOutput(fixture('auth-error.stdout.jsonl'));
    expect(facts.exitCode).toBe(1);
    expect(facts.errors.at(-1)).toMatch(
      /^Authentication failed with provider at http:\/\/127\.0\.0\.1:\d+\/v1 \(HTTP 401\)/,
    );
  });

  it('tolerates output cut at the front', () => {
    const text = fixture('fresh.stdout.jsonl');
    expect(parseJsonOutput(text.slice(text.length - 500)).exitCode).toBe(0);
  });
});
