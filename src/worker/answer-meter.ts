// The model use the egress proxy (io/egress-proxy.ts) relays on its model routes, counted from the answers themselves
// (core/answer-usage.ts): a JSON body read whole, a stream (SSE) line by line as it passes. An answer
// cut short counts what it stated before the cut (the input of a stream is stated at its start). A
// stream that states no use at all (OpenAI's Chat Completions, unless asked to include it) is
// counted by its sizes (core/answer-usage.ts sizeEstimate).
import type { Readable } from 'node:stream';
import { type AnswerRead, NOTHING_READ, sizeEstimate, usedIn, withDoc } from '../core/answer-usage.js';
import { EGRESS_METER_MAX_BYTES } from '../core/bounds.js';
import { addUse, sumTallies, type Tally } from '../core/usage.js';

export class AnswerMeter {
  private readonly tally: Tally = {};

  /** Everything counted so far, by model. */
  metered(): Tally {
    return sumTallies(this.tally);
  }

  /** Reads one answer's plain body beside whoever consumes it; counted once it ends, however it ends. */
  watch(body: Readable, contentType: string | string[] | undefined, requestBytes: () => number = () => 0): void {
    const type = String(contentType ?? '').toLowerCase();
    const stream = type.includes('text/event-stream');
    if (!stream && !type.includes('json')) return;
    let read: AnswerRead = NOTHING_READ;
    let held: Buffer[] = [];
    let size = 0;
    let streamed = 0;
    let events = 0;
    // A stream's line past the bound is skipped to its end; a body past it is not read.
    let skipping = false;
    const line = (bytes: Buffer) => {
      const text = bytes.toString('utf8').trim();
      if (!text.startsWith('data:')) return;
      events++;
      read = withDoc(read, parsed(text.slice(5)));
    };
    body.on('data', (chunk: Buffer) => {
      if (!stream) {
        size += chunk.length;
        if (size > EGRESS_METER_MAX_BYTES) held = [];
        else held.push(chunk);
        return;
      }
      streamed += chunk.length;
      for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a)) {
        if (!skipping) line(Buffer.concat([...held, chunk.subarray(0, at)]));
        [held, size, skipping, chunk] = [[], 0, false, chunk.subarray(at + 1)];
      }
      if (skipping) return;
      held.push(chunk);
      size += chunk.length;
      if (size > EGRESS_METER_MAX_BYTES) [held, size, skipping] = [[], 0, true];
    });
    let counted = false;
    const count = () => {
      if (counted) return;
      counted = true;
      if (stream && !skipping) line(Buffer.concat(held));
      if (!stream && size <= EGRESS_METER_MAX_BYTES) read = withDoc(read, parsed(Buffer.concat(held).toString('utf8')));
      const used = usedIn(read) ?? (stream && events > 0 ? sizeEstimate(read.model, requestBytes(), streamed) : null);
      if (used) addUse(this.tally, used.model, used.use);
    };
    body.on('end', count);
    body.on('close', count);
    body.on('error', count);
  }
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
