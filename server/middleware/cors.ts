/** CORS: the API and the artifacts are read by browsers on other origins (the 3D client). */
import type { MuseumContext, MuseumMiddleware } from '../types.ts';

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

/** CORS headers on every answer (preflights are answered where no route takes them: route-table.ts). */
export function cors(): MuseumMiddleware {
  return function corsMiddleware(ctx, next) {
    ctx.set(CORS_HEADERS);
    return next();
  };
}

/** A preflight (OPTIONS): 204 advertising the methods the path has (a GET-only path does not advertise POST). */
export function preflight(ctx: MuseumContext, entry: { allow: string } | undefined): void {
  ctx.set(PREFLIGHT_HEADERS);
  ctx.set('Access-Control-Allow-Methods', entry ? `${entry.allow}, OPTIONS` : 'OPTIONS');
  ctx.status = 204;
}
