/**
 * The first stage: requests refused before any routing (a connection over the per-IP cap, an
 * HTTP/1.1 request without Host: connections.ts answers them itself), and, while the server drains
 * for a shutdown, `Connection: close` on every answer.
 */
import type { Stage } from '../types.ts';
import { refusedBeforeRouting } from './connections.ts';

export function connectionGuard(server: { readonly draining: boolean }): Stage {
  return {
    request(ex) {
      if (refusedBeforeRouting(ex.req, ex.res)) {
        ex.respond = false;
        ex.finished = true;
      } else if (server.draining) ex.set('Connection', 'close');
    },
  };
}
