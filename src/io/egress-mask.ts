// The model's key masked in what an upstream answers (egress-proxy.ts routes): a header value, and
// a body as it streams, same length, so that a key the upstream echoes never reaches the agent.
import { Transform, type TransformCallback } from 'node:stream';

/** The key in a header value, masked. */
export function maskHeader(v: string | string[], secrets: Buffer[]): string | string[] {
  const mask = (s: string) => secrets.reduce((t, k) => t.replaceAll(k.toString(), '*'.repeat(k.length)), s);
  return Array.isArray(v) ? v.map(mask) : mask(v);
}

/**
 * Masks the secrets in a stream, same length (a Content-Length stays true), holding back only the
 * end of a chunk that could be the start of one (a model's streamed answer is not held up).
 */
export class Mask extends Transform {
  private held = Buffer.alloc(0);
  constructor(private readonly secrets: Buffer[]) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const data = Buffer.concat([this.held, chunk]);
    for (const s of this.secrets)
      for (let i = data.indexOf(s); i !== -1; i = data.indexOf(s, i)) data.fill(0x2a, i, i + s.length);
    let hold = 0;
    for (const s of this.secrets)
      for (let n = Math.min(s.length - 1, data.length); n > hold; n--)
        if (data.subarray(data.length - n).equals(s.subarray(0, n))) {
          hold = n;
          break;
        }
    this.held = Buffer.from(data.subarray(data.length - hold));
    done(null, data.subarray(0, data.length - hold));
  }
  override _flush(done: TransformCallback): void {
    done(null, this.held);
  }
}
