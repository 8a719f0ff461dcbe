/**
 * The access line and the request metrics: when a response closes (finished, or its connection
 * gone), one pino line `{ requestId, method, path, status, ms, msg: 'request' }` and the route's
 * count and latency, labelled by the route declaration that answered, never by raw URL; a client
 * that left before sending its whole request is logged 499 (nginx's "client closed request"). A
 * route declared `logged: false` (health probes, /metrics) leaves neither. Until then the request is
 * in the registry of requests in flight (what the graceful shutdown and the gauges read).
 */
import type { Logger } from 'pino';
import type { MuseumContext, MuseumMiddleware } from '../types.ts';
import { CLIENT_CLOSED_REQUEST } from './errors.ts';

/** Where a finished request is counted (server/operations.ts). */
export interface RequestObserver {
  readonly inFlight: Set<MuseumContext>;
  record(route: string, method: string, status: number, seconds: number): void;
}

export function observe(log: Logger, observer: RequestObserver): MuseumMiddleware {
  return function observeMiddleware(ctx, next) {
    const started = performance.now();
    const { inFlight } = observer;
    inFlight.add(ctx);
    ctx.res.once('close', () => {
      inFlight.delete(ctx);
      const route = ctx.state.route;
      if (route?.logged === false) return;
      const ms = performance.now() - started;
      const { method } = ctx;
      const status = ctx.req.complete ? ctx.res.statusCode : CLIENT_CLOSED_REQUEST;
      log.info({ requestId: ctx.state.requestId, method, path: ctx.path, status, ms: Math.round(ms * 100) / 100 }, 'request');
      if (route) observer.record(route.path, method, status, ms / 1000);
    });
    return next();
  };
}
