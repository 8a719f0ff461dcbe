/**
 * Compression of the /v1 JSON responses made per request (search, characters, the Library, souls, the
 * guide, errors) by koa-compress: br or gzip as Accept-Encoding allows, from 1 KB up, with `Vary:
 * Accept-Encoding`. Routes whose responses carry their own encodings (snapshot responses, compressed
 * once per bake) and event streams set `ctx.compress = false` (server/route-table.ts).
 */
import koaCompress from 'koa-compress';
import { negotiateEncoding } from '../snapshot-response.ts';
import type { MuseumMiddleware } from '../types.ts';

const compress = koaCompress({
  threshold: 1024, // smaller responses gain too little to pay for a compressor
  filter: (type) => type === 'application/json',
  // The snapshot responses' encodings only (zstd would be koa-compress's first choice on Node ≥ 22.15).
  zstd: false,
  deflate: false,
  wildcardAcceptEncoding: 'br', // as negotiateEncoding reads `*`
});
/** koa-compress's options for one response: every encoding but the one negotiated turned off. */
const ONLY = { br: { gzip: false }, gzip: { br: false } } as const;

/** Compression of the /v1 responses (placed before the error envelope, so errors are compressed too). */
export function compressResponses(): MuseumMiddleware {
  return function compressResponsesMiddleware(ctx, next) {
    if (!ctx.path.startsWith('/v1')) return next();
    // koa-compress parses any Accept-Encoding afresh on each response: the decided bound (over 1 KB
    // reads as absent) and the memo per header value (LRU 256) are negotiateEncoding's.
    const encoding = negotiateEncoding(ctx.req.headers['accept-encoding']);
    ctx.compress = encoding === 'identity' ? false : ONLY[encoding];
    return compress(ctx, next);
  };
}
