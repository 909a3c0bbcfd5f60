// The Gemini API (generativelanguage v1beta) as Gemini CLI calls it through the @google/genai SDK
// when GOOGLE_GEMINI_BASE_URL points here, on top of MockModelServer.
//
// Wire format (Gemini API reference, https://ai.google.dev/api: "models.generateContent",
// "models.streamGenerateContent", "GenerateContentResponse"; seen from Gemini CLI 0.61.0):
// - the agent loop streams: POST /v1beta/models/<model>:streamGenerateContent?alt=sse with a body
//   {contents: [{role: "user" | "model", parts: [{text} | {functionCall} | {functionResponse}]}],
//   systemInstruction, tools, generationConfig} and the x-goog-api-key header; the answer is
//   server-sent events, each `data: <GenerateContentResponse JSON>`: {candidates: [{content: {role:
//   "model", parts: [{text} | {functionCall: {name, args}}]}, finishReason, index}], usageMetadata:
//   {promptTokenCount, candidatesTokenCount, thoughtsTokenCount?, totalTokenCount}, modelVersion};
// - the CLI's helpers (the model router when the model is "auto", loop and next-speaker checks)
//   call POST /v1beta/models/<model>:generateContent and expect one GenerateContentResponse,
//   usually JSON text matching `generationConfig.responseJsonSchema`;
// - POST ...:countTokens answers {totalTokens}.
// The script sees only the agent loop's streamed requests; helper calls get a neutral answer.
import type { ServerResponse } from 'node:http';
import { type Handler, MockModelServer, type RecordedRequest, sendEvents } from './server.js';

export interface GeminiPart {
  text?: string;
  thought?: boolean;
  functionCall?: { id?: string; name: string; args: Record<string, unknown> };
  functionResponse?: { id?: string; name: string; response: Record<string, unknown> };
}

export interface GeminiContent {
  role: 'user' | 'model';
  parts: GeminiPart[];
}

export interface GenerateContentBody {
  contents: GeminiContent[];
  systemInstruction?: { parts: GeminiPart[] };
  tools?: { functionDeclarations?: { name: string }[] }[];
  generationConfig?: { responseMimeType?: string; responseJsonSchema?: unknown; responseSchema?: unknown };
}

/** What the scripted model answers to one streamed request. */
export interface GeminiReply {
  text?: string;
  functionCalls?: { name: string; args: Record<string, unknown> }[];
  /** Usage figures reported for this call. */
  usage?: { promptTokenCount: number; candidatesTokenCount: number; thoughtsTokenCount?: number };
  /** Answer with this HTTP status and a Google-style error body instead. */
  status?: number;
  /** Hold this request (and every later one) without an answer. */
  hang?: boolean;
}

/** Decides the answer from the request and how many streamed requests came before it (0-based). */
export type GeminiScript = (body: GenerateContentBody, index: number, server: MockModelServer) => GeminiReply;

export const DEFAULT_USAGE = { promptTokenCount: 1000, candidatesTokenCount: 100 };

/** A mock Gemini API that answers the agent loop from a script. */
export function geminiServer(script: GeminiScript): MockModelServer {
  return new MockModelServer(geminiHandler(script));
}

