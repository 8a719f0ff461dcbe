/**
 * The access line and the request metrics: once a request is done — its response closed (finished,
 * or its connection gone) and its stages returned (a client that left mid-body is logged 499 by the
 * error envelope after its connection closed) — one pino line `{ requestId, method, path, status,
 * ms, msg: 'request' }` and the route's count and latency, labelled by the route declaration that
 * answered, never by raw URL. A route declared `logged: false` (health probes, /metrics) leaves
 * neither. Until then the request is in the registry of requests in flight (what the graceful
 * shutdown and the gauges read).
 */
import type { Logger } from 'pino';
import type { MuseumContext, MuseumMiddleware } from '../types.ts';

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
    let waiting = 2;
    const done = () => {
      if (--waiting > 0) return;
      inFlight.delete(ctx);
      const route = ctx.state.route;
      if (route?.logged === false) return;
      const ms = performance.now() - started;
      const { method } = ctx;
      const status = ctx.res.statusCode;
      log.info({ requestId: ctx.state.requestId, method, path: ctx.path, status, ms: Math.round(ms * 100) / 100 }, 'request');
      if (route) observer.record(route.path, method, status, ms / 1000);
    };
    ctx.res.once('close', done);
    return next().finally(done);
  };
}
