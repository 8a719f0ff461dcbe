/**
 * The request path, in one order, for every request (http.createServer(app.callback()) is the only
 * request handler):
 *
 *   connection guard → request id + client IP → access line + metrics (on close) → compression →
 *   error envelope → route match (+ the path's declared headers) → CORS (preflights from the table) →
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
import type { MuseumState } from './types.ts';

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
    compressAnswers(),
    errorEnvelope(log),
    table.match(),
    cors(),
    table.dispatch(),
  ];
}
