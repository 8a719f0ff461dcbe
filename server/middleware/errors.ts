/**
 * The error envelope: every failure leaves as `{ errors: [{ message, extensions: { code } }] }`
 * with the right status. Unexpected exceptions become a generic 500 (the detail is logged with
 * the request id, never sent). Unmatched routes become 404.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { codeForStatus, envelope, HttpError } from '../errors.ts';

const CLIENT_MESSAGES: Record<number, string> = {
  400: 'Bad request',
  404: 'Not found',
  405: 'Method not allowed',
  413: 'Request body too large',
  415: 'Unsupported media type',
};

export function errorEnvelope(log: Logger) {
  return async function errorEnvelopeMiddleware(ctx: Context, next: Next) {
    try {
      await next();
      if (ctx.status === 404 && ctx.body == null) {
        ctx.status = 404;
        ctx.body = envelope('Not found', 'NOT_FOUND');
      } else if (ctx.status === 405 && ctx.body == null) {
        ctx.body = envelope('Method not allowed', 'METHOD_NOT_ALLOWED');
      } else if (ctx.status === 501 && ctx.body == null) {
        // A method the router does not know at all (PROPFIND, PURGE…): 405 on a route, else 404.
        if (ctx.response.get('Allow')) {
          ctx.status = 405;
          ctx.body = envelope('Method not allowed', 'METHOD_NOT_ALLOWED');
        } else {
          ctx.remove('Allow');
          ctx.status = 404;
          ctx.body = envelope('Not found', 'NOT_FOUND');
        }
      }
    } catch (err) {
      if (err instanceof HttpError) {
        ctx.status = err.status;
        ctx.set(err.headers);
        ctx.body = envelope(err.message, err.code);
        return;
      }
      const status = httpStatusOf(err);
      if (status !== 500) {
        // A client error raised by Koa itself (e.g. malformed URL encoding): generic message only.
        ctx.status = status;
        ctx.body = envelope(CLIENT_MESSAGES[status] ?? 'Bad request', codeForStatus(status));
        return;
      }
      log.error({ err, requestId: ctx.state.requestId, method: ctx.method, url: ctx.url }, 'unhandled error');
      ctx.status = 500;
      ctx.body = envelope('Internal server error', 'INTERNAL');
    }
  };
}

/**
 * Requests node's HTTP parser rejects (invalid header bytes, oversized headers, bad framing) never
 * reach Koa; answer them with the envelope too instead of node's bare status line.
 */
export function clientErrorResponder() {
  return (err: NodeJS.ErrnoException, socket: Duplex): void => {
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = JSON.stringify(envelope(status === 431 ? 'Request headers too large' : 'Bad request', codeForStatus(status)));
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${randomUUID()}\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n${body}`,
    );
  };
}

function httpStatusOf(err: unknown): number {
  const status = (err as { status?: unknown; expose?: unknown })?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) return status;
  if (err instanceof URIError) return 400;
  return 500;
}
