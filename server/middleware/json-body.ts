/**
 * JSON request bodies (decisions: 1 MB cap → 413; wrong content type or unparsable JSON → 400).
 * The size is enforced while reading, so an oversized body is never buffered whole.
 */
import { HttpError } from '../errors.ts';
import type { MuseumContext, MuseumMiddleware } from '../types.ts';
import { continueIfExpected } from './connections.ts';

export const JSON_BODY_LIMIT = 1024 * 1024;

export function jsonBody(options: { optional?: boolean; limit?: number } = {}): MuseumMiddleware {
  const limit = options.limit ?? JSON_BODY_LIMIT;
  return async function jsonBodyMiddleware(ctx, next) {
    const declared = Number(ctx.get('content-length') || 0);
    const hasBody = declared > 0 || ctx.get('transfer-encoding') !== '';
    if (!hasBody) {
      if (!options.optional) throw new HttpError(400, 'BAD_REQUEST', 'A JSON body is required');
      ctx.state.body = undefined;
      return next();
    }
    if (!ctx.is('application/json')) throw new HttpError(400, 'BAD_REQUEST', 'Content-Type must be application/json');
    if (declared > limit) throw new HttpError(413, 'PAYLOAD_TOO_LARGE', 'Request body exceeds 1 MB');
    continueIfExpected(ctx.res);
    const text = await readLimited(ctx, limit);
    if (options.optional && text.trim() === '') {
      ctx.state.body = undefined;
      return next();
    }
    try {
      ctx.state.body = JSON.parse(text);
    } catch {
      throw new HttpError(400, 'BAD_REQUEST', 'Request body is not valid JSON');
    }
    await next();
  };
}

async function readLimited(ctx: MuseumContext, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      // Stop reading; the connection is closed after the 413 so the client stops sending.
      ctx.set('Connection', 'close');
      throw new HttpError(413, 'PAYLOAD_TOO_LARGE', 'Request body exceeds 1 MB');
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

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
