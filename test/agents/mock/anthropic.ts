// The Anthropic Messages API as Claude Code uses it: `POST /v1/messages?beta=true` with
// `"stream": true`, answered with server-sent events (message_start, content_block_start,
// content_block_delta with text_delta or input_json_delta, content_block_stop, message_delta with
// the stop reason and output tokens, message_stop), per
// https://docs.anthropic.com/en/api/messages-streaming. The scripted "model" answers a user prompt
// with `steps` in order (a tool call or text each), then with `finalText`; which step a request is
// at comes from the request itself (the assistant messages after its last prompt), so retries and
// resumed conversations get the right answer. Every response reports `usage`.
import type { ServerResponse } from 'node:http';
import { MockModelServer, type RecordedRequest, sendEvents } from './server.js';

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

export class AnthropicMockServer extends MockModelServer {
  steps: AnthropicStep[] = [];
  finalText = 'Done.';
  usage: AnthropicUsage = { input_tokens: 1000, output_tokens: 50 };
  /** Milliseconds to wait before answering a request that is not a prompt's first. */
  laterDelayMs = 0;
  /** When set, model calls get this API error instead of an answer. */
  failWith: { status: number; type: string; message: string } | null = null;

  constructor() {
    super((req, res, server) => (server as AnthropicMockServer).answer(req, res));
  }

  /** The model calls received (Messages API requests), in order. */
  calls(): RecordedRequest[] {
    return this.requests.filter((r) => r.path.startsWith('/v1/messages') && !r.path.includes('count_tokens'));
  }

  /** Tokens one model call reports: all input (cached included) and output. */
  tokensPerCall(): { input: number; output: number } {
    const u = this.usage;
    return {
      input: u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0),
      output: u.output_tokens,
    };
  }

  private async answer(req: RecordedRequest, res: ServerResponse): Promise<void> {
    if (req.path.includes('count_tokens')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ input_tokens: 1 }));
      return;
    }
    if (req.method !== 'POST' || !req.path.startsWith('/v1/messages')) {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: `no ${req.path} here` } }));
      return;
    }
    if (this.failWith) {
      const f = this.failWith;
      res
        .writeHead(f.status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ type: 'error', error: { type: f.type, message: f.message } }));
      return;
    }
    const messages = Array.isArray(req.body?.messages) ? (req.body.messages as Message[]) : [];
    const index = stepIndex(messages);
    if (index > 0 && this.laterDelayMs > 0) await new Promise((r) => setTimeout(r, this.laterDelayMs));
    const step: AnthropicStep = this.steps[index] ?? { text: this.finalText };
    const id = `msg_mock_${this.requests.length}`;
    const block =
      'text' in step
        ? { start: { type: 'text', text: '' }, delta: { type: 'text_delta', text: step.text } }
        : {
            start: { type: 'tool_use', id: `toolu_mock_${this.requests.length}`, name: step.tool, input: {} },
            delta: {
              type: 'input_json_delta',
              partial_json: JSON.stringify(
                step.tool === 'Write'
                  ? { file_path: step.file_path, content: step.content }
                  : { command: step.command, description: 'Run a command' },
              ),
            },
          };
    const u = this.usage;
    sendEvents(res, [
      {
        event: 'message_start',
        data: {
          type: 'message_start',
          message: {
            id,
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
  }
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
