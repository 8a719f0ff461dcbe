/** CORS: the API and the artifacts are read by browsers on other origins (the 3D client). */
import type { MuseumMiddleware } from '../types.ts';

export const CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers':
    'X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, Retry-After, ETag, Content-Range, Content-Length, Accept-Ranges',
} as const;

/** The same headers as a flat `[name, value, …]` list, as the raw exchange writes them. */
export const CORS_LIST: readonly string[] = Object.entries(CORS_HEADERS).flat();

const PREFLIGHT_HEADERS = {
  'Access-Control-Allow-Methods': 'GET, HEAD, POST, OPTIONS',
  'Access-Control-Allow-Headers':
    'X-API-Key, Authorization, Content-Type, X-Exhibition-Token, If-None-Match, If-Modified-Since, Range, X-Request-Id',
  'Access-Control-Max-Age': '600',
} as const;

export function cors(): MuseumMiddleware {
  return async function corsMiddleware(ctx, next) {
    ctx.set(CORS_HEADERS);
    if (ctx.method === 'OPTIONS') {
      ctx.set(PREFLIGHT_HEADERS);
      ctx.status = 204;
      return;
    }
    await next();
  };
}
