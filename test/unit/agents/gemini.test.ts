// The Gemini CLI readers on outputs recorded from the real CLI (0.61.0) in test/fixtures/agents/gemini:
// result-*, error-* and session-{fresh,resumed,turn-limit,killed} against the mock Gemini API of
// test/agents/mock/gemini.ts (1200 prompt, 80 candidate and 20 thinking tokens per call);
// session-resumed-twice and session-resume-stub from an earlier scripted server (100 prompt and 10
// candidate tokens per call) across three runs in two folders, the last in a later minute.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { usageFromStats as fromStats, parseResult } from '../../../src/agents/gemini.js';
import {
  usageFromSessions as fromSessions,
  isResumable,
  readSession,
  type SessionMessage,
  type SessionRecord,
} from '../../../src/agents/gemini-session.js';
import { type Spent, usageOf } from '../../../src/core/usage.js';

/** The episode's usage as the runner makes it, without prices (the tallies are what the CLI said). */
const usage = (spent: Spent | null) => {
  if (!spent) return null;
  const { pricedFrom: _p, costUsd: _c, ...u } = usageOf(spent);
  return u;
};
const usageFromStats = (stats: unknown) => usage(fromStats(stats));
const usageFromSessions = (s: SessionRecord[], before: Set<string>) => usage(fromSessions(s, before)) ?? { turns: -1 };
const writtenIds = (s: SessionRecord[]) => new Set(s.flatMap((r) => [...r.written.keys()]));
const tallyOf = (stats: unknown) => fromStats(stats)?.tally;

const fixture = (name: string) =>
  readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'gemini', name), 'utf8');

/** The prompts of a conversation: user texts other than the CLI's session context. */
const prompts = (messages: SessionMessage[]) =>
  messages
    .filter((m) => m.type === 'user' && Array.isArray(m.content))
    .flatMap((m) => (m.content as { text?: string }[]).map((p) => p.text))
    .filter((t): t is string => t !== undefined && !t.startsWith('<session_context>'));

describe('parseResult and usageFromStats', () => {
  it('reads a successful run: session id, answer and this process’s tokens (thinking counted as output)', () => {
    const r = parseResult(fixture('result-fresh.stdout.txt'));
    expect(r?.sessionId).toBe('5f0c6c1e-2b7a-4f57-9d3e-8a1b2c3d4e5f');
    expect(r?.response).toBe('All done.');
    expect(r?.error).toBeUndefined();
    expect(usageFromStats(r?.stats)).toEqual({ inputTokens: 3600, outputTokens: 300, turns: 3 });
    expect(tallyOf(r?.stats)).toEqual({
      'gemini-2.5-flash': { input: 3600, cached: 0, written: 0, output: 300, calls: 0, costUsd: null },
    });
  });

  it('a resumed run reports only its own calls', () => {
    const r = parseResult(fixture('result-resumed.stdout.txt'));
    expect(usageFromStats(r?.stats)).toMatchObject({ inputTokens: 3600, outputTokens: 300, turns: 3 });
  });

  it('counts every model, the router too, but only the agent loop as turns', () => {
    const stats = parseResult(fixture('result-auto-model.stdout.txt'))?.stats;
    expect(Object.keys(tallyOf(stats) ?? {})).toEqual(['gemini-3.5-flash-lite', 'gemini-3.8-flash']);
    expect(usageFromStats(stats)).toMatchObject({ inputTokens: 3610, outputTokens: 305, turns: 3 });
  });

  it('reads the error a fatal exit prints on stderr (twice, once with an [ERROR] prefix), without stats', () => {
    const r = parseResult(fixture('error-turn-limit.stderr.txt'));
    expect(r).toEqual({
      sessionId: '7d1e2f3a-4b5c-4d6e-8f70-81a2b3c4d5e6',
      error: {
        type: 'FatalTurnLimitedError',
        message:
          'Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.',
      },
    });
    expect(usageFromStats(r?.stats)).toBeNull();
  });

  it('finds nothing in empty, torn or unrelated output', () => {
    expect(parseResult('')).toBeNull();
    expect(parseResult('Warning: something\n{\n  "session_id": "x",\n')).toBeNull();
    expect(parseResult('{\n  "other": 1\n}\n')).toBeNull();
    expect(usageFromStats({ models: { m: { api: {} } } })).toBeNull();
  });
});

