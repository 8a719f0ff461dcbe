/**
 * The museum's Koa app: every request on the API port passes these middleware in this order, down
 * to the route table's declarations (server/route-table.ts compiles them to @koa/router routes).
 */
import Koa from 'koa';
import type { Logger } from 'pino';
import { compressResponses } from './middleware/compress.ts';
import { cors } from './middleware/cors.ts';
import { errorEnvelope } from './middleware/errors.ts';
import { closeWhileDraining } from './middleware/guard.ts';
import { observe, type RequestObserver } from './middleware/observe.ts';
import { requestContext } from './middleware/request-id.ts';
import type { RouteTable } from './route-table.ts';
import type { MuseumState } from './types.ts';

export interface AppDeps {
  table: RouteTable;
  log: Logger;
  trustProxy: boolean;
  /** Requests in flight, metrics, and whether the server is draining for a shutdown. */
  operations: RequestObserver & { readonly draining: boolean };
}

/** Errors of a client that went away mid-response: normal (aborted downloads, closed event streams). */
const CLIENT_GONE = new Set(['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE', 'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END']);

export function museumApp({ table, log, trustProxy, operations }: AppDeps): Koa<MuseumState> {
  const app = new Koa<MuseumState>();
  app.use(requestContext({ trustProxy })); // X-Request-Id, ctx.state.clientIp
  app.use(observe(log, operations)); // access line + request metrics, once answered
  app.use(closeWhileDraining(operations)); // Connection: close during a shutdown
  app.use(cors()); // CORS headers (preflights: the table)
  app.use(compressResponses()); // koa-compress: br/gzip of /v1 JSON responses made per request
  app.use(errorEnvelope(log)); // every failure as { errors: [...] }
  for (const middleware of table.dispatch()) app.use(middleware); // @koa/router, then preflight / 404 / 405
  // What escapes the envelope (a response stream failing mid-way): logged, unless the client left.
  app.on('error', (err: NodeJS.ErrnoException) => {
    if (!CLIENT_GONE.has(err.code ?? '')) log.error({ err }, 'request path failed');
  });
  return app;
}
