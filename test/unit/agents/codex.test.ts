// The Codex spec's readers on outputs recorded from the real CLI (0.171.0) against the scripted
// Responses API of test/agents/codex.test.ts (FORKFLUSH_RECORD_CODEX_FIXTURES=1 records them again).
// Figures in the fixtures: answer i of that run reported input 1000 + 100 i, cached 50 i, output
// 10 + i. fresh: answers 0-1; carried: the same thread resumed, answers 2-3; budget: a model that
// calls a tool forever at 5000 in / 100 out, stopped after its second answer; resumed-after-stop:
// that thread carried into the next episode, two more answers.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  addRolloutLine,
  codex,
  execEvents,
  type Rollout,
  rollout,
  rolloutProblem,
  rolloutThreadId,
} from '../../../src/agents/codex.js';
import type { Episode } from '../../../src/agents/spec.js';
import { failureLine } from '../../../src/core/text.js';

const dir = join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'codex');
const fixture = (name: string) => readFileSync(join(dir, name), 'utf8');

const fresh = { stdout: fixture('fresh.stdout.jsonl'), rollout: fixture('fresh.rollout.jsonl') };
const carried = { stdout: fixture('carried.stdout.jsonl'), rollout: fixture('carried.rollout.jsonl') };
const budget = { stdout: fixture('budget.stdout.jsonl'), rollout: fixture('budget.rollout.jsonl') };
const threadOf = (stdout: string) => JSON.parse(stdout.split('\n')[0] as string).thread_id as string;

const parseRollout = (text: string) => text.split('\n').reduce(addRolloutLine, rollout());
const tokens = (t: Rollout['totals']) => t;

describe('codex exec --json (stdout)', () => {
  it('a finished session: the thread, and the running totals of turn.completed', () => {
    const e = execEvents(fresh.stdout);
    expect(e.threadId).toMatch(/^[0-9a-f-]{36}$/);
    expect(e.usage).toEqual({ input: 2100, cached: 50, output: 21 });
    // "Model metadata ... not found" is an error *item*, a warning: not a failure.
    expect(e.error).toBeNull();
  });

  it('a resumed thread reports the totals of the whole thread, earlier episodes included', () => {
    const e = execEvents(carried.stdout);
    expect(e.threadId).toBe(threadOf(fresh.stdout));
    expect(e.usage).toEqual({ input: 4600, cached: 300, output: 46 });
  });

  it('a session stopped mid-turn has no turn.completed: no usage on stdout', () => {
    const e = execEvents(budget.stdout);
    expect(e.threadId).not.toBeNull();
    expect(e.usage).toBeNull();
  });

  it('a failed turn: its message, not the retries before it', () => {
    const e = execEvents(fixture('unauthorized.stdout.jsonl'));
    expect(e.usage).toBeNull();
    expect(e.error).toMatch(/^unexpected status 401 Unauthorized: Incorrect API key provided/);
  });

  it('ignores what is not a JSON event line', () => {
    expect(execEvents('WARNING: x\n{not json\n\n')).toEqual({ threadId: null, usage: null, error: null });
  });
});

