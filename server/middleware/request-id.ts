/** Request id and client IP: every response carries X-Request-Id; ctx.state gets both. */
import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';

const INCOMING_ID = /^[\w.:-]{1,64}$/;

export function requestContext(options: { trustProxy: boolean }) {
  return async function requestContextMiddleware(ctx: Context, next: Next) {
    const incoming = ctx.get('x-request-id');
    const id = INCOMING_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = id;
    ctx.set('X-Request-Id', id);
    ctx.state.clientIp = clientIp(ctx, options.trustProxy);
    await next();
  };
}

/**
 * The socket address, unless TRUST_PROXY: then the right-most X-Forwarded-For entry (the one our
 * own proxy appended) — never the left-most, which any client can forge.
 */
export function clientIp(ctx: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = ctx.get('x-forwarded-for');
    const last = forwarded.split(',').map((s) => s.trim()).filter(Boolean).pop();
    if (last && last.length <= 64) return last;
  }
  return ctx.req.socket.remoteAddress ?? 'unknown';
}
