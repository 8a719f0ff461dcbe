/** While the server drains for a shutdown, `Connection: close` on every response. */
import type { MuseumMiddleware } from '../types.ts';

export function closeWhileDraining(server: { readonly draining: boolean }): MuseumMiddleware {
  return function closeWhileDrainingMiddleware(ctx, next) {
    if (server.draining) ctx.set('Connection', 'close');
    return next();
  };
}
