// The model's key masked in what an upstream answers (egress-proxy.ts routes): a header value, and
// a body as it streams, same length, so that a key the upstream echoes never reaches the agent.
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { pipeline, type Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline as pipelineAsync } from 'node:stream/promises';
import { constants, createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';

type Headers = Record<string, string | string[]>;

/**
 * An upstream's answer as the agent may see it: its headers and body with the secrets masked, a
 * compressed body decoded first (the mask reads plain bytes, and an upstream may compress though it
 * was asked not to); or why it cannot be relayed: an encoding that cannot be searched for the key.
 */
export function masked(
  body: Readable,
  headers: Headers,
  secrets: Buffer[],
  transfer: string | undefined,
): { headers: Headers; body: Readable } | { problem: string } {
  // Codings of the transfer (Node takes off only `chunked`) are the outer ones, then the content's.
  const outer = decoders(transfer?.replace(/\bchunked\b/gi, ''));
  const inner = decoders(headers['content-encoding']);
  const decode = outer && inner ? [...outer, ...inner] : null;
  if (!decode) {
    const encoding = maskHeader(`${transfer ?? ''} ${headers['content-encoding'] ?? ''}`.trim(), secrets);
    return {
      problem: `the upstream's answer is in an encoding that cannot be searched for the model's key (${encoding})`,
    };
  }
  const out: Headers = {};
  // A decoded body has neither its encoding nor its length; a header named with a secret goes.
  const named = secrets.map((s) => s.toString().toLowerCase());
  for (const [k, v] of Object.entries(headers))
    if ((decode.length === 0 || !/^content-(encoding|length)$/.test(k)) && !named.some((s) => k.includes(s)))
      out[k] = maskHeader(v, secrets);
  const mask = new Mask(secrets);
  pipeline([body, ...decode, mask], () => {});
  return { headers: out, body: mask };
}

/**
 * What turns an answer's body into plain bytes, in order, by its Content-Encoding; null when an
 * encoding is one forkflush cannot decode. Lenient at a cut end, as browsers and undici are (a
 * stream the upstream ended early is not an error).
 */
function decoders(encoding: string | string[] | undefined): Transform[] | null {
  const names = [encoding ?? '']
    .flat()
    .join(',')
    .split(',')
    .map((s) => s.trim().toLowerCase());
  const out: Transform[] = [];
  for (const name of names.filter((n) => n !== '' && n !== 'identity').reverse()) {
    if (name === 'gzip' || name === 'x-gzip') out.push(createGunzip({ finishFlush: constants.Z_SYNC_FLUSH }));
    else if (name === 'deflate') out.push(createInflate({ finishFlush: constants.Z_SYNC_FLUSH }));
    else if (name === 'br') out.push(createBrotliDecompress({ finishFlush: constants.BROTLI_OPERATION_FLUSH }));
    else return null;
  }
  return out;
}

/** The secrets in a file, masked in place (streamed through the mask, same length); a file that cannot be read stays as it is. */
export async function maskFile(path: string, secrets: string[]): Promise<void> {
  const tmp = `${path}.masked`;
  const masked = await pipelineAsync(
    createReadStream(path),
    new Mask(secrets.map((s) => Buffer.from(s))),
    createWriteStream(tmp),
  )
    .then(() => true)
    .catch(() => false);
  if (masked) await rename(tmp, path);
  else await rm(tmp, { force: true });
}

/** The secrets in a text, masked (same length). */
export function maskText(text: string, secrets: string[]): string {
  return secrets.reduce((t, k) => t.replaceAll(k, '*'.repeat(k.length)), text);
}

/** The key in a header value, masked. */
export function maskHeader(v: string | string[], secrets: Buffer[]): string | string[] {
  const keys = secrets.map((k) => k.toString());
  return Array.isArray(v) ? v.map((s) => maskText(s, keys)) : maskText(v, keys);
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
