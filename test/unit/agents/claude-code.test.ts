// The Claude Code spec's readers on outputs recorded from the real CLI (2.1.332) against the mock
// Anthropic API of test/agents (RECORD_CLAUDE_FIXTURES=1 npm run test:agents re-records them).
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  assistantTally,
  claudeCode,
  claudeEnding,
  projectDirName,
  readCostState,
  readStream,
  saysNoConversation,
  transcriptProblem,
} from '../../../src/agents/claude-code.js';
import type { Episode } from '../../../src/agents/spec.js';
import { priceTokens } from '../../../src/core/pricing.js';
import { shareOf, sumTallies, type Tally, usageOf } from '../../../src/core/usage.js';
import type { RunResult } from '../../../src/io/process.js';

const dir = join(import.meta.dirname, '..', '..', 'fixtures', 'agents', 'claude-code');
const fixture = (name: string) => readFileSync(join(dir, name), 'utf8');
const MODEL = 'claude-opus-5-5';
// What the mock reported per call in the recordings: 1200 input, 300 cache reads, 80 output.
const PER_CALL = { input: 1500, output: 80 };

/** How a run with this stdout and exit code ended, in Claude Code's terms. */
const endingOf = (stdout: string, exitCode = 1, stderr = '', resumed: string | null = null) =>
  claudeEnding({ stdout, stderr, exitCode, stopped: null }, resumed);
/** An episode's usage: its share of the conversation's running totals. */
const episodeUsage = (before: Tally | null, after: Tally, turns: number | null) =>
  usageOf({ tally: shareOf(before, after).share, turns });
const costOf = (t: Tally | null | undefined) => Object.values(t ?? {}).reduce((n, m) => n + (m.costUsd ?? 0), 0);

/** The raw `model_usage_since_last_result` of a log's result line (what the CLI says this run used). */
function sinceLastResult(log: string): Record<string, { inputTokens: number; outputTokens: number; costUSD: number }> {
  const line = log.split('\n').find((l) => l.includes('"type":"result"'));
  return JSON.parse(line as string).model_usage_since_last_result;
}

describe('readStream', () => {
  it('reads the init and result lines of a finished session', () => {
    const f = readStream(fixture('fresh.stream.jsonl'));
    expect(f.version).toBe('2.1.332');
    expect(f.model).toBe(MODEL);
    expect(f.result).toMatchObject({ subtype: 'success', isError: false, turns: 3, message: null });
    expect(f.sessionId).toBe(f.result?.sessionId);
    expect(costOf(f.result?.totals)).toBeCloseTo(0.01938, 9);
    expect(f.result?.totals?.[MODEL]).toEqual({
      input: 4500,
      cached: 900,
      written: 0,
      output: 240,
      calls: 0,
      costUsd: 0.019379999999999998,
    });
    expect(endingOf(fixture('fresh.stream.jsonl'), 0)).toEqual({});
  });

  it('has no result for a session stopped from outside, and skips lines that are not JSON', () => {
    expect(readStream(fixture('killed.stream.jsonl')).result).toBeNull();
    expect(readStream('[claude-code:unrecognized_model] {"model":"x"}\nnot json\n{"type":"result",').result).toBeNull();
  });

  it('reads the error of a resume that finds no conversation', () => {
    const log = fixture('no-conversation.stream.jsonl');
    const r = readStream(log).result;
    expect(r).toMatchObject({ subtype: 'error_during_execution', isError: true, turns: 0 });
    expect(saysNoConversation(r?.message ?? '')).toBe(true);
    expect(saysNoConversation(fixture('fresh.stream.jsonl'))).toBe(false);
  });
});

