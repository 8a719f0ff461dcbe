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
import type { Exchange } from '../exchange.ts';
import { JSON_TYPE } from '../http-conditional.ts';
import { negotiateEncoding } from '../snapshot-answer.ts';
import type { Stage } from '../types.ts';

/** Smaller answers gain too little to pay for a compressor. */
const COMPRESS_THRESHOLD = 1024;
const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);
const ENCODE = {
  br: (body: Buffer) => brotli(body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 4, [zlib.BROTLI_PARAM_SIZE_HINT]: body.length } }),
  gzip: (body: Buffer) => gzipped(body, { level: 6 }),
};

/** The compression stage of the /v1 JSON answers (placed before the error envelope, so errors are compressed too). */
export function compressAnswers(): Stage {
  return {
    answer(ex) {
      if (!ex.path.startsWith('/v1') || precompressed(ex)) return;
      ex.vary('Accept-Encoding');
      const body = jsonBytes(ex);
      if (body === null || body.length < COMPRESS_THRESHOLD) return;
      const encoding = negotiateEncoding(ex.req.headers['accept-encoding']);
      if (encoding === 'identity') return;
      return ENCODE[encoding](body).then((compressed) => {
        ex.body = compressed;
        ex.set('Content-Encoding', encoding);
        ex.set('Content-Length', String(compressed.length));
      });
    },
  };
}

/** The route's answers carry their own encodings and `Vary` (snapshot answers, compressed once per bake). */
const precompressed = (ex: Exchange): boolean => {
  const declared = ex.state.route?.response;
  return declared !== undefined && 'json' in declared && declared.precompressed === true;
};

/** The answer as JSON bytes when it is one this stage may compress, else null (a JSON value is serialized here). */
function jsonBytes(ex: Exchange): Buffer | null {
  if (!ex.respond || ex.method === 'HEAD' || ex.answerHeader('Content-Encoding') !== undefined) return null;
  // An event stream is known from its route's declaration, whatever type it is sent with.
  const declared = ex.state.route?.response;
  if (declared && 'sse' in declared) return null;
  const type = ex.answerHeader('Content-Type');
  if (type !== undefined && !type.startsWith('application/json')) return null;
  const body = ex.body;
  if (Buffer.isBuffer(body)) return type === undefined ? null : body;
  if (body === null || typeof body !== 'object' || body instanceof Readable) return null;
  const bytes = Buffer.from(JSON.stringify(body));
  ex.body = bytes;
  ex.type = JSON_TYPE;
  return bytes;
}
