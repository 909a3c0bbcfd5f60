// The OpenAI Responses API as Codex CLI speaks it: POST <base>/responses with `stream: true`,
// answered with server-sent events. Each event's data is a JSON object whose `type` repeats the
// event name: response.created, response.output_item.done (one per output item: a
// `function_call` {call_id, name, arguments (a JSON string)} or an assistant `message` with
// `output_text` content), then response.completed {response: {id, usage: {input_tokens,
// input_tokens_details: {cached_tokens}, output_tokens, output_tokens_details:
// {reasoning_tokens}, total_tokens}}}. Codex needs no more than these (its reader:
// codex-rs/codex-api/src/sse/responses.rs in openai/codex; the OpenAI API reference
// "Streaming events" for the Responses API). Codex 0.171.0 offers the model an `exec_command`
// tool {cmd, workdir, yield_time_ms, ...} (seen in its requests) and sends back a
// `function_call_output` {call_id, output} input item.
import type { ServerResponse } from 'node:http';
import { type Handler, type MockModelServer, type RecordedRequest, sendEvents } from './server.js';

export interface ResponsesUsage {
  input: number;
  output: number;
  cached?: number;
}

/** What the scripted model answers to one request. */
export type ResponsesReply =
  | { command: string; usage: ResponsesUsage; text?: undefined }
  | { text: string; usage: ResponsesUsage; command?: undefined };

/** Decides the answer from the request and how many /responses requests came before it (0-based). */
export type ResponsesScript = (body: any, index: number) => ResponsesReply;

export interface ResponsesMock {
  handler: Handler;
  /** Each answer given, in order, with the request's index. */
  replies: { index: number; reply: ResponsesReply }[];
}

export function openAIResponses(script: ResponsesScript): ResponsesMock {
  const replies: ResponsesMock['replies'] = [];
  let count = 0;
  const handler: Handler = (req: RecordedRequest, res: ServerResponse, _server: MockModelServer) => {
    if (req.method !== 'POST' || !req.path.endsWith('/responses')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not found' }));
      return;
    }
    const index = count++;
    const reply = script(req.body, index);
    replies.push({ index, reply });
    const id = `resp_${index}`;
    const item =
      reply.command !== undefined
        ? {
            type: 'function_call',
            id: `fc_${index}`,
            call_id: `call_${index}`,
            name: 'exec_command',
            // A long yield: Codex would otherwise hand back a running command after 10 s. No
            // login shell: a profile's start-up work (pyenv, nvm) is not what the tests measure.
            arguments: JSON.stringify({ cmd: reply.command, yield_time_ms: 30_000, login: false }),
          }
        : {
            type: 'message',
            id: `msg_${index}`,
            role: 'assistant',
            content: [{ type: 'output_text', text: reply.text, annotations: [] }],
          };
    const u = reply.usage;
    const event = (data: Record<string, unknown>) => ({ event: data.type as string, data });
    sendEvents(res, [
      event({ type: 'response.created', response: { id, status: 'in_progress' } }),
      event({ type: 'response.output_item.added', output_index: 0, item }),
      event({ type: 'response.output_item.done', output_index: 0, item }),
      event({
        type: 'response.completed',
        response: {
          id,
          status: 'completed',
          usage: {
            input_tokens: u.input,
            input_tokens_details: { cached_tokens: u.cached ?? 0 },
            output_tokens: u.output,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: u.input + u.output,
          },
        },
      }),
    ]);
  };
  return { handler, replies };
}

/**
 * A coding "model": asked by the user, it runs `command` (write a file, run the grader); shown
 * the command's output, it ends the turn with `text`. `usage(index)` gives each answer's figures.
 */
export function codingModel(o: {
  command: string;
  text: string;
  usage: (index: number) => ResponsesUsage;
}): ResponsesScript {
  return (body, index) =>
    lastInput(body)?.type === 'message'
      ? { command: o.command, usage: o.usage(index) }
      : { text: o.text, usage: o.usage(index) };
}

/** A model that answers at once, without running anything. */
export function chattyModel(o: { text: string; usage: (index: number) => ResponsesUsage }): ResponsesScript {
  return (_body, index) => ({ text: o.text, usage: o.usage(index) });
}

/** A model that never ends its turn: one command after another. */
export function busyModel(o: { command: string; usage: (index: number) => ResponsesUsage }): ResponsesScript {
  return (_body, index) => ({ command: o.command, usage: o.usage(index) });
}

// What a request carried: the conversation Codex sent.

export function lastInput(body: any): any {
  return Array.isArray(body?.input) ? body.input.at(-1) : undefined;
}

/** The texts of the user messages in a request's input, in order. */
export function userTexts(body: any): string[] {
  const items: any[] = Array.isArray(body?.input) ? body.input : [];
  return items
    .filter((i) => i.type === 'message' && i.role === 'user')
    .map((i) => (Array.isArray(i.content) ? i.content.map((c: any) => c.text ?? '').join('') : String(i.content)));
}

/** The outputs of the tool calls in a request's input, in order. */
export function toolOutputs(body: any): string[] {
  const items: any[] = Array.isArray(body?.input) ? body.input : [];
  return items
    .filter((i) => i.type === 'function_call_output')
    .map((i) => (typeof i.output === 'string' ? i.output : JSON.stringify(i.output)));
}

/** The /responses requests among those a server recorded. */
export function responsesRequests(server: MockModelServer): RecordedRequest[] {
  return server.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/responses'));
}
