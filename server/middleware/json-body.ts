/**
 * JSON request bodies (decisions: 1 MB cap → 413, smaller per route, e.g. the presence ping's 1 KB;
 * wrong content type or unparsable JSON → 400), read by raw-body under the route's cap: an oversized
 * body is refused on its announced length before `100 Continue`, or as soon as it grows past the cap
 * while read, never buffered whole, nor parsed.
 */
import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import { HttpError } from '../errors.ts';
import type { RouteStage } from '../types.ts';
import { continueIfExpected } from '../sockets/connections.ts';

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
    const text = await readRequestBody(ctx.req, limit, tooLarge);
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
 * The body as text, refused (413) once it grows past `limit`: raw-body then pauses the request without
 * destroying it, so the 413 is still written. A client gone mid-body reads as ECONNRESET (logged as leaving, 499).
 */
async function readRequestBody(req: IncomingMessage, limit: number, tooLarge: HttpError): Promise<string> {
  try {
    return (await getRawBody(req, { limit })).toString('utf8');
  } catch (err) {
    const type = (err as { type?: unknown } | null)?.type;
    if (type === 'entity.too.large') throw tooLarge;
    if (type === 'request.aborted') throw Object.assign(new Error('client closed the request'), { code: 'ECONNRESET' });
    throw err;
  }
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
