/**
 * The raw twin of the outer middleware, for answers written without Koa (the fast path): request id
 * (request-id.ts), CORS (cors.ts), the error envelope (errors.ts) and the access line (access-log.ts),
 * each built by the same function its middleware uses, so both stacks answer alike by construction.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline, type Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { Headers } from '../types.ts';
import { logAccess } from './access-log.ts';
import { CORS_LIST } from './cors.ts';
import { errorAnswer, httpErrorOf } from './errors.ts';
import { REQUEST_ID_HEADER, requestIdOf } from './request-id.ts';
import { startedAt } from '../request-metrics.ts';

/** Response headers as a flat `[name, value, …]` list: node writes those without copying them. */
export type HeaderList = readonly string[];

const withCorsCache = new WeakMap<Headers, HeaderList>();
/**
 * A header set after the CORS headers as one flat list, built once per (precomputed, shared) set.
 * Per-request object spreads are avoided on purpose: V8 makes them microseconds slow.
 */
export function withCors(headers: Headers): HeaderList {
  let list = withCorsCache.get(headers);
  if (!list) {
    list = [...CORS_LIST, ...Object.entries(headers).flat()];
    withCorsCache.set(headers, list);
  }
  return list;
}

export class RawExchange {
  readonly requestId: string;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    private readonly log: Logger,
  ) {
    this.requestId = requestIdOf(req.headers['x-request-id']);
  }

  /**
   * `headers` must start with the CORS headers (see withCors), `more` (optional) follows them; the
   * request id goes first. One list is built per answer: a hot path pays for no other copy.
   */
  send(status: number, headers: HeaderList, body: Buffer | Readable | null, more?: HeaderList): void {
    const list = new Array<string>(2 + headers.length + (more?.length ?? 0));
    list[0] = REQUEST_ID_HEADER;
    list[1] = this.requestId;
    let at = 2;
    for (let i = 0; i < headers.length; i++) list[at++] = headers[i]!;
    if (more) for (let i = 0; i < more.length; i++) list[at++] = more[i]!;
    this.res.writeHead(status, list);
    if (body === null || Buffer.isBuffer(body) || this.req.method === 'HEAD') {
      if (body !== null && !Buffer.isBuffer(body)) body.destroy();
      this.res.end(this.req.method === 'HEAD' ? undefined : (body ?? undefined));
    } else pipeline(body, this.res, () => undefined);
    const url = this.req.url!;
    const query = url.indexOf('?');
    logAccess(this.log, this.requestId, this.req.method!, query < 0 ? url : url.slice(0, query), status, startedAt(this.res), true);
  }

  /** The error envelope, as the errors middleware sends it (`extra` headers first, e.g. rate limits). */
  fail(err: unknown, extra: HeaderList = []): void {
    if (this.res.headersSent) {
      this.res.destroy();
      return;
    }
    const answer = errorAnswer(httpErrorOf(err, this.log, { requestId: this.requestId, method: this.req.method, url: this.req.url }));
    this.send(answer.status, extra.length ? [...CORS_LIST, ...extra, ...Object.entries(answer.headers).flat()] : withCors(answer.headers), answer.body);
  }
}
