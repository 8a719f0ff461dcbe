/**
 * The request path, in one order, for every request (http.createServer(app.callback()) is the only
 * request handler):
 *
 *   connection guard → request id + client IP → access line + metrics (on close) → route match (+ the
 *   path's declared headers) → CORS (preflights from the table) → compression → error envelope →
 *   dispatch: 404 / 405, or the route's own stages — auth + key limit or IP limit → body → validation → handler
 *
 * Each stage is a small Koa middleware in its own file; the route's own stages are composed once per
 * declaration by the route table (server/route-table.ts).
 */
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { compressAnswers } from './middleware/compress.ts';
import { cors } from './middleware/cors.ts';
import { errorEnvelope } from './middleware/errors.ts';
import { connectionGuard } from './middleware/guard.ts';
import { observe, type RequestObserver } from './middleware/observe.ts';
import { requestContext } from './middleware/request-id.ts';
import type { RouteTable } from './route-table.ts';
import type { MuseumMiddleware, MuseumState } from './types.ts';

export interface StageDeps {
  table: RouteTable;
  log: Logger;
  trustProxy: boolean;
  /** Requests in flight, metrics, and whether the server is draining for a shutdown. */
  operations: RequestObserver & { readonly draining: boolean };
}

export function stages({ table, log, trustProxy, operations }: StageDeps): Array<Middleware<MuseumState>> {
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