/** The Gemini API's handler: the agent loop answered from a script, helper calls neutrally. */
export function geminiHandler(script: GeminiScript): Handler {
  let index = 0;
  return (req, res, server) => {
    const m = /^\/v1(?:beta|alpha)?\/models\/([^/:?]+):([A-Za-z]+)/.exec(req.path);
    const method = m?.[2];
    if (req.method !== 'POST' || !m) {
      error(res, 404, `no route ${req.method} ${req.path}`);
      return;
    }
    const body = req.body as GenerateContentBody;
    if (method === 'countTokens') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ totalTokens: 1000 }));
      return;
    }
    if (method === 'generateContent') {
      // A helper call: a JSON answer for the schema it asks for, else a short text.
      const schema = body.generationConfig?.responseJsonSchema ?? body.generationConfig?.responseSchema;
      const text = schema ? JSON.stringify(fill(schema)) : 'ok';
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify(response(m[1] as string, { text }, { promptTokenCount: 10, candidatesTokenCount: 5 })));
      return;
    }
    if (method !== 'streamGenerateContent') {
      error(res, 404, `no method ${method}`);
      return;
    }
    const reply = script(body, index++, server);
    if (reply.hang) {
      server.hang = true;
      return;
    }
    if (reply.status !== undefined) {
      error(res, reply.status, `mock error ${reply.status}`);
      return;
    }
    const usage = reply.usage ?? DEFAULT_USAGE;
    const model = m[1] as string;
    const events: { data: unknown }[] = [];
    // Text first (in two chunks, as a stream would), then the calls; usage on the last chunk.
    if (reply.text) {
      const half = Math.ceil(reply.text.length / 2);
      events.push({ data: response(model, { text: reply.text.slice(0, half) }) });
      if (reply.text.length > half) events.push({ data: response(model, { text: reply.text.slice(half) }) });
    }
    const calls = (reply.functionCalls ?? []).map((c) => ({ functionCall: { name: c.name, args: c.args } }));
    events.push({ data: response(model, calls.length > 0 ? calls : { text: '' }, usage, 'STOP') });
    sendEvents(res, events);
  };
}

/** An agent-loop model call (streamed; the CLI's helper calls are not). */
export function isStreamCall(req: RecordedRequest): boolean {
  return req.method === 'POST' && req.path.includes(':streamGenerateContent');
}

function response(
  model: string,
  parts: GeminiPart | GeminiPart[],
  usage?: GeminiReply['usage'],
  finishReason?: string,
): Record<string, unknown> {
  return {
    candidates: [
      {
        content: { role: 'model', parts: Array.isArray(parts) ? parts : [parts] },
        ...(finishReason ? { finishReason } : {}),
        index: 0,
      },
    ],
    ...(usage
      ? {
          usageMetadata: {
            ...usage,
            totalTokenCount: usage.promptTokenCount + usage.candidatesTokenCount + (usage.thoughtsTokenCount ?? 0),
          },
        }
      : {}),
    modelVersion: model,
  };
}

function error(res: ServerResponse, status: number, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ error: { code: status, message, status: status === 404 ? 'NOT_FOUND' : 'INTERNAL' } }));
}

/** A value of a JSON schema's shape: required properties filled with plain values. */
function fill(schema: unknown): unknown {
  const s = (schema ?? {}) as {
    type?: string;
    properties?: Record<string, unknown>;
    enum?: unknown[];
    items?: unknown;
  };
  const type = (s.type ?? '').toLowerCase();
  if (s.enum && s.enum.length > 0) return s.enum[0];
  if (type === 'object' || s.properties) {
    return Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, fill(v)]));
  }
  if (type === 'array') return [];
  if (type === 'integer' || type === 'number') return 10;
  if (type === 'boolean') return false;
  return 'scripted';
}

/** The text of a content's parts. */
export function contentText(c: GeminiContent): string {
  return c.parts.map((p) => p.text ?? '').join('');
}

/** Function calls since the last plain user prompt: how far the model is into the current turn. */
export function callRoundsSincePrompt(body: GenerateContentBody): number {
  let rounds = 0;
  for (let i = body.contents.length - 1; i >= 0; i--) {
    const c = body.contents[i] as GeminiContent;
    if (c.role === 'user' && c.parts.some((p) => p.text !== undefined && !p.functionResponse)) break;
    if (c.role === 'model' && c.parts.some((p) => p.functionCall)) rounds++;
  }
  return rounds;
}

/** The agent loop's requests the server received (helper calls and other paths left out). */
export function streamRequests(server: MockModelServer): (RecordedRequest & { body: GenerateContentBody })[] {
  return server.requests.filter((r) => r.path.includes(':streamGenerateContent')) as (RecordedRequest & {
    body: GenerateContentBody;
  })[];
}