describe('readSession and usageFromSessions', () => {
  it('replays a fresh session: the conversation in order, one entry per message id', () => {
    const s = readSession(fixture('session-fresh.jsonl'));
    expect(s.sessionId).toBe('5f0c6c1e-2b7a-4f57-9d3e-8a1b2c3d4e5f');
    expect(s.messages.map((m) => m.type)).toEqual(['user', 'user', 'gemini', 'user', 'gemini', 'user', 'gemini']);
    expect(prompts(s.messages)).toEqual(['FIRST PROMPT']);
    // The model's first answer was written twice (before and after its tool call): it counts once.
    expect(s.messages[2]?.toolCalls).toHaveLength(1);
    expect(isResumable(s.messages)).toBe(true);
    expect(usageFromSessions([s], new Set())).toEqual({ inputTokens: 3600, outputTokens: 300, turns: 3 });
  });

  it('a resumed session holds both runs; the calls not written before are this run’s', () => {
    const fresh = readSession(fixture('session-fresh.jsonl'));
    const resumed = readSession(fixture('session-resumed.jsonl'));
    expect(resumed.sessionId).toBe(fresh.sessionId);
    expect(prompts(resumed.messages)).toEqual(['FIRST PROMPT', 'SECOND PROMPT']);
    expect(usageFromSessions([resumed], writtenIds([fresh]))).toMatchObject({
      inputTokens: 3600,
      outputTokens: 300,
      turns: 3,
    });
    expect(usageFromSessions([resumed], new Set())).toMatchObject({ turns: 6 });
  });

  it('a file resumed twice (the CLI re-initialising it in between) keeps the whole conversation', () => {
    const s = readSession(fixture('session-resumed-twice.jsonl'));
    expect(s.sessionId).toBe('8b31a808-0213-42b9-8f18-8a89334f731c');
    expect(prompts(s.messages)).toEqual(['write hello.txt', 'continue please', 'third prompt']);
    expect(usageFromSessions([s], new Set())).toMatchObject({ inputTokens: 600, outputTokens: 60, turns: 6 });
  });

  it('the stub a resume leaves in another minute has the same id and nothing to resume', () => {
    const stub = readSession(fixture('session-resume-stub.jsonl'));
    expect(stub.sessionId).toBe('8b31a808-0213-42b9-8f18-8a89334f731c');
    expect(isResumable(stub.messages)).toBe(false);
    expect(usageFromSessions([stub], new Set()).turns).toBe(0);
  });

  it('a run stopped at the turn limit or killed while waiting recorded what it got', () => {
    const limited = readSession(fixture('session-turn-limit.jsonl'));
    expect(usageFromSessions([limited], new Set())).toMatchObject({ inputTokens: 1200, outputTokens: 100, turns: 1 });
    const killed = readSession(fixture('session-killed.jsonl'));
    expect(prompts(killed.messages)).toEqual(['HANGS']);
    expect(isResumable(killed.messages)).toBe(true);
    expect(usageFromSessions([killed], new Set())).toMatchObject({ inputTokens: 0, outputTokens: 0, turns: 0 });
  });

  it('a rewind drops messages from the conversation, but what they cost still counts', () => {
    const text = fixture('session-fresh.jsonl');
    const s = readSession(text);
    const third = s.messages[4]?.id as string;
    const rewound = readSession(`${text}${JSON.stringify({ $rewindTo: third })}\n`);
    expect(rewound.messages.map((m) => m.id)).toEqual(s.messages.slice(0, 4).map((m) => m.id));
    expect(usageFromSessions([rewound], new Set()).turns).toBe(3);
  });

  it('skips a torn last line', () => {
    const text = fixture('session-fresh.jsonl');
    const s = readSession(`${text}{"id":"torn","type":"gem`);
    expect(s.messages).toHaveLength(7);
    expect(readSession('not a session\n').sessionId).toBeNull();
  });
});
