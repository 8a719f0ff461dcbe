/**
 * JSON request bodies (decisions: 1 MB cap → 413, smaller per route, e.g. the presence ping's 1 KB;
 * wrong content type or unparsable JSON → 400). The size is enforced before and while reading, so an
 * oversized body is never buffered whole, nor parsed.
 */
import { HttpError } from '../errors.ts';
import type { MuseumContext, RouteStage } from '../types.ts';
import { continueIfExpected } from './connections.ts';

const JSON_BODY_LIMIT = 1024 * 1024;

export function jsonBody(options: { optional?: boolean; limit?: number } = {}): RouteStage {
  const limit = options.limit ?? JSON_BODY_LIMIT;
  const tooLarge = new HttpError(413, 'PAYLOAD_TOO_LARGE', `Request body exceeds ${sizeText(limit)}`);
  return async function jsonBodyStage(ctx) {
    const declared = Number(ctx.get('content-length') || 0);
    const hasBody = declared > 0 || ctx.get('transfer-encoding') !== '';
    if (!hasBody) {
      if (!options.optional) throw new HttpError(400, 'BAD_REQUEST', 'A JSON body is required');
      ctx.state.body = undefined;
      return;
    }
    if (!ctx.is('application/json')) throw new HttpError(400, 'BAD_REQUEST', 'Content-Type must be application/json');
    if (declared > limit) throw tooLarge;
    continueIfExpected(ctx.res);
    const text = await readLimited(ctx, limit, tooLarge);
    if (options.optional && text.trim() === '') {
      ctx.state.body = undefined;
      return;
    }
    try {
      ctx.state.body = JSON.parse(text);
    } catch {
      throw new HttpError(400, 'BAD_REQUEST', 'Request body is not valid JSON');
    }
  };
}

/**
 * The body as text, refused (413) as soon as it grows past `limit`. Not `for await`: leaving that
 * loop early destroys the request, and with it the socket, before the 413 is written.
 */
function readLimited(ctx: MuseumContext, limit: number, tooLarge: HttpError): Promise<string> {
  const req = ctx.req;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      // Stop reading; the 413 closes the connection lingeringly (errors.ts) while the client may still send.
      cleanup();
      req.pause();
      reject(tooLarge);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onClose = () => {
      if (!req.complete) onError(Object.assign(new Error('client closed the request'), { code: 'ECONNRESET' }));
    };
    const cleanup = () => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
    };
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

/** `1 MB`, `1 KB`, `300 bytes`: a limit as the 413 tells it. */
const sizeText = (bytes: number): string =>
  bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MB` : bytes % 1024 === 0 ? `${bytes / 1024} KB` : `${bytes} bytes`;

/** Deepest nesting of a parsed JSON value (iterative: a hostile body cannot exhaust the stack). */
export function depthOf(value: unknown, stopAt = Infinity): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (d > max) max = d;
    if (max > stopAt) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}
