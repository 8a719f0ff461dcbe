/**
 * Compression of the /v1 JSON answers made per request (search, characters, the Library, souls, the
 * guide, errors): br or gzip as Accept-Encoding allows (negotiated as the snapshot answers are), from
 * 1 KB up, with `Vary: Accept-Encoding`. The body is whole in memory by then (≤ the answer caps), so
 * one asynchronous zlib call compresses it off the event loop. Answers already encoded (snapshot
 * answers, compressed once per bake: server/snapshot-answer.ts), event streams, HEAD and bodies that
 * are not JSON bytes pass untouched.
 */
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlib, gzip } from 'node:zlib';
import { JSON_TYPE } from '../http-conditional.ts';
import { negotiateEncoding } from '../snapshot-answer.ts';
import type { MuseumContext, MuseumMiddleware } from '../types.ts';

/** Smaller answers gain too little to pay for a compressor. */
const COMPRESS_THRESHOLD = 1024;
const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);
const ENCODE = {
  br: (body: Buffer) => brotli(body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 4, [zlib.BROTLI_PARAM_SIZE_HINT]: body.length } }),
  gzip: (body: Buffer) => gzipped(body, { level: 6 }),
};

/** Compression of the /v1 answers (placed before the error envelope, so errors are compressed too). */
export function compressAnswers(): MuseumMiddleware {
  return async function compressMiddleware(ctx, next) {
    await next();
    if (!ctx.path.startsWith('/v1') || precompressed(ctx)) return;
    ctx.vary('Accept-Encoding');
    const body = jsonBytes(ctx);
    if (body === null || body.length < COMPRESS_THRESHOLD) return;
    const encoding = negotiateEncoding(ctx.req.headers['accept-encoding']);
    if (encoding === 'identity') return;
    const compressed = await ENCODE[encoding](body);
    ctx.body = compressed;
    ctx.set('Content-Encoding', encoding);
  };
}

/** The route's answers carry their own encodings and `Vary` (snapshot answers, compressed once per bake). */
const precompressed = (ctx: MuseumContext): boolean => {
  const declared = ctx.state.route?.response;
  return declared !== undefined && 'json' in declared && declared.precompressed === true;
};

/** The answer as JSON bytes when it is one this middleware may compress, else null (a JSON value is serialized here). */
function jsonBytes(ctx: MuseumContext): Buffer | null {
  if (ctx.respond === false || ctx.method === 'HEAD' || ctx.response.get('Content-Encoding') !== undefined) return null;
  // An event stream is known from its route's declaration, whatever type it is sent with.
  const declared = ctx.state.route?.response;
  if (declared && 'sse' in declared) return null;
  const type = String(ctx.response.get('Content-Type') ?? '');
  if (type !== '' && !type.startsWith('application/json')) return null;
  const body: unknown = ctx.body;
  if (Buffer.isBuffer(body)) return type === '' ? null : body;
  if (body == null || typeof body !== 'object' || body instanceof Readable) return null;
  const bytes = Buffer.from(JSON.stringify(body));
  ctx.body = bytes;
  ctx.type = JSON_TYPE;
  return bytes;
}
