/**
 * Responses from the bake snapshot with their validators and encodings: a JSON body serialized once,
 * its strong ETag per representation, `If-None-Match` → 304, and br/gzip representations compressed
 * once (lazily, off the event loop, on the first request that accepts them) and kept with the response,
 * which lives as long as its snapshot (perSnapshot). A request then costs a negotiation lookup and an
 * ETag comparison, never a compression (decisions.md "Clients of the HTTP API").
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlib, gzip } from 'node:zlib';
import { LRUCache } from 'lru-cache';
import Negotiator from 'negotiator';
import { etagMatches, JSON_TYPE } from './http-conditional.ts';
import type { Headers, PreparedResponse } from './types.ts';

/** Keyed responses: a shared cache must not keep them, and a client revalidates each time. */
export const KEYED_CACHE_CONTROL = 'private, no-cache';
/** Public snapshot responses change with a bake under the same URL: always revalidate. */
export const PUBLIC_CACHE_CONTROL = 'public, no-cache';

type Encoding = 'br' | 'gzip' | 'identity';
const ENCODINGS: Encoding[] = ['br', 'gzip', 'identity'];
const ETAG_SUFFIX: Record<Encoding, string> = { br: '-br', gzip: '-gz', identity: '' };

/**
 * How hard to compress. `once`: a response fixed per bake (the room list, slots, openapi.json), worth
 * the best ratio. `cached`: a response per query (artwork pages), made anew for each new query, so
 * cheaper settings bound what a stream of distinct queries can cost.
 */
type Effort = 'once' | 'cached';
const BROTLI_QUALITY: Record<Effort, number> = { once: zlib.BROTLI_MAX_QUALITY, cached: 5 };
const GZIP_LEVEL: Record<Effort, number> = { once: 9, cached: 6 };

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);

/**
 * An Accept-Encoding longer than this is treated as absent (issue 43): no browser sends one over a
 * few dozen bytes, and parsing a 12 KB one on every request cost more CPU than the response.
 */
const MAX_ACCEPT_ENCODING = 1024;
/** Accept-Encoding header → the encoding to send; remembered per distinct header (few in practice; bounded: 256 × 1 KB). */
const chosen = new LRUCache<string, Encoding>({ max: 256 });

/** The encoding a request prefers among ours: br over gzip on a tie, identity without the header (or with one over 1 KB). */
export function negotiateEncoding(acceptEncoding: string | undefined): Encoding {
  if (!acceptEncoding || acceptEncoding.length > MAX_ACCEPT_ENCODING) return 'identity';
  let encoding = chosen.get(acceptEncoding);
  if (encoding === undefined) {
    const negotiator = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } });
    // negotiator 1.x takes a preference order for ties; @types/negotiator predates it.
    const pick = (negotiator.encoding as (available: string[], options: { preferred: string[] }) => string | undefined).call(
      negotiator,
      ENCODINGS,
      { preferred: ENCODINGS },
    );
    encoding = (pick as Encoding | undefined) ?? 'identity';
    chosen.set(acceptEncoding, encoding);
  }
  return encoding;
}

/** One representation: its 200 and its 304, headers built once. */
interface Representation {
  ok: PreparedResponse;
  notModified: PreparedResponse;
  etag: string;
}

function representation(body: Buffer, etag: string, encoding: Encoding, cacheControl: string): Representation {
  const validators: Headers = { ETag: etag, 'Cache-Control': cacheControl, Vary: 'Accept-Encoding' };
  const headers: Headers = {
    'Content-Type': JSON_TYPE,
    'Content-Length': String(body.length),
    ...(encoding === 'identity' ? {} : { 'Content-Encoding': encoding }),
    ...validators,
  };
  return { etag, ok: { status: 200, headers, body }, notModified: { status: 304, headers: validators, body: null } };
}

/** A representation's 200, or its 304 when the request's If-None-Match names it. */
const responseOf = (r: Representation, ifNoneMatch: string | undefined): PreparedResponse =>
  etagMatches(ifNoneMatch, r.etag) ? r.notModified : r.ok;

export interface SnapshotResponseOptions {
  cacheControl: string;
  effort?: Effort;
}

/** A JSON response of the snapshot in all its representations. */
export class SnapshotResponse {
  /** The identity body (tests and callers that need the bytes). */
  readonly body: Buffer;
  /** The identity representation's strong ETag. */
  readonly etag: string;
  private readonly identity: Representation;
  private readonly encoded = new Map<Encoding, Promise<Representation>>();

  /** The response of a JSON value. */
  static of(value: unknown, options: SnapshotResponseOptions): SnapshotResponse {
    return new SnapshotResponse(Buffer.from(JSON.stringify(value)), options);
  }

  /** `body`: serialized JSON. */
  constructor(
    body: Buffer,
    private readonly options: SnapshotResponseOptions,
  ) {
    this.body = body;
    this.etag = `"${createHash('sha256').update(this.body).digest('base64url').slice(0, 32)}"`;
    this.identity = representation(this.body, this.etag, 'identity', options.cacheControl);
  }

  /** The response to this request: its encoding negotiated, 304 when its ETag matches If-None-Match. */
  async responseTo(req: IncomingMessage): Promise<PreparedResponse> {
    const encoding = negotiateEncoding(req.headers['accept-encoding']);
    const chosen = encoding === 'identity' ? this.identity : await this.representation(encoding);
    return responseOf(chosen, req.headers['if-none-match']);
  }

  /** The representation in this encoding, compressed on first use; identity when encoding saves nothing. */
  private representation(encoding: 'br' | 'gzip'): Promise<Representation> {
    let found = this.encoded.get(encoding);
    if (found === undefined) {
      const effort = this.options.effort ?? 'once';
      const compressing =
        encoding === 'br'
          ? brotli(this.body, {
              params: { [zlib.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY[effort], [zlib.BROTLI_PARAM_SIZE_HINT]: this.body.length },
            })
          : gzipped(this.body, { level: GZIP_LEVEL[effort] });
      const etag = `${this.etag.slice(0, -1)}${ETAG_SUFFIX[encoding]}"`;
      found = compressing.then(
        (compressed) =>
          compressed.length < this.body.length ? representation(compressed, etag, encoding, this.options.cacheControl) : this.identity,
        () => this.identity, // zlib failing on a buffer is not expected; identity is always a right response
      );
      this.encoded.set(encoding, found);
    }
    return found;
  }
}
