/**
 * The access line and the request metrics: once the response is handed to the socket whole (or, for a
 * stream or a response still being sent, when the response closes: finished, or its connection
 * gone), one pino line `{ requestId, method, path, status, ms, msg: 'request' }` and the route's
 * count and latency, labelled by the route declaration that answered, never by raw URL; a client
 * that left before sending its whole request is logged 499 (nginx's "client closed request"). A
 * route declared `logged: false` (health probes, /metrics) leaves neither. Until then the request is
 * in the registry of requests in flight (what the graceful shutdown and the gauges read).
 */
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import type { MuseumContext, MuseumMiddleware } from '../types.ts';
import { CLIENT_CLOSED_REQUEST } from './errors.ts';

/** Where a finished request is counted (server/operations.ts). */
export interface RequestObserver {
  readonly inFlight: Set<MuseumContext>;
  record(route: string, method: string, status: number, seconds: number): void;
}

export function observe(log: Logger, observer: RequestObserver): MuseumMiddleware {
  const { inFlight } = observer;
  const finished = (ctx: MuseumContext) => {
    inFlight.delete(ctx);
    const route = ctx.state.route;
    if (route?.logged === false) return;
    const ms = performance.now() - ctx.state.started;
    const { method } = ctx;
    const status = wholeRequest(ctx.req) ? ctx.res.statusCode : CLIENT_CLOSED_REQUEST;
    log.info({ requestId: ctx.state.requestId, method, path: ctx.path, status, ms: Math.round(ms * 100) / 100 }, 'request');
    if (route) observer.record(route.path, method, status, ms / 1000);
  };
  return function observeMiddleware(ctx, next) {
    const context = ctx as MuseumContext;
    inFlight.add(context);
    // Answered: the response closes once it is handed to the socket whole, or its client is gone.
    ctx.res.once('close', () => finished(context));
    return next();
  };
}

/**
 * The whole request is received: its body read to the end, or it has none (node marks a request
 * without a body complete only after its handler has run, so it cannot say so yet).
 */
const wholeRequest = (req: IncomingMessage): boolean =>
  req.complete || (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined);
