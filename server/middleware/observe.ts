/**
 * The access line and the request metrics: once the answer is handed to the socket whole (or, for a
 * stream or an answer still being sent, when the response closes: finished, or its connection
 * gone), one line `{ requestId, method, path, status, ms, msg: 'request' }` (server/log.ts
 * `accessLog`) and the route's count and latency, labelled by the route declaration that answered, never by raw URL; a client
 * that left before sending its whole request is logged 499 (nginx's "client closed request"). A
 * route declared `logged: false` (health probes, /metrics) leaves neither. Until then the request is
 * in the registry of requests in flight (what the graceful shutdown and the gauges read).
 */
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { accessLog } from '../log.ts';
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
  const accessLine = accessLog(log);
  const finished = (ex: Exchange) => {
    inFlight.delete(ex);
    const route = ex.state.route;
    if (route?.logged === false) return;
    const ms = performance.now() - ex.started;
    const { method } = ex;
    const status = wholeRequest(ex.req) ? ex.res.statusCode : CLIENT_CLOSED_REQUEST;
    accessLine({ requestId: ex.state.requestId, method, path: ex.path, status, ms: Math.round(ms * 100) / 100 });
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
      // once), or a response already closed (its client gone); else when the response closes (a
      // stream, a body still moving).
      if ((wholeRequest(req) && res.writableEnded && res.writableLength === 0) || res.closed) finished(ex);
      else res.once('close', () => finished(ex));
    },
  };
}

/**
 * The whole request is received: its body read to the end, or it has none (node marks a request
 * without a body complete only after its handler has run, so it cannot say so yet).
 */
const wholeRequest = (req: IncomingMessage): boolean =>
  req.complete || (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined);
