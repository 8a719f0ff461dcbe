/**
 * The first stage: requests refused before any routing (a connection over the per-IP cap, an
 * HTTP/1.1 request without Host: connections.ts answers them itself), and, while the server drains
 * for a shutdown, `Connection: close` on every answer.
 */
import type { MuseumMiddleware } from '../types.ts';
import { refusedBeforeRouting } from './connections.ts';

export function connectionGuard(server: { readonly draining: boolean }): MuseumMiddleware {
  return function connectionGuardMiddleware(ctx, next) {
    if (refusedBeforeRouting(ctx.req, ctx.res)) {
      ctx.respond = false;
      return Promise.resolve();
    }
    if (server.draining) ctx.set('Connection', 'close');
    return next();
  };
}