describe('claudeEnding', () => {
  it('reports the money and turn limits as "budget", with the CLI message', () => {
    const money = endingOf(fixture('max-budget.stream.jsonl'));
    expect(money.exit).toBe('budget');
    expect(money.note).toContain('money limit (Reached maximum budget ($0.000001))');
    const turns = endingOf(fixture('max-turns.stream.jsonl'));
    expect(turns).toEqual({
      exit: 'budget',
      note: 'Claude Code stopped at its turn limit (Reached maximum number of turns (1))',
    });
  });

  it('reports an API error as a crash with its status and message', () => {
    const r = readStream(fixture('api-error.stream.jsonl')).result;
    expect(r).toMatchObject({ subtype: 'success', isError: true, apiErrorStatus: 400 });
    expect(endingOf(fixture('api-error.stream.jsonl'))).toEqual({
      exit: 'crash',
      why: 'success (API status 400): API Error: 400 the mock refuses this request',
      status: 400,
    });
  });

  it('no result is a crash (stderr says why); a successful result with a non-zero exit is not trusted', () => {
    expect(endingOf('', 143, 'Terminated')).toEqual({ exit: 'crash', why: null });
    expect(endingOf('', 1)).toEqual({ exit: 'crash', why: 'no result' });
    expect(endingOf(fixture('fresh.stream.jsonl'), 1).exit).toBe('crash');
  });

  it('a resume that finds no conversation starts afresh; a fresh run that says so does not', () => {
    const log = fixture('no-conversation.stream.jsonl');
    expect(endingOf(log, 1, '', 'abc')).toEqual({ restart: 'Claude Code found no conversation abc' });
    expect(endingOf(log, 1).restart).toBeUndefined();
  });
});

describe('cumulative totals across a resume', () => {
  it('reads the cost record a run leaves in the transcript: the same totals as its result line', () => {
    const fresh = readStream(fixture('fresh.stream.jsonl')).result?.totals as Tally;
    const resumed = readStream(fixture('resumed.stream.jsonl')).result?.totals as Tally;
    expect(costOf(readCostState(fixture('fresh-transcript.jsonl')))).toBeCloseTo(costOf(fresh), 12);
    expect(costOf(readCostState(fixture('resumed-transcript.jsonl')))).toBeCloseTo(costOf(resumed), 12);
    expect(readCostState(fixture('resumed-transcript.jsonl'))?.[MODEL]?.output).toBe(480);
    // The resumed run's result counts the whole conversation: both episodes.
    expect(resumed[MODEL]?.output).toBe(2 * (fresh[MODEL]?.output ?? 0));
    expect(readCostState('{"type":"user","message":{}}\n')).toBeNull();
  });

  it("gives the second episode its own usage: the CLI's per-run figure", () => {
    const before = readCostState(fixture('fresh-transcript.jsonl'));
    const log = fixture('resumed.stream.jsonl');
    const after = readStream(log).result?.totals as Tally;
    const usage = episodeUsage(before, after, 3);
    const own = sinceLastResult(log)[MODEL];
    expect(usage).toEqual({
      inputTokens: 3 * PER_CALL.input,
      outputTokens: 3 * PER_CALL.output,
      costUsd: Math.round((own?.costUSD ?? 0) * 1e9) / 1e9,
      turns: 3,
    });
    expect(usage.outputTokens).toBe(own?.outputTokens);
  });

  it('counts a fresh conversation whole', () => {
    const after = readStream(fixture('fresh.stream.jsonl')).result?.totals as Tally;
    expect(episodeUsage(null, after, 3)).toMatchObject({ inputTokens: 4500, outputTokens: 240, costUsd: 0.01938 });
  });

  it('takes shrunken totals as the episode’s own, never a negative spend', () => {
    const before = readCostState(fixture('resumed-transcript.jsonl'));
    const after = readCostState(fixture('killed-transcript.jsonl')) as Tally;
    const usage = episodeUsage(before, after, null);
    expect(usage).toMatchObject({ inputTokens: PER_CALL.input, outputTokens: PER_CALL.output, costUsd: 0.00646 });
  });

  it('prices a model whose cost Claude Code did not know from the forkflush table', () => {
    const after: Tally = {
      'my-gateway-model': { input: 1000, cached: 0, written: 0, output: 100, calls: 0, costUsd: null },
    };
    const usage = episodeUsage(null, after, 1);
    const p = priceTokens('my-gateway-model', { input: 1000, output: 100 });
    expect(usage.costUsd).toBeCloseTo(p.costUsd, 12);
    expect(usage.pricedFrom).toContain(p.pricedFrom);
  });
});

