// The scripted mock model server the agent CLIs talk to in test:agents: an HTTP server on
// 127.0.0.1 (port 0) that records every request and hands it to a vendor handler (one file per
// vendor API in this folder). Handlers answer from a script the test gives, so a test controls
// the tool calls the "model" makes, its final text and the usage figures it reports.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export type Handler = (req: RecordedRequest, res: ServerResponse, server: MockModelServer) => void | Promise<void>;

export class MockModelServer {
  readonly requests: RecordedRequest[] = [];
  private server: Server | null = null;
  /** While true, requests are held open without an answer (to test deadlines). */
  hang = false;
  /** The hosts asked for with CONNECT (the server doubles as an HTTPS proxy that lets nothing through). */
  readonly connects: string[] = [];
  /** Requests this says yes to are held open without an answer (a model that hangs part way). */
  holdIf: ((req: RecordedRequest) => boolean) | null = null;

  constructor(private readonly handler: Handler) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      let text = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => {
        text += d;
      });
      req.on('end', async () => {
        let body: unknown = text;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {}
        const recorded: RecordedRequest = {
          method: req.method ?? 'GET',
          path: req.url ?? '/',
          headers: req.headers,
          body,
        };
        this.requests.push(recorded);
        if (this.hang || this.holdIf?.(recorded)) return;
        try {
          await this.handler(recorded, res, this);
        } catch (e) {
          res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(e) }));
        }
      });
    });
    this.server.on('connect', (req, socket) => {
      this.connects.push(req.url ?? '');
      socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    const s = this.server;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}

/** Writes a server-sent-events stream: one `event:`/`data:` pair per item. */
export function sendEvents(res: ServerResponse, events: { event?: string; data: unknown }[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  for (const e of events) {
    if (e.event) res.write(`event: ${e.event}\n`);
    res.write(`data: ${typeof e.data === 'string' ? e.data : JSON.stringify(e.data)}\n\n`);
  }
  res.end();
}
