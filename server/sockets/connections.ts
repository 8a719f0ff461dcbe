/**
 * Guards of the HTTP server itself, below the request path: what a client can hold without sending a request.
 *  - Time to receive a request: its headers (`headersTimeout`) and the whole request, body included
 *    (`requestTimeout`). Both stop counting once the request is received, so a response that runs
 *    for minutes (event streams) is not affected. A late request is answered 408 and closed.
 *  - Open connections per client (`maxConnectionsPerIp`; IPv6 by /64; every socket held counts): one
 *    more is answered 503 `BUSY` at once, before any request is read, and closed within 1 s. Sockets in all:
 *    `maxConnections` (http.Server#maxConnections, below the descriptor limit). Behind TRUST_PROXY every connection comes from the
 *    proxy, so the cap is off unless set.
 *  - Requests node refuses before the request path — an HTTP/1.1 request without `Host`, an `Expect` other than
 *    `100-continue` — get the error envelope with a request id instead of node's empty 400/417.
 *  - `Expect: 100-continue` is answered `100 Continue` only when a route starts reading the body
 *    (`continueIfExpected`), not by node up front: a refused request's body is never sent.
 */
import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { clientBucket } from '../../common/net.ts';
import { rawErrorResponse, sendErrorAndClose } from '../middleware/errors.ts';
import { destroyOnceSent, discardBody, trackResponses } from './lingering-close.ts';

export interface ConnectionLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** 0 = no cap. */
  maxConnectionsPerIp: number;
  /** Sockets held in all (node closes one more at once). */
  maxConnections: number;
}

/** Options for `createServer`: we check Host ourselves (to answer with the envelope), and how often timeouts are checked. */
export function serverOptions(limits: ConnectionLimits): ServerOptions {
  return {
    requireHostHeader: false,
    // node checks both timeouts on this interval (default 30 s): a late request is closed within it.
    connectionsCheckingInterval: Math.min(5_000, Math.max(100, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4))),
  };
}

export function guardConnections(server: Server, limits: ConnectionLimits, log: Logger): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    awaitingContinue.add(res);
    server.emit('request', req, res);
  });
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    sendErrorAndClose(req, res, 417, 'Unsupported Expect header (only 100-continue is)', 'BAD_REQUEST');
  });
  // Below the descriptor limit, so a flood of addresses never takes the descriptors /healthz needs.
  server.maxConnections = limits.maxConnections;
  trackResponses(server);
  if (limits.maxConnectionsPerIp > 0) capConnectionsPerIp(server, limits.maxConnectionsPerIp, log);
}

/** Responses to `Expect: 100-continue` requests whose `100 Continue` is not sent yet. */
const awaitingContinue = new WeakSet<ServerResponse>();

/** The client waits for `100 Continue` before it sends its body, and it has not been sent. */
export const awaitsContinue = (res: ServerResponse): boolean => awaitingContinue.has(res) && !res.headersSent;

/** Before reading a request body: tell a client that waits for it to send the body. */
export function continueIfExpected(res: ServerResponse): void {
  if (!awaitingContinue.delete(res) || res.headersSent) return;
  res.writeContinue();
}

/** Connections answered 503 at connect time: requests parsed on them are not served. */
const refusedSockets = new WeakSet<object>();

/** A refused connection is held at most this long: its 503 sent, a request it had started discarded to its end. */
const REFUSAL_BOUNDS = { ms: 1_000, bytes: 16 * 1024 * 1024 } as const;

/**
 * Every socket the server holds counts for its address until it is closed — refused ones and ones
 * discarding a refused body included (issue 43). One over the cap gets its 503 and our side ended at
 * once; it is held only until the client ends its side or what it had started sending is read
 * (≤ 1 s), never lingered for.
 */
function capConnectionsPerIp(server: Server, max: number, log: Logger): void {
  const open = new Map<string, number>();
  const refusal = rawErrorResponse(503, 'Too many open connections from this address', 'BUSY', { 'Retry-After': '30' });
  let refusedLogged = 0;
  server.on('connection', (socket: Socket) => {
    const ip = clientBucket(socket.remoteAddress ?? 'unknown'); // an IPv6 client counts by its /64
    const count = open.get(ip) ?? 0;
    // Counted from accept to close, whatever happens to it meanwhile (served, lingering, refused).
    open.set(ip, count + 1);
    socket.once('close', () => {
      const left = (open.get(ip) ?? 1) - 1;
      if (left <= 0) open.delete(ip);
      else open.set(ip, left);
    });
    if (count < max) return;
    // One line per minute at most: a flood must not flood the log too.
    if (Date.now() - refusedLogged > 60_000) {
      refusedLogged = Date.now();
      log.warn({ ip, open: count, max }, 'connection refused: too many open connections from this address');
    }
    refusedSockets.add(socket);
    refuseAtOnce(socket, refusal);
  });
}

/** Send the 503 and end our side; destroy the socket at the bound (a request on it is discarded: `refusedBeforeRouting`). */
function refuseAtOnce(socket: Socket, refusal: string | Buffer): void {
  const timer = setTimeout(() => socket.destroy(), REFUSAL_BOUNDS.ms);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.on('error', () => socket.destroy());
  socket.once('end', () => destroyOnceSent(socket)); // the client ended its side: nothing unread is left
  socket.end(refusal);
}

/**
 * Requests refused before any routing, true when this one was: one on a connection refused by
 * the per-IP cap (already answered 503: ignored), or an HTTP/1.1 request without Host (RFC 9112:
 * 400, answered here with the envelope).
 */
export function refusedBeforeRouting(req: IncomingMessage, res: ServerResponse): boolean {
  if (refusedSockets.has(req.socket)) {
    // Already answered 503: what the client sends is read to its end, so closing sends no reset.
    void discardBody(req, REFUSAL_BOUNDS).then((whole) => (whole ? destroyOnceSent(req.socket) : req.socket.destroy()));
    return true;
  }
  if (req.headers.host !== undefined || req.httpVersionMajor !== 1 || req.httpVersionMinor !== 1) return false;
  sendErrorAndClose(req, res, 400, 'The Host header is required');
  return true;
}
