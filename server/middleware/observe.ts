/**
 * The access line and the request metrics: once the answer is handed to the socket whole (or, for a
 * stream or an answer still being sent, when the response closes: finished, or its connection gone), one pino line `{ requestId, method, path, status, ms, msg: 'request' }` and the route's
 * count and latency, labelled by the route declaration that answered, never by raw URL; a client
 * that left before sending its whole request is logged 499 (nginx's "client closed request"). A
 * route declared `logged: false` (health probes, /metrics) leaves neither. Until then the request is
 * in the registry of requests in flight (what the graceful shutdown and the gauges read).
 */
import type { Logger } from 'pino';
import type { Exchange } from '../exchange.ts';
import type { MuseumContext, Stage } from '../types.ts';
import { CLIENT_CLOSED_REQUEST } from './errors.ts';

/** Where a finished request is counted (server/operations.ts). */
export interface RequestObserver {
  readonly inFlight: Set<MuseumContext>;
  record(route: string, method: string, status: number, seconds: number): void;
}

export function observe(log: Logger, observer: RequestObserver): Stage {
  const { inFlight } = observer;
  const finished = (ex: Exchange) => {
    inFlight.delete(ex);
    const route = ex.state.route;
    if (route?.logged === false) return;
    const ms = performance.now() - ex.started;
    const { method } = ex;
    const status = ex.req.complete ? ex.res.statusCode : CLIENT_CLOSED_REQUEST;
    log.info({ requestId: ex.state.requestId, method, path: ex.path, status, ms: Math.round(ms * 100) / 100 }, 'request');
    if (route) observer.record(route.path, method, status, ms / 1000);
  };
  return {
    request(ex) {
      inFlight.add(ex);
    },
    // After the answer writer's: the answer is written, or a stream or a stage has the response.
    answer(ex) {
      const { req, res } = ex;
      // Answered: a whole request and its whole answer handed to the socket (the common case, at
      // once); else when the response closes (a stream, a body still moving, a client gone).
      if (req.complete && res.writableEnded && res.writableLength === 0) finished(ex);
      else res.once('close', () => finished(ex));
    },
  };
}
