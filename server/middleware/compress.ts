/**
 * Compression of the /v1 JSON answers made per request (search, characters, the Library, souls, the
 * guide, errors), with koa-compress: br or gzip as Accept-Encoding allows, from 1 KB up, with
 * `Vary: Accept-Encoding`. Answers that are already encoded (snapshot answers, compressed once per
 * bake: server/snapshot-answer.ts) pass untouched, and so does every event stream: a compressor
 * would hold its frames back until a block fills.
 */
import compress from 'koa-compress';
import { constants as zlib } from 'node:zlib';
import type { MuseumMiddleware } from '../types.ts';

/** Smaller answers gain too little to pay for a compressor. */
const COMPRESS_THRESHOLD = 1024;

const compressJson = compress({
  threshold: COMPRESS_THRESHOLD,
  // Only JSON: event streams, audio, files and pages are not this stage's.
  filter: (type) => type === 'application/json',
  br: { params: { [zlib.BROTLI_PARAM_QUALITY]: 4 } },
  gzip: { level: 6 },
  deflate: false,
});

/** The matched route's declaration, when the route table records it (`ctx.state.route`). */
type Declared = { route?: { response: object } };

/** The compression stage of the /v1 JSON answers (place it outside the error envelope, so errors are compressed too). */
export function compressAnswers(): MuseumMiddleware {
  return async function compressStage(ctx, next) {
    if (!ctx.path.startsWith('/v1')) return next();
    // Nothing to negotiate: the answer is identity whatever it is (koa-compress would parse the default).
    if (ctx.get('Accept-Encoding') === '') {
      ctx.vary('Accept-Encoding');
      return next();
    }
    return compressJson(ctx, async () => {
      await next();
      // An event stream is known from its declaration, whatever type it ends up sent with.
      const declared = (ctx.state as Declared).route?.response;
      if (declared && 'sse' in declared) ctx.compress = false;
    });
  };
}
