// opencode's event stream as recorded from the real CLI (test/fixtures/agents/opencode/README.md).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { addEvents, configContent, emptyRun } from '../../../src/agents/opencode.js';

const fixture = (name: string) =>
  readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'opencode', name), 'utf8');

describe('opencode events', () => {
  it('sums the steps: input with its cached part, output with its reasoning, and the session id', () => {
    const run = addEvents(emptyRun(), fixture('fresh.stdout.jsonl'));
    expect(run).toMatchObject({
      steps: 2,
      tokens: { input: 2000, cached: 400, written: 0, output: 100, calls: 2 },
      costUsd: 0,
      errors: [],
    });
    expect(run.sessionId).toMatch(/^ses_/);
  });

  it('takes the cost opencode priced, and reads a stream in pieces as it grows', () => {
    const text = fixture('reasoning.stdout.jsonl');
    const lines = text.split('\n');
    const run = emptyRun();
    for (const line of lines) addEvents(run, line);
    expect(run.steps).toBe(2);
    expect(run.costUsd).toBeCloseTo(2 * 0.00092, 12);
  });

  it('names the API error, with the body the API sent', () => {
    const run = addEvents(emptyRun(), fixture('http401.stdout.jsonl'));
    expect(run.steps).toBe(0);
    expect(run.errors).toEqual(['APIError: mock error 401']);
    const filtered = addEvents(emptyRun(), fixture('content-filter.stdout.jsonl'));
    expect(filtered.errors.at(-1)).toBe(
      "ContentFilterError: The response was blocked by the provider's content filter",
    );
  });

  it('skips lines that are not its events (stderr shares the log)', () => {
    const run = addEvents(emptyRun(), 'INFO something\n{"not":"an event"}\n{broken\n');
    expect(run).toEqual(emptyRun());
  });
});

describe('opencode config', () => {
  it("keeps the user's providers and adds forkflush's settings, and agent.max_turns as the step limit", () => {
    const user = JSON.stringify({
      provider: { x: { npm: 'p' } },
      agent: { build: { temperature: 0.2 } },
      snapshot: true,
    });
    expect(configContent(user, 7)).toEqual({
      provider: { x: { npm: 'p' } },
      agent: { build: { temperature: 0.2, steps: 7 } },
      snapshot: false,
      autoupdate: false,
      share: 'disabled',
    });
    expect(configContent('not json', undefined)).toEqual({ snapshot: false, autoupdate: false, share: 'disabled' });
  });
});
