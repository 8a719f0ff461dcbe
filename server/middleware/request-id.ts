/** Request id and client IP: every response carries X-Request-Id; ctx.state gets both. */
import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';

const INCOMING_ID = /^[\w.:-]{1,64}$/;

/** The caller's X-Request-Id when it is a sane token, else a fresh one (shared with the fast path). */
export const requestIdOf = (incoming: string | string[] | undefined): string =>
  typeof incoming === 'string' && INCOMING_ID.test(incoming) ? incoming : randomUUID();

export function requestContext(options: { trustProxy: boolean }) {
  return async function requestContextMiddleware(ctx: Context, next: Next) {
    const id = requestIdOf(ctx.get('x-request-id'));
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