describe('the rollout (session file)', () => {
  it('a finished session: thread, model, running totals, one call per answer, idle', () => {
    const r = parseRollout(fresh.rollout);
    expect(r.threadId).toBe(threadOf(fresh.stdout));
    expect(r.model).toBe('gpt-5-codex');
    expect(r.totals).toEqual(execEvents(fresh.stdout).usage);
    expect(r.resumeTotals).toEqual(r.totals);
    expect(r.modelCalls).toBe(2);
    expect(r.idle).toBe(true);
    expect(r.toolCallPending).toBe(false);
  });

  it('a resumed thread: the same file, grown, with the totals stdout reports', () => {
    const r = parseRollout(carried.rollout);
    expect(r.threadId).toBe(threadOf(fresh.stdout));
    expect(r.totals).toEqual(execEvents(carried.stdout).usage);
    expect(r.modelCalls).toBe(4);
    expect(carried.rollout.startsWith(fresh.rollout.split('\n')[0] as string)).toBe(true);
  });

  it('a stopped session: the totals up to the stop, a turn not over, a tool call waiting', () => {
    const r = parseRollout(budget.rollout);
    expect(r.totals).toEqual({ input: 10000, cached: 0, output: 200 });
    // The second answer's token_count never came (the stop cut it off): a resume counts from the first.
    expect(r.resumeTotals).toEqual({ input: 5000, cached: 0, output: 100 });
    expect(r.modelCalls).toBe(2);
    expect(r.idle).toBe(false);
    expect(r.toolCallPending).toBe(true);
  });

  it('resumed after a stop: counts from the last token_count, and the restated totals are no answer', () => {
    const stopped = parseRollout(budget.rollout);
    const r = parseRollout(fixture('resumed-after-stop.rollout.jsonl'));
    expect(r.modelCalls - stopped.modelCalls).toBe(2);
    expect(r.idle).toBe(true);
    // The next episode's own two answers (their figures depend on the run's order, so not fixed here).
    const own = (tokens(r.totals)?.input ?? 0) - (stopped.resumeTotals?.input ?? 0);
    expect(own).toBeGreaterThan(2000);
    expect(own).toBeLessThan(5000);
  });

  it('read line by line as it grows, a torn line skipped', () => {
    const s = rollout();
    for (const line of fresh.rollout.split('\n')) addRolloutLine(s, line);
    addRolloutLine(s, '{"timestamp":"2026-11-30T07:06:30.017Z","type":"event_m');
    expect(s.totals).toEqual(parseRollout(fresh.rollout).totals);
  });

  it('checks a rollout is the thread to resume, from its first line', () => {
    const first = fresh.rollout.split('\n')[0];
    const id = threadOf(fresh.stdout);
    expect(rolloutProblem(first, id)).toBeNull();
    expect(rolloutProblem(first, '01a22b3f-0000-7000-8000-000000000000')).toMatch(/belongs to thread/);
    expect(rolloutProblem('', id)).toBe('its session file is empty');
    expect(rolloutProblem(undefined, id)).toBe('its session file is empty');
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

describe('why Codex failed', () => {
  it('resuming a thread it does not have: the Error line, not the backtrace', () => {
    expect(failureLine(fixture('resume-unknown.stderr.txt'))).toMatch(
      /^Error: thread\/resume: thread\/resume failed: no rollout found for thread id /,
    );
  });
});

describe('a carried rollout larger than one read', () => {
  it("the episode counts from its last totals, read to the end, not from the rollout's first 8 MB", async () => {
    const home = mkdtempSync(join(tmpdir(), 'ff-codex-'));
    const id = '01a22b3f-0000-7000-8000-000000000001';
    const file = join(home, 'sessions', '2026', '12', '06', `rollout-2026-12-06T00-00-00-${id}.jsonl`);
    mkdirSync(join(file, '..'), { recursive: true });
    const line = (type: string, payload: object) => `${JSON.stringify({ type, payload })}\n`;
    const filler = line('response_item', { type: 'message', role: 'user', content: 'x'.repeat(1000) });
    const total = { input_tokens: 5000, cached_input_tokens: 0, output_tokens: 50 };
    writeFileSync(
      file,
      line('session_meta', { id }) +
        filler.repeat(9000) +
        line('event_msg', { type: 'token_count', info: { total_token_usage: total } }),
    );
    const episode = {
      home,
      env: {},
      agent: { kind: 'codex', args: [], env: [] },
      workdir: home,
      prompt: 'p',
      confined: true,
      unit: 'tokens',
    } as unknown as Episode;
    const cli = await codex.start(episode, { threadId: id, rollout: file });
    const spent = await cli.spent?.();
    const input = Object.values(spent?.tally ?? {}).reduce((n, m) => n + m.input, 0);
    expect(input).toBe(0);
    rmSync(home, { recursive: true, force: true });
  });
});
