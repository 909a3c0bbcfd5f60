// The Codex CLI parsers on outputs recorded from the real CLI (0.171.0) against the scripted
// Responses API of test/agents/codex.test.ts (FORKFLUSH_RECORD_CODEX_FIXTURES=1 records them again).
// Figures in the fixtures: answer i of that run reported input 1000 + 100 i, cached 50 i, output
// 10 + i. fresh: answers 0-1; carried: the same thread resumed, answers 2-3; budget: a model that
// calls a tool forever at 5000 in / 100 out, stopped after its second answer; resumed-after-stop:
// that thread carried into the next episode, two more answers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  addRolloutLine,
  type Bounds,
  emptyRollout,
  episodeTokens,
  failureLine,
  overBounds,
  parseExecEvents,
  parseRollout,
  parseSessionRecord,
  rolloutProblem,
  rolloutThreadId,
  sessionRecordJson,
  usageAndSpend,
} from '../../../src/agents/codex-output.js';

const dir = join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'codex');
const fixture = (name: string) => readFileSync(join(dir, name), 'utf8');

const fresh = { stdout: fixture('fresh.stdout.jsonl'), rollout: fixture('fresh.rollout.jsonl') };
const carried = { stdout: fixture('carried.stdout.jsonl'), rollout: fixture('carried.rollout.jsonl') };
const budget = { stdout: fixture('budget.stdout.jsonl'), rollout: fixture('budget.rollout.jsonl') };
const threadOf = (stdout: string) => JSON.parse(stdout.split('\n')[0] as string).thread_id as string;

describe('codex exec --json (stdout)', () => {
  it('a finished session: the thread, and the running totals of turn.completed', () => {
    const e = parseExecEvents(fresh.stdout);
    expect(e.threadId).toMatch(/^[0-9a-f-]{36}$/);
    expect(e.usage).toEqual({ inputTokens: 2100, cachedInputTokens: 50, outputTokens: 21 });
    expect(e.turnsCompleted).toBe(1);
    // "Model metadata ... not found" is an error *item*, a warning: not a failure.
    expect(e.error).toBeNull();
  });

  it('a resumed thread reports the totals of the whole thread, earlier episodes included', () => {
    const e = parseExecEvents(carried.stdout);
    expect(e.threadId).toBe(threadOf(fresh.stdout));
    expect(e.usage).toEqual({ inputTokens: 4600, cachedInputTokens: 300, outputTokens: 46 });
  });

  it('a session stopped mid-turn has no turn.completed: no usage on stdout', () => {
    const e = parseExecEvents(budget.stdout);
    expect(e.threadId).not.toBeNull();
    expect(e.usage).toBeNull();
    expect(e.turnsCompleted).toBe(0);
  });

  it('a failed turn: its message, not the retries before it', () => {
    const e = parseExecEvents(fixture('unauthorized.stdout.jsonl'));
    expect(e.usage).toBeNull();
    expect(e.error).toMatch(/^unexpected status 401 Unauthorized: Incorrect API key provided/);
    expect(failureLine(e, fixture('unauthorized.stderr.txt'))).toMatch(/^unexpected status 401 Unauthorized/);
  });

  it('ignores what is not a JSON event line', () => {
    expect(parseExecEvents('WARNING: x\n{not json\n\n')).toEqual({
      threadId: null,
      usage: null,
      turnsCompleted: 0,
      error: null,
    });
  });
});

