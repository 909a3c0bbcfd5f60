// What model APIs' answers state they used (core/answer-usage.ts), and the proxy's meter that reads
// them as they stream (worker/answer-meter.ts). The shapes are the providers' documented ones:
// Anthropic Messages, OpenAI Chat Completions and Responses, Gemini generateContent.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { answerUse, uncountedSpend } from '../../src/core/answer-usage.js';
import { EGRESS_METER_MAX_BYTES } from '../../src/core/bounds.js';
import { AnswerMeter } from '../../src/worker/answer-meter.js';

const use = (input: number, cached: number, written: number, output: number) => ({
  input,
  cached,
  written,
  output,
  calls: 1,
});

describe("a model answer's stated use", () => {
  it("reads Anthropic's, the cache's parts added to input, a stream's running totals as their largest", () => {
    const usage = { input_tokens: 10, cache_read_input_tokens: 200, cache_creation_input_tokens: 30, output_tokens: 7 };
    expect(answerUse([{ type: 'message', model: 'claude-x', usage }])).toEqual({
      model: 'claude-x',
      use: use(240, 200, 30, 7),
    });
    const stream = [
      { type: 'message_start', message: { model: 'claude-x', usage: { ...usage, output_tokens: 1 } } },
      { type: 'content_block_delta', delta: { type: 'text_delta', text: '{"usage":{"output_tokens":9999}}' } },
      { type: 'message_delta', usage: { output_tokens: 7 } },
      { type: 'message_stop' },
    ];
    expect(answerUse(stream)).toEqual({ model: 'claude-x', use: use(240, 200, 30, 7) });
  });

  it("reads OpenAI's Chat Completions (a stream's usage on its last chunk) and Responses (at response.completed)", () => {
    const chat = { prompt_tokens: 50, completion_tokens: 20, prompt_tokens_details: { cached_tokens: 40 } };
    expect(answerUse([{ object: 'chat.completion', model: 'gpt-x', usage: chat }])).toEqual({
      model: 'gpt-x',
      use: use(50, 40, 0, 20),
    });
    const chunks = [
      { object: 'chat.completion.chunk', model: 'gpt-x', choices: [{ delta: { content: 'hi' } }], usage: null },
      { object: 'chat.completion.chunk', model: 'gpt-x', choices: [], usage: chat },
    ];
    expect(answerUse(chunks)).toEqual({ model: 'gpt-x', use: use(50, 40, 0, 20) });
    const responses = { input_tokens: 80, input_tokens_details: { cached_tokens: 64 }, output_tokens: 9 };
    const events = [
      { type: 'response.created', response: { model: 'gpt-y', usage: null } },
      { type: 'response.completed', response: { model: 'gpt-y', usage: responses } },
    ];
    expect(answerUse(events)).toEqual({ model: 'gpt-y', use: use(80, 64, 0, 9) });
  });

  it("reads Gemini's usageMetadata, thoughts as output and tool prompts as input, in a JSON array of chunks too", () => {
    const meta = (candidates: number) => ({
      promptTokenCount: 100,
      toolUsePromptTokenCount: 5,
      cachedContentTokenCount: 60,
      candidatesTokenCount: candidates,
      thoughtsTokenCount: 11,
    });
    const chunks = [
      { candidates: [], usageMetadata: meta(3), modelVersion: 'gemini-x' },
      { candidates: [], usageMetadata: meta(8), modelVersion: 'gemini-x' },
    ];
    expect(answerUse([chunks])).toEqual({ model: 'gemini-x', use: use(105, 60, 0, 19) });
  });

  it('states nothing for an answer without usage: an error, a token count, text', () => {
    expect(answerUse([{ type: 'error', error: { type: 'overloaded_error' } }])).toBeNull();
    expect(answerUse([{ input_tokens_estimate: 12 }, 'text', null, 7])).toBeNull();
    expect(answerUse([])).toBeNull();
  });

  it('counts a figure that is not a count as 0, never as a negative that would net against the rest', () => {
    expect(answerUse([{ usage: { input_tokens: -500, output_tokens: 'many' } }])).toEqual({
      model: 'unknown',
      use: use(0, 0, 0, 0),
    });
  });
});

