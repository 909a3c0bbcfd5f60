// The Anthropic Messages API as Claude Code uses it: `POST /v1/messages?beta=true` with
// `"stream": true`, answered with server-sent events (message_start, content_block_start,
// content_block_delta with text_delta or input_json_delta, content_block_stop, message_delta with
// the stop reason and output tokens, message_stop), per
// https://docs.anthropic.com/en/api/messages-streaming. The scripted "model" answers each call with
// a step (a tool call or text); which step a request is at comes from the request itself (the
// assistant messages after its last prompt), so retries and resumed conversations get the right
// answer. Every response reports the script's `usage`.
import { type Handler, type RecordedRequest, sendEvents } from './server.js';

export type AnthropicStep =
  | { tool: 'Write'; file_path: string; content: string }
  | { tool: 'Bash'; command: string }
  | { text: string };

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

/** What the scripted model answers to one call: a step (a tool call or text) and its usage. */
export interface AnthropicReply {
  step: AnthropicStep;
  usage: AnthropicUsage;
}

/**
 * Decides the answer from the request and `step`: the number of assistant messages after the
 * request's last prompt (a user message without tool results), so resumes get the right answer.
 */
export type AnthropicScript = (req: RecordedRequest, step: number) => AnthropicReply | Promise<AnthropicReply>;

/** A Messages API that answers from a script (count_tokens answered, other paths 404). */
export function anthropicMessages(script: AnthropicScript): Handler {
  return async (req, res) => {
    if (req.path.includes('count_tokens')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ input_tokens: 1 }));
      return;
    }
    if (!isMessagesCall(req)) {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: `no ${req.path} here` } }));
      return;
    }
    const messages = Array.isArray(req.body?.messages) ? (req.body.messages as Message[]) : [];
    const { step, usage: u } = await script(req, stepIndex(messages));
    const n = Math.random().toString(36).slice(2, 10);
    const block =
      'text' in step
        ? { start: { type: 'text', text: '' }, delta: { type: 'text_delta', text: step.text } }
        : {
            start: { type: 'tool_use', id: `toolu_mock_${n}`, name: step.tool, input: {} },
            delta: {
              type: 'input_json_delta',
              partial_json: JSON.stringify(
                step.tool === 'Write'
                  ? { file_path: step.file_path, content: step.content }
                  : { command: step.command, description: 'Run a command' },
              ),
            },
          };
    sendEvents(res, [
      {
        event: 'message_start',
        data: {
          type: 'message_start',
          message: {
            id: `msg_mock_${n}`,
            type: 'message',
            role: 'assistant',
            model: req.body?.model ?? 'claude-mock',
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: {
              input_tokens: u.input_tokens,
              cache_read_input_tokens: u.cache_read_input_tokens ?? 0,
              cache_creation_input_tokens: u.cache_creation_input_tokens ?? 0,
              output_tokens: 1,
            },
          },
        },
      },
      { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: block.start } },
      { event: 'ping', data: { type: 'ping' } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: block.delta } },
      { event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } },
      {
        event: 'message_delta',
        data: {
          type: 'message_delta',
          delta: { stop_reason: 'text' in step ? 'end_turn' : 'tool_use', stop_sequence: null },
          usage: { output_tokens: u.output_tokens },
        },
      },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ]);
  };
}

/** A model call: POST /v1/messages (not its token counting). */
export function isMessagesCall(req: RecordedRequest): boolean {
  return req.method === 'POST' && req.path.startsWith('/v1/messages') && !req.path.includes('count_tokens');
}

/** An Anthropic API error body. */
export function anthropicError(status: number, message: string): unknown {
  return { type: 'error', error: { type: status === 401 ? 'authentication_error' : 'invalid_request_error', message } };
}

interface Message {
  role: string;
  content: string | { type: string; text?: string; content?: unknown }[];
}

/** The number of assistant messages after the last user prompt (a user message without tool results). */
function stepIndex(messages: Message[]): number {
  let last = -1;
  messages.forEach((m, i) => {
    if (m.role !== 'user') return;
    if (typeof m.content === 'string' || !m.content.some((b) => b.type === 'tool_result')) last = i;
  });
  return messages.slice(last + 1).filter((m) => m.role === 'assistant').length;
}

/** Everything a request sent as conversation (messages and system prompt), as one string to search. */
export function conversationText(req: RecordedRequest): string {
  return JSON.stringify([req.body?.system ?? null, req.body?.messages ?? null]);
}

/** The texts of the user messages of a request (tool results excluded), in order. */
export function userTexts(req: RecordedRequest): string[] {
  const out: string[] = [];
  for (const m of (req.body?.messages ?? []) as Message[]) {
    if (m.role !== 'user') continue;
    if (typeof m.content === 'string') out.push(m.content);
    else for (const b of m.content) if (b.type === 'text' && typeof b.text === 'string') out.push(b.text);
  }
  return out;
}

/** The tool results a request carries, as text. */
export function toolResults(req: RecordedRequest): string[] {
  const out: string[] = [];
  for (const m of (req.body?.messages ?? []) as Message[]) {
    if (m.role !== 'user' || typeof m.content === 'string') continue;
    for (const b of m.content) if (b.type === 'tool_result') out.push(JSON.stringify(b.content));
  }
  return out;
}
