/**
 * The error envelope: every failure leaves as `{ errors: [{ message, extensions: { code } }] }`
 * with the right status. Unexpected exceptions become a generic 500 (the detail is logged with
 * the request id, never sent). Unmatched routes become 404. A refused request whose body has not
 * been read (401, 429, 413…) is answered without parsing it, and its connection closed once the
 * rest is discarded (lingering-close.ts: the client still sending reads its response, not a reset). A client
 * that hung up before sending its whole request is logged as such (status 499), not as a failure.
 */
import { STATUS_CODES } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { codeForStatus, envelope, envelopeOf, type ErrorCode, HttpError } from '../errors.ts';
import { JSON_TYPE } from '../http-conditional.ts';
import { respondWith } from '../response.ts';
import type { MuseumMiddleware, PreparedResponse } from '../types.ts';
import { CORS_HEADERS } from './cors.ts';
import { awaitsContinue } from '../sockets/connections.ts';
import { respondBeforeBody, respondedToClientError, endAfterClientError, responseInProgress } from '../sockets/lingering-close.ts';
import { freshRequestId } from './request-id.ts';

const CLIENT_MESSAGES: Record<number, string> = {
  400: 'Bad request',
  404: 'Not found',
  405: 'Method not allowed',
  413: 'Request body too large',
  415: 'Unsupported media type',
};

const NOT_FOUND = new HttpError(404, 'NOT_FOUND', 'Not found');
const INTERNAL = new HttpError(500, 'INTERNAL', 'Internal server error');

/** Serialized envelopes, once per error instance (the shared 401s and 429s are answered often). */
const responses = new WeakMap<HttpError, PreparedResponse & { body: Buffer }>();

/** The response for an error: status, its headers, the envelope (serialized once per error instance). */
function errorResponse(error: HttpError): PreparedResponse & { body: Buffer } {
  let response = responses.get(error);
  if (!response) {
    const body = Buffer.from(JSON.stringify(envelopeOf(error)));
    response = {
      status: error.status,
      headers: { ...error.headers, 'Content-Type': JSON_TYPE, 'Content-Length': String(body.length) },
      body,
    };
    responses.set(error, response);
  }
  return response;
}

/**
 * What a thrown value answers: an HttpError as it is, a client error raised by node or a library (e.g.
 * malformed URL encoding) with a generic message, anything else a generic 500 whose detail is logged.
 */
function httpErrorOf(err: unknown, log: Logger, request: { requestId: string; method?: string; url?: string }): HttpError {
  if (err instanceof HttpError) return err;
  const status = httpStatusOf(err);
  if (status !== 500) return new HttpError(status, codeForStatus(status), CLIENT_MESSAGES[status] ?? 'Bad request');
  log.error({ err, requestId: request.requestId, method: request.method, url: request.url }, 'unhandled error');
  return INTERNAL;
}

export function errorEnvelope(log: Logger): MuseumMiddleware {
  return async function errorEnvelopeMiddleware(ctx, next) {
    try {
      await next();
    } catch (err) {
      if (clientLeft(err, ctx.req)) {
        log.info({ requestId: ctx.state.requestId, method: ctx.method, url: ctx.url }, 'client left before sending its whole request');
        ctx.respond = false;
        return;
      }
      const response = errorResponse(httpErrorOf(err, log, { requestId: ctx.state.requestId, method: ctx.method, url: ctx.url }));
      // Never parse a refused request's body: answer while the client may still be sending, then close.
      if (bodyUnread(ctx.req)) {
        ctx.status = response.status;
        ctx.respond = false;
        respondBeforeBody(ctx.req, ctx.res, response, !awaitsContinue(ctx.res));
        return;
      }
      respondWith(ctx, response);
      return;
    }
    // No middleware answered (a handler that set nothing): 404, as an unknown path.
    if (ctx.status === 404 && ctx.body == null && ctx.respond !== false) respondWith(ctx, errorResponse(NOT_FOUND));
  };
}

/** nginx's "client closed request": logged, never sent (nobody is there to read it). */
export const CLIENT_CLOSED_REQUEST = 499;

/** The request failed because its client went away before the request was complete. */
function clientLeft(err: unknown, req: IncomingMessage): boolean {
  if (req.complete) return false;
  const code = (err as NodeJS.ErrnoException)?.code;
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || req.destroyed;
}

/** The request announces a body that has not been received and read yet. */
function bodyUnread(req: IncomingMessage): boolean {
  if (req.complete && req.readableLength === 0) return false;
  return Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
}

/** The headers and body of an error answered before the request path: the envelope, a fresh request id, CORS, `Connection: close`. */
function closingErrorResponse(message: string, code: ErrorCode, headers: Record<string, string>) {
  const body = JSON.stringify(envelope(message, code));
  return {
    body,
    headers: {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': String(Buffer.byteLength(body)),
      'X-Request-Id': freshRequestId(),
      ...CORS_HEADERS,
      ...headers,
      Connection: 'close',
    },
  };
}

/** A whole error response as raw HTTP/1.1 bytes, for sockets with no response object (parser errors, refused connections). */
export function rawErrorResponse(
  status: number,
  message: string,
  code = codeForStatus(status),
  headers: Record<string, string> = {},
): string {
  const response = closingErrorResponse(message, code, headers);
  const head = Object.entries(response.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head}\r\n${response.body}`;
}

/**
 * The same response through node's response object (requests node refuses before the request path sees
 * them); the connection closes after it.
 */
export function sendErrorAndClose(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  message: string,
  code = codeForStatus(status),
): void {
  respondBeforeBody(req, res, { status, ...closingErrorResponse(message, code, {}) }, !awaitsContinue(res));
}

/**
 * Requests node's HTTP parser rejects (invalid header bytes, oversized headers, bad framing) never
 * reach the request path; answer them with the envelope too instead of node's bare status line.
 */
export function clientErrorResponder() {
  return (err: NodeJS.ErrnoException, duplex: Duplex): void => {
    const socket = duplex as Socket; // an http.Server's connections are net sockets
    // Answered already: what the client still sends is read and dropped until it ends, within bounds.
    if (respondedToClientError(socket)) return;
    if (err.code === 'ECONNRESET' || !socket.writable || responseInProgress(socket)) {
      socket.destroy();
      return;
    }
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'ERR_HTTP_HEADERS_TIMEOUT';
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : timedOut ? 408 : 400;
    const message = status === 431 ? 'Request headers too large' : timedOut ? 'Request not received in time' : 'Bad request';
    endAfterClientError(socket, rawErrorResponse(status, message));
  };
}

function httpStatusOf(err: unknown): number {
  const status = (err as { status?: unknown; expose?: unknown })?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) return status;
  if (err instanceof URIError) return 400;
  return 500;
}
