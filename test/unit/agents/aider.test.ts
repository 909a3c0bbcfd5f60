// aider's output readers (src/agents/aider.ts) on its documented output formats
// (test/fixtures/agents/aider/documented-output.txt, with its sources) and on the fake's own run.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAiderOutput, parseTokenCount, aiderUsage as spentOf } from '../../../src/agents/aider.js';
import { usageOf } from '../../../src/core/usage.js';

const aiderUsage = (...a: Parameters<typeof spentOf>) => usageOf(spentOf(...a));

const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'aider');

describe('aider output readers (documented formats)', () => {
  const documented = () => readFile(join(FIXTURES, 'documented-output.txt'), 'utf8');

  it('reads token counts as format_tokens prints them', () => {
    expect(parseTokenCount('997')).toBe(997);
    expect(parseTokenCount('1.6k')).toBe(1600);
    expect(parseTokenCount('12k')).toBe(12000);
    expect(parseTokenCount('2,841')).toBe(2841);
  });

  it('reads every usage line, the model, costs and errors', async () => {
    const out = parseAiderOutput(await documented());
    expect(out.model).toBe('anthropic/claude-3-7-sonnet-20250219');
    expect(out.calls).toEqual([
      { sent: 2400, received: 193, cacheWrite: 0, cacheHit: 0, messageCost: 0.01, sessionCost: 0.01 },
      { sent: 2600, received: 211, cacheWrite: 0, cacheHit: 0, messageCost: 0.01, sessionCost: 0.02 },
      { sent: 14000, received: 550, cacheWrite: 2100, cacheHit: 9800, messageCost: 0.0086, sessionCost: 0.0286 },
      { sent: 2841, received: 381, cacheWrite: 0, cacheHit: 0, messageCost: 0, sessionCost: 0.0286 },
    ]);
    expect(out.errors).toEqual([
      {
        message:
          'litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current quota, please check your plan and billing details.',
        afterCalls: 4,
      },
    ]);
    expect(aiderUsage(out)).toEqual({ inputTokens: 21841, outputTokens: 1335, costUsd: 0.0286, turns: 4 });
  });

  it('prices tokens itself when aider printed no cost, and reads colour codes away', () => {
    const out = parseAiderOutput(
      '\x1b[0mModel: openai/gpt-5-mini with diff edit format\nTokens: 4.2k sent, 310 received.\n',
    );
    const usage = aiderUsage(out);
    expect(usage).toMatchObject({ inputTokens: 4200, outputTokens: 310, turns: 1 });
    expect(usage.costUsd).toBeCloseTo((4200 * 0.25 + 310 * 2) / 1e6, 12);
    expect(usage.pricedFrom).toContain('gpt-5-mini');
    expect(aiderUsage(parseAiderOutput('nothing'))).toEqual({ inputTokens: 0, outputTokens: 0, costUsd: 0, turns: 0 });
  });

  it("reads the fake's own recorded run like aider's", async () => {
    const out = parseAiderOutput(await readFile(join(FIXTURES, 'fake-run.log'), 'utf8'));
    expect(out.model).toBe('openai/gpt-4o');
    expect(out.calls.length).toBe(2);
    expect(aiderUsage(out)).toMatchObject({ inputTokens: 3000, outputTokens: 200, turns: 2 });
  });
});

describe('aider prices', () => {
  it('prices its cache hits and writes at their own rates when aider printed no cost', () => {
    const out = parseAiderOutput(
      'Model: anthropic/claude-sonnet-4 with diff edit format\nTokens: 14k sent, 2.1k cache write, 9.8k cache hit, 550 received.\n',
    );
    const usage = aiderUsage(out);
    // 2.1k fresh at $3, 2.1k written at $3.75, 9.8k read at $0.3, 550 out at $15 per million.
    expect(usage.costUsd).toBeCloseTo((2100 * 3 + 2100 * 3.75 + 9800 * 0.3 + 550 * 15) / 1e6, 12);
  });
});
