/**
 * The request path, in one order, for every request (`requestHandler` is the node server's only
 * request handler):
 *
 *   connection guard → request id + client IP → access line + metrics (on close) → route match (+ the
 *   path's declared headers) → CORS (preflights from the table) → compression → error envelope →
 *   dispatch: 404 / 405, or the route's own stages — auth + key limit or IP limit → body → validation → handler
 *
 * Each stage is a small middleware (Koa's shape: `(exchange, next)`, composed by koa-compose) in its
 * own file; the route's own stages are composed once per declaration by the route table
 * (server/route-table.ts). After the stages, `respond` writes the answer they built (exchange.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import compose from 'koa-compose';
import type { Logger } from 'pino';
import { Exchange, respond } from './exchange.ts';
import { compressAnswers } from './middleware/compress.ts';
import { cors } from './middleware/cors.ts';
import { errorEnvelope, sendErrorAndClose } from './middleware/errors.ts';
import { connectionGuard } from './middleware/guard.ts';
import { observe, type RequestObserver } from './middleware/observe.ts';
import { requestContext } from './middleware/request-id.ts';
import type { RouteTable } from './route-table.ts';
import type { MuseumMiddleware } from './types.ts';

export interface StageDeps {
  table: RouteTable;
  log: Logger;
  trustProxy: boolean;
  /** Requests in flight, metrics, and whether the server is draining for a shutdown. */
  operations: RequestObserver & { readonly draining: boolean };
}

export function stages({ table, log, trustProxy, operations }: StageDeps): MuseumMiddleware[] {
  return [
    connectionGuard(operations),
    requestContext({ trustProxy }),
    observe(log, operations),
    table.match(),
    cors(),
    compression(),
    errorEnvelope(log),
    table.dispatch(),
  ];
}

/** Compression of answers made per request; a route whose answers carry their own encodings (snapshot answers) skips it. */
function compression(): MuseumMiddleware {
  const compress = compressAnswers();
  return function compressionStage(ctx, next) {
    const response = ctx.state.route?.response;
    return response && 'json' in response && response.precompressed ? next() : compress(ctx, next);
  };
}

/** Errors of a client that went away mid-answer: normal (aborted downloads, closed event streams). */
const CLIENT_GONE = new Set(['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE', 'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END']);

/** The node server's request handler: each request an exchange through `list`, then its answer written. */
export function requestHandler(list: MuseumMiddleware[], log: Logger): (req: IncomingMessage, res: ServerResponse) => void {
  const run = compose(list);
  const streamFailed = (err: NodeJS.ErrnoException) => {
    if (!CLIENT_GONE.has(err.code ?? '')) log.error({ err }, 'answer stream failed');
  };
  return (req, res) => {
    const ex = new Exchange(req, res);
    run(ex).then(
      () => respond(ex, streamFailed),
      (err: unknown) => {
        // Only a defect in a stage outside the error envelope gets here.
        log.error({ err, requestId: ex.state.requestId }, 'request path failed');
        if (!res.headersSent) sendErrorAndClose(res, 500, 'Internal server error');
        else res.destroy();
      },
    );
  };
}