describe('the rollout (session file)', () => {
  it('a finished session: thread, folder, model, running totals, one call per answer, idle', () => {
    const r = parseRollout(fresh.rollout);
    expect(r.threadId).toBe(threadOf(fresh.stdout));
    expect(r.cwd).toMatch(/\/ws-[^/]+$/);
    expect(r.model).toBe('gpt-5-codex');
    expect(r.totals).toEqual(parseExecEvents(fresh.stdout).usage);
    expect(r.resumeTotals).toEqual(r.totals);
    expect(r.modelCalls).toBe(2);
    expect(r.idle).toBe(true);
    expect(r.toolCallPending).toBe(false);
    expect(r.badLines).toBe(0);
  });

  it('a resumed thread: the same file, grown, with the totals stdout reports', () => {
    const r = parseRollout(carried.rollout);
    expect(r.threadId).toBe(threadOf(fresh.stdout));
    expect(r.totals).toEqual(parseExecEvents(carried.stdout).usage);
    expect(r.modelCalls).toBe(4);
    expect(carried.rollout.startsWith(fresh.rollout.split('\n')[0] as string)).toBe(true);
  });

  it('a stopped session: the totals up to the stop, a turn not over, a tool call waiting', () => {
    const r = parseRollout(budget.rollout);
    expect(r.totals).toEqual({ inputTokens: 10000, cachedInputTokens: 0, outputTokens: 200 });
    // The second answer's token_count never came (the stop cut it off): a resume counts from the first.
    expect(r.resumeTotals).toEqual({ inputTokens: 5000, cachedInputTokens: 0, outputTokens: 100 });
    expect(r.modelCalls).toBe(2);
    expect(r.idle).toBe(false);
    expect(r.toolCallPending).toBe(true);
  });

  it('resumed after a stop: counts from the last token_count, and the restated totals are no answer', () => {
    const stopped = parseRollout(budget.rollout);
    const r = parseRollout(fixture('resumed-after-stop.rollout.jsonl'));
    expect(r.modelCalls - stopped.modelCalls).toBe(2);
    expect(r.idle).toBe(true);
    const share = episodeTokens(stopped.resumeTotals, r.totals as NonNullable<typeof r.totals>);
    // The next episode's own two answers (their figures depend on the run's order, so not fixed here).
    expect(share?.inputTokens).toBeGreaterThan(2000);
    expect(share?.inputTokens).toBeLessThan(5000);
    expect(episodeTokens(stopped.totals, r.totals as NonNullable<typeof r.totals>)).toBeNull();
  });

  it('read line by line as it grows, a torn line is counted and skipped', () => {
    const s = emptyRollout();
    for (const line of fresh.rollout.split('\n')) addRolloutLine(s, line);
    addRolloutLine(s, '{"timestamp":"2026-11-30T07:06:30.017Z","type":"event_m');
    expect(s.totals).toEqual(parseRollout(fresh.rollout).totals);
    expect(s.badLines).toBe(1);
  });

  it('checks a rollout is the thread to resume, from its first line', () => {
    const first = fresh.rollout.split('\n')[0];
    const id = threadOf(fresh.stdout);
    expect(rolloutProblem(first, id)).toBeNull();
    expect(rolloutProblem(first, '01a22b3f-0000-7000-8000-000000000000')).toMatch(/belongs to thread/);
    expect(rolloutProblem('', id)).toBe('its session file is empty');
    expect(rolloutProblem(undefined, id)).toBe('its session file does not start with a line Codex wrote');
    expect(rolloutProblem('garbage', id)).toBe('its session file does not start with a JSON line');
    expect(rolloutProblem('{"type":"event_msg","payload":{}}', id)).toMatch(/session metadata/);
  });

  it('the thread id in a rollout file name', () => {
    expect(rolloutThreadId('rollout-2026-11-30T07-06-25-01a22b46-bc2a-7553-b3aa-20b1cfd5050a.jsonl')).toBe(
      '01a22b46-bc2a-7553-b3aa-20b1cfd5050a',
    );
    expect(rolloutThreadId('rollout-x.jsonl')).toBeNull();
    expect(rolloutThreadId('notes.jsonl')).toBeNull();
  });
});

describe("this episode's share", () => {
  it('the carried episode is charged the running total less what the thread had before', () => {
    const before = parseRollout(fresh.rollout).resumeTotals;
    const after = parseExecEvents(carried.stdout).usage;
    expect(after).not.toBeNull();
    // Answers 2 and 3: input 1200 + 1300, cached 100 + 150, output 12 + 13.
    expect(episodeTokens(before, after as NonNullable<typeof after>)).toEqual({
      inputTokens: 2500,
      cachedInputTokens: 250,
      outputTokens: 25,
    });
  });

  it('a fresh thread is charged all of it; totals that went down are not of the same thread', () => {
    const t = { inputTokens: 10, cachedInputTokens: 0, outputTokens: 2 };
    expect(episodeTokens(null, t)).toEqual(t);
    expect(episodeTokens({ inputTokens: 11, cachedInputTokens: 0, outputTokens: 2 }, t)).toBeNull();
  });

  it('the spend in each unit: tokens in + out, usd priced from the tokens (cached input at its price), none for minutes', () => {
    const t = { inputTokens: 2500, cachedInputTokens: 250, outputTokens: 25 };
    const tokens = usageAndSpend(t, 2, 'gpt-5-codex', 'tokens');
    expect(tokens.reportedSpend).toBe(2525);
    expect(tokens.usage).toMatchObject({ inputTokens: 2500, outputTokens: 25, turns: 2 });
    const usd = usageAndSpend(t, 2, 'gpt-5-codex', 'usd');
    expect(usd.reportedSpend).toBeCloseTo((2250 * 1.25 + 250 * 0.125 + 25 * 10) / 1e6, 12);
    expect(usd.usage.costUsd).toBe(usd.reportedSpend);
    expect(usd.usage.pricedFrom).toContain('gpt-5-codex');
    expect(usageAndSpend(t, null, null, 'minutes').reportedSpend).toBeNull();
    expect(usageAndSpend(t, null, null, 'evaluations').reportedSpend).toBeNull();
    // An unknown model is priced at the dearest listed: never under the bill.
    expect(usageAndSpend(t, null, null, 'usd').usage.pricedFrom).toContain('is not in the table');
  });
});

