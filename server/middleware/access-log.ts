/** Structured access log: one line per request with id, status and duration. */
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';

export function accessLog(log: Logger) {
  return async function accessLogMiddleware(ctx: Context, next: Next) {
    const start = performance.now();
    try {
      await next();
    } finally {
      if (log.isLevelEnabled('info')) {
        log.info(
          {
            requestId: ctx.state.requestId,
            method: ctx.method,
            path: ctx.path,
            status: ctx.status,
            ms: Math.round((performance.now() - start) * 100) / 100,
          },
          'request',
        );
      }
    }
  };
}
