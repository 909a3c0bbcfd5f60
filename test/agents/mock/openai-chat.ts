// The OpenAI Chat Completions API (POST <base>/chat/completions), streaming or not, on top of
// MockModelServer: the API Copilot CLI speaks in bring-your-own-key mode
// (COPILOT_PROVIDER_BASE_URL, provider type "openai", wire API "completions": `copilot help
// providers`) and the one aider reaches through litellm (OPENAI_API_BASE with an `openai/<model>`
// name: aider/website/docs/llms/openai-compat.md in Aider-AI/aider).
//
// Wire format (OpenAI API reference, "Create chat completion" and "The chat completion chunk
// object"): with `stream: true` the answer is server-sent events, each `data: <chunk JSON>`, where a
// chunk is {id, object: "chat.completion.chunk", created, model, choices: [{index, delta,
// finish_reason}]}; text comes in `delta.content`, tool calls in `delta.tool_calls[{index, id, type:
// "function", function: {name, arguments}}]` with finish_reason "tool_calls"; with
// `stream_options.include_usage` a last chunk has `choices: []` and `usage: {prompt_tokens,
// completion_tokens, total_tokens}`; the stream ends with `data: [DONE]`. Without streaming the
// answer is one {object: "chat.completion", choices: [{index, message, finish_reason}], usage}.
import type { ServerResponse } from 'node:http';
import { type Handler, MockModelServer, type RecordedRequest, sendEvents } from './server.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | 'developer';
  content?: string | { type: string; text?: string }[] | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

export interface ChatRequestBody {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  tools?: { type: 'function'; function: { name: string; parameters?: unknown } }[];
}

/** What the scripted model answers to one request. */
export interface ChatReply {
  /** Final text (may come together with tool calls). */
  text?: string;
  toolCalls?: { name: string; arguments: Record<string, unknown> }[];
  /** Usage figures reported for this call. */
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Answer with this HTTP status and an OpenAI-style error body instead. */
  status?: number;
  /** Hold this request (and every later one) without an answer. */
  hang?: boolean;
}

/** Decides the answer from the request and how many chat requests came before it (0-based). */
export type ChatScript = (body: ChatRequestBody, index: number, server: MockModelServer) => ChatReply;

export const DEFAULT_USAGE = { prompt_tokens: 1000, completion_tokens: 100 };

/** A mock model server that answers chat completions from a script. */
export function openAIChatServer(script: ChatScript): MockModelServer {
  return new MockModelServer(chatCompletionsHandler(script));
}

/** A chat completions API that answers from a script (other paths 404). */
export function chatCompletionsHandler(script: ChatScript): Handler {
  let index = 0;
  return (req, res, server) => {
    if (!isChatCall(req)) {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(
          JSON.stringify({ error: { message: `no route ${req.method} ${req.path}`, type: 'invalid_request_error' } }),
        );
      return;
    }
    const body = req.body as ChatRequestBody;
    const reply = script(body, index++, server);
    if (reply.hang) {
      server.hang = true;
      return;
    }
    answer(res, body, reply);
  };
}

/** A model call: POST …/chat/completions. */
export function isChatCall(req: RecordedRequest): boolean {
  return req.method === 'POST' && req.path.replace(/\?.*$/, '').endsWith('/chat/completions');
}

function answer(res: ServerResponse, body: ChatRequestBody, reply: ChatReply): void {
  if (reply.status !== undefined) {
    res
      .writeHead(reply.status, { 'content-type': 'application/json' })
      .end(
        JSON.stringify({ error: { message: `mock error ${reply.status}`, type: 'invalid_request_error', code: null } }),
      );
    return;
  }
  const usage = reply.usage ?? DEFAULT_USAGE;
  const fullUsage = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
  const calls = (reply.toolCalls ?? []).map((c, i) => ({
    index: i,
    id: `call_${Math.random().toString(36).slice(2, 10)}`,
    type: 'function' as const,
    function: { name: c.name, arguments: JSON.stringify(c.arguments) },
  }));
  const finish = calls.length > 0 ? 'tool_calls' : 'stop';
  const id = `chatcmpl-${Math.random().toString(36).slice(2, 10)}`;
  const created = Math.floor(Date.now() / 1000);
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id,
        object: 'chat.completion',
        created,
        model: body.model,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: reply.text ?? null,
              ...(calls.length > 0 ? { tool_calls: calls.map(({ index: _, ...c }) => c) } : {}),
            },
            finish_reason: finish,
          },
        ],
        usage: fullUsage,
      }),
    );
    return;
  }
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    data: { id, object: 'chat.completion.chunk', created, model: body.model, choices, ...extra },
  });
  const events = [chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])];
  if (reply.text) events.push(chunk([{ index: 0, delta: { content: reply.text }, finish_reason: null }]));
  if (calls.length > 0) events.push(chunk([{ index: 0, delta: { tool_calls: calls }, finish_reason: null }]));
  events.push(chunk([{ index: 0, delta: {}, finish_reason: finish }]));
  events.push(chunk([], { usage: fullUsage }));
  sendEvents(res, [...events, { data: '[DONE]' }]);
}

/** The text of a message, whether its content is a string or a list of parts. */
export function messageText(m: ChatMessage): string {
  if (typeof m.content === 'string') return m.content;
  if (Array.isArray(m.content)) return m.content.map((p) => p.text ?? '').join('');
  return '';
}

/** Tool results since the last user message: how far the model is into the current turn. */
export function toolRoundsSinceUser(body: ChatRequestBody): number {
  let rounds = 0;
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const m = body.messages[i] as ChatMessage;
    if (m.role === 'user') break;
    if (m.role === 'assistant' && m.tool_calls?.length) rounds++;
  }
  return rounds;
}

/** The chat completion requests the server received (other paths left out). */
export function chatRequests(server: MockModelServer): (RecordedRequest & { body: ChatRequestBody })[] {
  return server.requests.filter((r) => r.path.includes('/chat/completions')) as (RecordedRequest & {
    body: ChatRequestBody;
  })[];
}