describe('what a model route does not forward', () => {
  it("refuses creating a batch or a fine-tuning job, each provider's way; reading one, and every call that answers, goes", () => {
    for (const [method, path] of [
      ['POST', '/v1/messages/batches'],
      ['POST', '/v1/batches?beta=true'],
      ['POST', '/v1beta/models/gemini-2.5-pro:batchGenerateContent'],
      ['POST', '/v1beta/models/text-embedding-004:asyncBatchEmbedContent'],
      ['POST', '/v1/fine_tuning/jobs'],
      ['POST', '/v1/fine-tunes'],
      ['POST', '/v1beta/tunedModels'],
    ])
      expect(uncountedSpend(method as string, path as string), path).toMatch(
        /is not forwarded: a (batch|fine-tuning job) spends/,
      );
    for (const [method, path] of [
      ['GET', '/v1/messages/batches/msgbatch_1/results'],
      ['POST', '/v1/messages'],
      ['POST', '/v1/messages/count_tokens'],
      ['POST', '/v1/responses'],
      ['POST', '/v1/chat/completions'],
      ['POST', '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse'],
      ['POST', '/v1beta/models/text-embedding-004:batchEmbedContents'],
    ])
      expect(uncountedSpend(method as string, path as string), path).toBeNull();
  });
});

describe("the proxy's meter", () => {
  const sse = (data: object) => `event: x\r\ndata: ${JSON.stringify(data)}\r\n\r\n`;
  const start = { type: 'message_start', message: { model: 'm', usage: { input_tokens: 100, output_tokens: 1 } } };
  const end = { type: 'message_delta', usage: { output_tokens: 40 } };

  /** The meter's tally once `chunks` have passed as one answer of `type`. */
  async function metered(type: string, chunks: (string | Buffer)[], cut = false) {
    const meter = new AnswerMeter();
    const body = new PassThrough();
    meter.watch(body, type);
    for (const c of chunks) body.write(c);
    if (cut) body.destroy();
    else body.end();
    await new Promise((r) => setImmediate(r));
    return meter.metered();
  }

  it('reads a stream whose lines are split across chunks, and counts each answer once', async () => {
    const text = sse(start) + sse(end);
    const split = [text.slice(0, 17), text.slice(17, 90), text.slice(90)];
    expect(await metered('text/event-stream; charset=utf-8', split)).toEqual({
      m: { ...use(100, 0, 0, 40), costUsd: null },
    });
  });

  it('counts what a stream cut short stated before the cut (its input), and a JSON body read whole', async () => {
    expect((await metered('text/event-stream', [sse(start)], true)).m?.input).toBe(100);
    const body = JSON.stringify({ model: 'j', usage: { prompt_tokens: 9, completion_tokens: 4 } });
    expect(await metered('application/json', [body.slice(0, 10), body.slice(10)])).toEqual({
      j: { ...use(9, 0, 0, 4), costUsd: null },
    });
  });

  it('counts a stream that states no use by its sizes: its request as input, the whole stream as output', async () => {
    const chunk = (content: string) => ({
      object: 'chat.completion.chunk',
      model: 'g',
      choices: [{ delta: { content } }],
    });
    const text = `${sse(chunk('Hello'))}${sse(chunk(' there'))}data: [DONE]\n\n`;
    const meter = new AnswerMeter();
    const body = new PassThrough();
    meter.watch(body, 'text/event-stream', () => 4001);
    body.end(text);
    await new Promise((r) => setImmediate(r));
    expect(meter.metered()).toEqual({ g: { ...use(1001, 0, 0, Math.ceil(text.length / 4)), costUsd: null } });
  });

  it('skips a stream line past its bound and reads the lines after it; reads no other content type', async () => {
    const long = `data: ${'x'.repeat(EGRESS_METER_MAX_BYTES)}\n`;
    const tally = await metered('text/event-stream', [sse(start), long.slice(0, 1000), long.slice(1000), sse(end)]);
    expect(tally.m?.output).toBe(40);
    expect(await metered('text/plain', [sse(start)])).toEqual({});
  });
});
