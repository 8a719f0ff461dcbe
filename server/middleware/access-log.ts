/** Structured access log: one line per request with id, method, path, status and duration. */
import type { Logger } from 'pino';
import type { MuseumMiddleware } from '../types.ts';

/** Write one access line (shared with the raw exchange, which adds `fast: true`). */
export function logAccess(log: Logger, requestId: string, method: string, path: string, status: number, started: number, fast?: true): void {
  if (!log.isLevelEnabled('info')) return;
  const ms = Math.round((performance.now() - started) * 100) / 100;
  log.info(fast ? { requestId, method, path, status, ms, fast } : { requestId, method, path, status, ms }, 'request');
}

export function accessLog(log: Logger): MuseumMiddleware {
  return async function accessLogMiddleware(ctx, next) {
    const started = performance.now();
    try {
      await next();
    } finally {
      logAccess(log, ctx.state.requestId, ctx.method, ctx.path, ctx.status, started);
    }
  };
}