describe('a session stopped from outside', () => {
  it('leaves a cost record of what it spent before the stop', () => {
    const t = fixture('killed-transcript.jsonl');
    expect(costOf(readCostState(t))).toBeCloseTo(0.00646, 12);
    expect(readCostState(t)?.[MODEL]).toMatchObject({ input: 1500, cached: 300 });
  });

  it('has its tokens in the transcript, one count per API response', () => {
    const read = assistantTally(fixture('killed-transcript.jsonl'));
    expect(read.responses).toBe(1);
    expect(read.tally[MODEL]).toMatchObject({ input: 1500, cached: 300, output: 80, costUsd: null });
    expect(assistantTally(fixture('fresh-transcript.jsonl')).responses).toBe(3);
    // One response written as two rows (two content blocks) counts once.
    const row = (text: string) =>
      JSON.stringify({
        type: 'assistant',
        message: {
          id: 'msg_1',
          model: 'm',
          content: [{ type: 'text', text }],
          usage: { input_tokens: 10, output_tokens: 5 },
        },
      });
    const twice = assistantTally(`${row('a')}\n${row('b')}\n`);
    expect(twice.responses).toBe(1);
    expect(twice.tally.m).toMatchObject({ input: 10, output: 5 });
    const sum = sumTallies(readCostState(fixture('fresh-transcript.jsonl')), twice.tally);
    expect(sum.m?.costUsd).toBeNull();
    expect(sum[MODEL]?.output).toBe(240);
  });
});

describe('transcriptProblem', () => {
  it('accepts a recorded transcript, also with a torn last line', () => {
    expect(transcriptProblem(fixture('fresh-transcript.jsonl'))).toBeNull();
    expect(transcriptProblem(`${fixture('fresh-transcript.jsonl')}{"type":"assistant","mess`)).toBeNull();
  });

  it('says what is wrong with one that cannot be resumed', () => {
    expect(transcriptProblem('')).toBe('is empty');
    expect(transcriptProblem('not json {{{\n')).toBe('has no readable line (not JSON lines)');
    const costOnly = fixture('fresh-transcript.jsonl')
      .split('\n')
      .filter((l) => l.includes('"type":"cost-state"'))
      .join('\n');
    expect(transcriptProblem(costOnly)).toBe('holds no conversation (no user or assistant message)');
  });
});

describe('projectDirName', () => {
  it('replaces every character but ASCII letters and digits with "-"', () => {
    expect(projectDirName('/tmp/ccx/w8')).toBe('-tmp-ccx-w8');
    expect(projectDirName('/home/é/my_repo.v2')).toBe('-home---my-repo-v2');
  });

  it('cuts a long name at 200 characters and adds the hash Claude Code 2.1.332 adds', () => {
    // Seen with the real CLI: this working directory's transcripts went to `<200 characters>-v3wr0v`.
    const long = `/tmp/ccx/${'a'.repeat(120)}/${'b'.repeat(100)}`;
    const name = projectDirName(long);
    expect(name).toBe(`${long.replace(/[^a-zA-Z0-9]/g, '-').slice(0, 200)}-v3wr0v`);
  });
});

describe('a transcript that grows past one read', () => {
  it('a run with neither a result nor a cost record: its tokens are counted to the transcript’s end', async () => {
    const home = mkdtempSync(join(tmpdir(), 'ff-claude-'));
    const workdir = mkdtempSync(join(tmpdir(), 'ff-claude-work-'));
    const id = '01a22b3f-0000-7000-8000-000000000002';
    const episode = {
      home,
      env: {},
      agent: { kind: 'claude-code', args: [], env: [] },
      workdir,
      prompt: 'p',
      unit: 'tokens',
    };
    const cli = await claudeCode.start(episode as unknown as Episode, { id, baseline: null, bytes: 0 });
    const folder = join(home, 'projects', projectDirName(realpathSync(workdir)));
    mkdirSync(folder, { recursive: true });
    const row = (n: number, text: string) =>
      `${JSON.stringify({ type: 'assistant', message: { id: `msg_${n}`, model: MODEL, content: text, usage: { input_tokens: 100, output_tokens: 10 } } })}\n`;
    // Nine megabytes of answers, then two more: more than one read takes.
    const big = 'x'.repeat(1000);
    let text = '';
    for (let n = 0; n < 9000; n++) text += row(n, big);
    writeFileSync(join(folder, `${id}.jsonl`), text + row(9000, 'last') + row(9001, 'last'));
    const spent = await cli.spent?.({ stdout: '', stderr: '', exitCode: 1, stopped: null } as RunResult);
    expect(spent?.tally[MODEL]?.calls).toBe(9002);
    rmSync(home, { recursive: true, force: true });
    rmSync(workdir, { recursive: true, force: true });
  });
});
