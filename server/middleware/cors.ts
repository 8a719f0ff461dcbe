/** CORS: the API and the artifacts are read by browsers on other origins (the 3D client). */
import type { MuseumMiddleware } from '../types.ts';

/**
 * Every response header is readable by a page on another origin (X-Request-Id, ETag, the rate-limit
 * headers, Retry-After, Content-Range…). `*` means exactly that for requests without credentials,
 * the only ones `Allow-Origin: *` admits; it keeps new headers exposed, and is 8 bytes on every
 * response instead of a 120-byte list node validates each time.
 */
export const CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': '*',
} as const;

const PREFLIGHT_HEADERS = {
  'Access-Control-Allow-Headers':
    'X-API-Key, Authorization, Content-Type, X-Exhibition-Token, If-None-Match, If-Modified-Since, Range, X-Request-Id',
  'Access-Control-Max-Age': '600',
} as const;

/**
 * CORS headers on every answer; a preflight (OPTIONS) is answered 204 advertising the methods the
 * route table has for the path (a GET-only path does not advertise POST), after the route match.
 */
export function cors(): MuseumMiddleware {
  return function corsMiddleware(ctx, next) {
    ctx.set(CORS_HEADERS);
    if (ctx.method !== 'OPTIONS') return next();
    const match = ctx.state.match;
    ctx.set(PREFLIGHT_HEADERS);
    ctx.set('Access-Control-Allow-Methods', match ? `${match.entry.allow}, OPTIONS` : 'OPTIONS');
    ctx.status = 204;
  };
}
