/**
 * The raw twin of the outer middleware, for answers written without Koa (the fast path): request id
 * (request-id.ts), CORS (cors.ts), the error envelope (errors.ts) and the access line (access-log.ts),
 * each built by the same function its middleware uses, so both stacks answer alike by construction.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline, type Readable } from 'node:stream';
import type { AccessLog } from './access-log.ts';
import { CORS_LIST } from './cors.ts';
import { errorAnswer, httpErrorOf } from './errors.ts';
import { REQUEST_ID_HEADER, requestIdOf } from './request-id.ts';
import { startedAt } from '../request-metrics.ts';

/** Response headers as a flat `[name, value, …]` list: node writes those without copying them. */
export type HeaderList = readonly string[];

/**
 * An answer's whole header list, `[X-Request-Id, <this request's id>, …CORS, …the rest]`: built once
 * per precomputed header set and reused by every request, its id slot filled just before node
 * writes it (writeHead reads the list synchronously and keeps none of it).
 */
export type PreparedList = string[];

/** Index of the request id's value in a prepared list. */
const ID_SLOT = 1;

/** A prepared list of `parts` after the CORS headers. */
export const preparedList = (...parts: HeaderList[]): PreparedList => [REQUEST_ID_HEADER, '', ...CORS_LIST, ...parts.flat()];

/** Where the n-th header (0-based) of the parts of a prepared list sits: its value is one further. */
export const preparedIndex = (n: number): number => 2 + CORS_LIST.length + 2 * n;

export class RawExchange {
  readonly requestId: string;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    private readonly access: AccessLog,
    /** The request's path without its query (what the access line says). */
    private readonly path: string,
  ) {
    this.requestId = requestIdOf(req.headers['x-request-id']);
  }

  /** Answer with a prepared list (see PreparedList); the caller fills any other per-request slot. */
  sendPrepared(status: number, list: PreparedList, body: Buffer | Readable | null): void {
    list[ID_SLOT] = this.requestId;
    this.res.writeHead(status, list);
    const head = this.req.method === 'HEAD';
    if (body === null || Buffer.isBuffer(body) || head) {
      if (body !== null && !Buffer.isBuffer(body)) body.destroy();
      this.res.end(head ? undefined : (body ?? undefined));
    } else pipeline(body, this.res, () => undefined);
    this.access.write(this.requestId, this.req.method!, this.path, status, startedAt(this.res), true);
  }

  /** The error envelope, as the errors middleware sends it (`extra` headers first, e.g. rate limits). */
  fail(err: unknown, extra: HeaderList = []): void {
    if (this.res.headersSent) {
      this.res.destroy();
      return;
    }
    const { requestId, req } = this;
    const answer = errorAnswer(httpErrorOf(err, this.access.log, { requestId, method: req.method, url: req.url }));
    this.sendPrepared(answer.status, preparedList(extra, Object.entries(answer.headers).flat()), answer.body);
  }
}

/** A request's path without its query. */
export const pathOf = (url: string): string => {
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
};