describe('bounds forkflush enforces as the rollout grows', () => {
  /** The first line after which the bounds say stop (1-based), or null if they never do. */
  function stopsAt(text: string, b: Bounds, before = emptyRollout()): number | null {
    const s = emptyRollout();
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      addRolloutLine(s, lines[i] as string);
      if (overBounds(b, before, s)) return i + 1;
    }
    return null;
  }
  /** The line (1-based) of the nth record of that type. */
  function lineOf(text: string, type: string, nth: number): number {
    const lines = text.split('\n');
    let seen = 0;
    for (let i = 0; i < lines.length; i++) if (lines[i]?.includes(`"type":"${type}"`) && ++seen === nth) return i + 1;
    throw new Error(`no ${type} #${nth}`);
  }
  const bounds = (over: Partial<Bounds>): Bounds => ({
    unit: 'tokens',
    allowance: 1e9,
    maxTurns: undefined,
    model: null,
    ...over,
  });

  it('tokens: as soon as the second answer is recorded, before its tool runs', () => {
    expect(stopsAt(budget.rollout, bounds({ allowance: 8000 }))).toBe(lineOf(budget.rollout, 'token_usage_record', 2));
    expect(stopsAt(budget.rollout, bounds({ allowance: 20_000 }))).toBeNull();
  });

  it('usd: the priced spend, with the model the rollout names when none is configured', () => {
    // 5100 tokens of gpt-5-codex cost 0.00725; two answers 0.0145.
    expect(stopsAt(budget.rollout, bounds({ unit: 'usd', allowance: 0.01 }))).toBe(
      lineOf(budget.rollout, 'token_usage_record', 2),
    );
    expect(stopsAt(budget.rollout, bounds({ unit: 'usd', allowance: 0.02 }))).toBeNull();
  });

  it('minutes and evaluations are not watched here', () => {
    expect(stopsAt(budget.rollout, bounds({ unit: 'minutes', allowance: 0 }))).toBeNull();
  });

  it('max_turns: at the limit with a tool call waiting, not when the limit is the closing answer', () => {
    expect(stopsAt(budget.rollout, bounds({ maxTurns: 2 }))).toBe(lineOf(budget.rollout, 'token_usage_record', 2));
    expect(stopsAt(budget.rollout, bounds({ maxTurns: 1 }))).toBe(lineOf(budget.rollout, 'token_usage_record', 1));
    // The fresh session ends exactly at its second answer: a limit of 2 never stops it.
    expect(stopsAt(fresh.rollout, bounds({ maxTurns: 2 }))).toBeNull();
    expect(stopsAt(fresh.rollout, bounds({ maxTurns: 1 }))).not.toBeNull();
  });

  it("counts only this episode's turns and tokens on a resumed thread", () => {
    const before = parseRollout(fresh.rollout);
    // The carried episode's own two answers: 2525 tokens, 2 turns.
    expect(stopsAt(carried.rollout, bounds({ allowance: 2600, maxTurns: 2 }), before)).toBeNull();
    expect(stopsAt(carried.rollout, bounds({ allowance: 1300 }), before)).not.toBeNull();
  });
});

describe("forkflush's session.json", () => {
  const id = '01a22b46-bc2a-7553-b3aa-20b1cfd5050a';

  it('round-trips', () => {
    const rec = {
      agent: 'codex' as const,
      threadId: id,
      totals: { inputTokens: 1, cachedInputTokens: 0, outputTokens: 2 },
      modelCalls: 3,
      model: 'gpt-5-codex',
    };
    expect(parseSessionRecord(sessionRecordJson(rec))).toEqual(rec);
    expect(parseSessionRecord(sessionRecordJson({ ...rec, totals: null, model: null }))).toMatchObject({
      totals: null,
      model: null,
    });
  });

  it('says why a record cannot be used', () => {
    expect(parseSessionRecord('{"agent": "codex", "threadId": ')).toEqual({
      problem: 'session.json is not JSON ({"agent": "codex", "threadId":)',
    });
    expect(parseSessionRecord('')).toEqual({ problem: 'session.json is not JSON (empty)' });
    expect(parseSessionRecord('[]')).toEqual({ problem: 'session.json is not an object' });
    expect(parseSessionRecord(JSON.stringify({ agent: 'claude-code', threadId: id }))).toMatchObject({
      problem: expect.stringContaining('"claude-code", not codex'),
    });
    expect(parseSessionRecord(JSON.stringify({ agent: 'codex', threadId: 'x' }))).toMatchObject({
      problem: expect.stringContaining('no valid thread id'),
    });
    expect(parseSessionRecord(JSON.stringify({ agent: 'codex', threadId: id, totals: { inputTokens: -1 } }))).toEqual({
      problem: 'session.json has unreadable token totals',
    });
  });
});

describe('why Codex failed', () => {
  it('resuming a thread it does not have: the Error line, not the backtrace', () => {
    const line = failureLine(parseExecEvents(''), fixture('resume-unknown.stderr.txt'));
    expect(line).toMatch(/^Error: thread\/resume: thread\/resume failed: no rollout found for thread id /);
  });

  it('otherwise the last plain line of stderr, or nothing', () => {
    expect(failureLine(parseExecEvents(''), 'WARNING: x\nsomething broke\n   3: <unknown>\n')).toBe('something broke');
    expect(failureLine(parseExecEvents(''), '')).toBeNull();
  });
});
