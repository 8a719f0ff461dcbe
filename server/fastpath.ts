/**
 * The fast path: a raw node:http layer in front of Koa for what a bake makes immutable — the
 * content-addressed files (`/files/<sha256>.<ext>`), baked slot data (`/v1/rooms/{id}/slots`) and the
 * keyed content reads (collections, artworks, rooms), whose bodies are serialized once per bake.
 * Bodies are pre-serialized and header sets precomputed (per file; per snapshot for slot data,
 * rebuilt when a new bake is installed), so a hit costs a URL match, a map lookup and one write.
 *
 * It must be indistinguishable from the Koa routes that serve the same URLs, which use the same
 * helpers and body functions: X-Request-Id, CORS, ETag/304, HEAD, Range for files, key checks and
 * the per-key limit with its headers, the error envelope, the access log. Whatever it does not fully
 * handle — query strings on files (image transforms), other methods (OPTIONS preflights, 405s),
 * encoded or unusual paths, rooms without slot data — it leaves to Koa by returning false, before
 * any key is checked or counted.
 */
import { promises as fs } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream';
import type { Logger } from 'pino';
import { contentTypeOf, FILE_EXTENSIONS, FILE_NAME_PATTERN } from '../artifacts/format.ts';
import type { FastPathHandler } from './app.ts';
import { type ContentStore, type ContentSnapshot, type FrozenBody, perSnapshot } from './content.ts';
import { envelope, HttpError, notFound } from './errors.ts';
import { authenticate, keyFromHeaders } from './middleware/auth.ts';
import { CORS_HEADERS } from './middleware/cors.ts';
import { FILE_RESPONSE_HEADER_LIST, FILE_RESPONSE_HEADERS, FILES_PATH_PREFIX } from './middleware/file-headers.ts';
import { hitKeyLimit, KEY_LIMIT, keyLimitExceeded, type RateDecision, type RateLimitStore } from './middleware/rate-limit.ts';
import { requestIdOf } from './middleware/request-id.ts';
import type { KeyStore } from './state/keys.ts';

export const IMMUTABLE_CACHE_CONTROL = 'public, max-age=31536000, immutable';
/** Slot data changes with a bake under the same URL: always revalidate (a 304 costs almost nothing). */
export const SLOTS_CACHE_CONTROL = 'public, no-cache';
export const JSON_TYPE = 'application/json; charset=utf-8';

// ---------------------------------------------------------------------------------------------
// Conditional and range requests (shared by the fast path and the Koa routes)

/** If-None-Match against a strong ETag (weak comparison, as RFC 9110 prescribes for this header). */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  for (const candidate of ifNoneMatch.split(',')) {
    const tag = candidate.trim();
    if (tag === '*' || tag === etag || (tag.startsWith('W/') && tag.slice(2) === etag)) return true;
  }
  return false;
}

export interface ByteRange {
  start: number;
  end: number;
}

/**
 * One `bytes=` range of a body of `size` bytes. Null means "serve the whole body": no header, a
 * syntactically invalid one, or several ranges (RFC 9110 lets a server ignore those).
 */
export function parseRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | null {
  if (!header) return null;
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!match) return null;
  const [, first, last] = match as unknown as [string, string, string];
  if (first === '' && last === '') return null;
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return null;
  if (!(start < size)) return 'unsatisfiable';
  return { start, end: last === '' ? size - 1 : Math.min(Number(last), size - 1) };
}

// ---------------------------------------------------------------------------------------------
// Files: content-addressed, immutable, small ones kept in memory

export interface StoredFile {
  path: string;
  size: number;
  etag: string;
  /** Headers of a full 200 answer (type, length, validators, caching). */
  full: Readonly<Record<string, string>>;
  /** Headers of a 304 answer. */
  notModified: Readonly<Record<string, string>>;
  /** The bytes when the file is small enough to keep in memory; null: streamed from disk. */
  data: Buffer | null;
}

export interface FileSlice extends ByteRange {
  path: string;
}

export interface FileAnswer {
  status: 200 | 206 | 304;
  headers: Readonly<Record<string, string>>;
  /** null for HEAD and 304. */
  body: Buffer | FileSlice | null;
}

export interface ArtifactFilesLimits {
  /** Total bytes of file contents kept in memory. */
  memoryBytes: number;
  /** Files up to this size are kept in memory; larger ones are streamed. */
  maxInMemoryFile: number;
  /** How many streamed files' metadata is remembered. */
  maxStreamedEntries: number;
}

const DEFAULT_LIMITS: ArtifactFilesLimits = { memoryBytes: 64 * 1024 * 1024, maxInMemoryFile: 1024 * 1024, maxStreamedEntries: 4096 };

/**
 * Lookup of artifact files. Content-addressed files never change, so what was read once stays valid:
 * small files are served from a bounded in-memory LRU, large ones from disk with remembered metadata.
 */
export class ArtifactFiles {
  private readonly inMemory = new Map<string, StoredFile>();
  private inMemoryBytes = 0;
  private readonly streamed = new Map<string, StoredFile>();
  private readonly loading = new Map<string, Promise<StoredFile | null>>();
  readonly limits: ArtifactFilesLimits;

  /** DATA_DIR/files (normalized): the only directory public names resolve into. */
  readonly filesDir: string;

  constructor(filesDir: string, limits: Partial<ArtifactFilesLimits> = {}) {
    this.filesDir = resolve(filesDir);
    this.limits = { ...DEFAULT_LIMITS, ...limits };
  }

  /**
   * Whether `name` can be a public artifact name: `<sha256>.<ext>` with a known extension. Nothing
   * else — no separators, no dots beyond the extension, no encoding — so no other path is reachable.
   */
  static isPublicName(name: string): boolean {
    const match = FILE_NAME_PATTERN.exec(name);
    return match !== null && Object.hasOwn(FILE_EXTENSIONS, match[2]!);
  }

  /** The file behind a public name if it is already known (no I/O). */
  cached(name: string): StoredFile | undefined {
    return this.known(this.pathOf(name));
  }

  /** The file behind a public name, or null when there is none. */
  byName(name: string): Promise<StoredFile | null> {
    if (!ArtifactFiles.isPublicName(name)) return Promise.resolve(null);
    const ext = name.slice(name.lastIndexOf('.') + 1);
    return this.load(this.pathOf(name), contentTypeOf(ext), `"${name.slice(0, name.indexOf('.'))}"`);
  }

  /** A public name is a single plain segment, so plain concatenation is its path (no normalizing). */
  private pathOf(name: string): string {
    return `${this.filesDir}${sep}${name}`;
  }

  /** A file at an absolute path chosen by the server (e.g. an image variant), or null when missing. */
  load(path: string, contentType: string, etag: string): Promise<StoredFile | null> {
    const hit = this.known(path);
    if (hit) return Promise.resolve(hit);
    let pending = this.loading.get(path);
    if (!pending) {
      pending = this.read(path, contentType, etag).finally(() => this.loading.delete(path));
      this.loading.set(path, pending);
    }
    return pending;
  }

  /** Open the bytes of a slice for streaming; null when the file disappeared. */
  async open(slice: FileSlice): Promise<Readable | null> {
    const handle = await fs.open(slice.path, 'r').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    });
    if (!handle) {
      this.streamed.delete(slice.path);
      return null;
    }
    return handle.createReadStream({ start: slice.start, end: slice.end, highWaterMark: 256 * 1024 });
  }

  /** Forget a file (e.g. a cached image variant that was evicted from disk). */
  forget(path: string): void {
    const entry = this.inMemory.get(path);
    if (entry) {
      this.inMemory.delete(path);
      this.inMemoryBytes -= entry.size;
    }
    this.streamed.delete(path);
  }

  get memoryUsed(): number {
    return this.inMemoryBytes;
  }

  private known(path: string): StoredFile | undefined {
    const entry = this.inMemory.get(path);
    if (entry) {
      // Refresh the LRU position.
      this.inMemory.delete(path);
      this.inMemory.set(path, entry);
      return entry;
    }
    return this.streamed.get(path);
  }

  private async read(path: string, contentType: string, etag: string): Promise<StoredFile | null> {
    const stat = await fs.stat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
      throw err;
    });
    if (!stat?.isFile()) return null;
    const notModified = { ETag: etag, 'Cache-Control': IMMUTABLE_CACHE_CONTROL, ...FILE_RESPONSE_HEADERS };
    const headersFor = (size: number) => ({
      'Content-Type': contentType,
      'Content-Length': String(size),
      'Accept-Ranges': 'bytes',
      ...notModified,
    });
    if (stat.size <= this.limits.maxInMemoryFile) {
      const data = await fs.readFile(path).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return null;
        throw err;
      });
      if (!data) return null;
      const file: StoredFile = { path, size: data.length, etag, full: headersFor(data.length), notModified, data };
      this.remember(file);
      return file;
    }
    const file: StoredFile = { path, size: stat.size, etag, full: headersFor(stat.size), notModified, data: null };
    if (this.streamed.size >= this.limits.maxStreamedEntries) this.streamed.delete(this.streamed.keys().next().value!);
    this.streamed.set(path, file);
    return file;
  }

  private remember(file: StoredFile): void {
    if (file.size > this.limits.memoryBytes) return;
    this.forget(file.path);
    this.inMemory.set(file.path, file);
    this.inMemoryBytes += file.size;
    for (const [path, old] of this.inMemory) {
      if (this.inMemoryBytes <= this.limits.memoryBytes) break;
      this.inMemory.delete(path);
      this.inMemoryBytes -= old.size;
    }
  }
}

const single = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

/** The answer for a GET/HEAD of a stored file: 304, 206 for one satisfiable range, else 200. Throws 416. */
export function answerFile(file: StoredFile, method: string, headers: IncomingHttpHeaders): FileAnswer {
  if (etagMatches(headers['if-none-match'], file.etag)) return { status: 304, headers: file.notModified, body: null };
  const head = method === 'HEAD';
  // If-Range: a range applies only to the representation the client already has part of.
  const ifRange = single(headers['if-range']);
  const range = ifRange !== undefined && ifRange.trim() !== file.etag ? null : parseRange(headers.range, file.size);
  if (range === 'unsatisfiable') {
    throw new HttpError(416, 'RANGE_NOT_SATISFIABLE', `Range not satisfiable (the file has ${file.size} bytes)`, {
      'Content-Range': `bytes */${file.size}`,
    });
  }
  if (range) {
    const length = range.end - range.start + 1;
    return {
      status: 206,
      headers: { ...file.full, 'Content-Length': String(length), 'Content-Range': `bytes ${range.start}-${range.end}/${file.size}` },
      body: head ? null : file.data ? file.data.subarray(range.start, range.end + 1) : { path: file.path, ...range },
    };
  }
  return {
    status: 200,
    headers: file.full,
    body: head ? null : (file.data ?? { path: file.path, start: 0, end: file.size - 1 }),
  };
}

// ---------------------------------------------------------------------------------------------
// Slot data: one pre-serialized body per room and bake

export interface PreparedJson {
  frozen: FrozenBody;
  full: Readonly<Record<string, string>>;
  notModified: Readonly<Record<string, string>>;
}

/** Headers of a slot-data answer; the Koa route sets the same ones. */
export const prepareSlotBody = (frozen: FrozenBody): PreparedJson => {
  const notModified = { ETag: frozen.etag, 'Cache-Control': SLOTS_CACHE_CONTROL };
  return {
    frozen,
    notModified,
    full: { 'Content-Type': JSON_TYPE, 'Content-Length': String(frozen.body.length), ...notModified },
  };
};

export const preparedSlotBodies = perSnapshot(
  (snapshot: ContentSnapshot) => new Map([...snapshot.slotBodies].map(([id, frozen]) => [id, prepareSlotBody(frozen)])),
);

// ---------------------------------------------------------------------------------------------
// The layer: raw responses with the same envelope, headers and log line as the Koa stack

const SLOTS_PATH = /^\/v1\/rooms\/([1-9]\d{0,15})\/slots(?:\?.*)?$/;
const FILES_PREFIX = FILES_PATH_PREFIX;

/** Response headers as a flat `[name, value, …]` list: node writes those without copying them. */
type HeaderList = readonly string[];

const CORS_LIST: HeaderList = Object.entries(CORS_HEADERS).flat();
const withCorsCache = new WeakMap<object, HeaderList>();
/**
 * A header set with the CORS headers as a flat list, built once per precomputed set. Per-request
 * object spreads are avoided on purpose: V8 makes them microseconds slow, more than the rest of a hit.
 */
function withCors(headers: Readonly<Record<string, string>>): HeaderList {
  let list = withCorsCache.get(headers);
  if (!list) {
    list = [...CORS_LIST, ...Object.entries(headers).flat()];
    withCorsCache.set(headers, list);
  }
  return list;
}

/** Serialized envelopes of (shared) error instances such as the 401s and the 429. */
const envelopes = new WeakMap<HttpError, Buffer>();

class RawExchange {
  readonly requestId: string;
  private readonly started = performance.now();

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    private readonly log: Logger,
  ) {
    this.requestId = requestIdOf(req.headers['x-request-id']);
  }

  /** `headers` must include the CORS headers (see withCors); the request id is added here. */
  send(status: number, headers: HeaderList, body: Buffer | null): void {
    this.res.writeHead(status, ['X-Request-Id', this.requestId, ...headers]);
    this.res.end(this.req.method === 'HEAD' ? undefined : body ?? undefined);
    this.logLine(status);
  }

  stream(status: number, headers: HeaderList, body: Readable): void {
    this.res.writeHead(status, ['X-Request-Id', this.requestId, ...headers]);
    pipeline(body, this.res, () => undefined);
    this.logLine(status);
  }

  /** The error envelope, as the errors middleware writes it (with `extra` headers, e.g. rate limits). */
  fail(err: unknown, extra: HeaderList = []): void {
    if (this.res.headersSent) {
      this.res.destroy();
      return;
    }
    let error: HttpError;
    if (err instanceof HttpError) error = err;
    else {
      this.log.error({ err, requestId: this.requestId, method: this.req.method, url: this.req.url }, 'unhandled error');
      error = new HttpError(500, 'INTERNAL', 'Internal server error');
    }
    let body = envelopes.get(error);
    if (!body) {
      body = Buffer.from(JSON.stringify(envelope(error.message, error.code)));
      envelopes.set(error, body);
    }
    const headers = [...CORS_LIST, ...extra, ...Object.entries(error.headers).flat(), 'Content-Type', JSON_TYPE, 'Content-Length', String(body.length)];
    this.send(error.status, headers, body);
  }

  private logLine(status: number): void {
    if (!this.log.isLevelEnabled('info')) return;
    const path = this.req.url!.split('?', 1)[0];
    const ms = Math.round((performance.now() - this.started) * 100) / 100;
    this.log.info({ requestId: this.requestId, method: this.req.method, path, status, ms, fast: true }, 'request');
  }
}

const isReadMethod = (method: string | undefined) => method === 'GET' || method === 'HEAD';

/**
 * A fast-path handler that cannot take the process down: an exception thrown while answering (a
 * SQLite error during a key check, say) becomes the same generic 500 envelope Koa would send.
 */
function guarded(log: Logger, handler: FastPathHandler): FastPathHandler {
  return (req, res) => {
    try {
      return handler(req, res);
    } catch (err) {
      new RawExchange(req, res, log).fail(err);
      return true;
    }
  };
}

/** `GET|HEAD /v1/rooms/{id}/slots` for rooms with baked slot data; anything else goes to Koa. */
export function slotsFastPath(content: ContentStore, log: Logger): FastPathHandler {
  // Precompute each new bake's bodies and headers as soon as it is installed, not on first request.
  content.onChange((snapshot) => void preparedSlotBodies(snapshot));
  preparedSlotBodies(content.snapshot);
  return guarded(log, (req, res) => {
    const url = req.url;
    if (url === undefined || !url.startsWith('/v1/rooms/') || !isReadMethod(req.method)) return false;
    const match = SLOTS_PATH.exec(url);
    const prepared = match ? preparedSlotBodies(content.snapshot).get(Number(match[1])) : undefined;
    if (!prepared) return false;
    const exchange = new RawExchange(req, res, log);
    if (etagMatches(req.headers['if-none-match'], prepared.frozen.etag)) exchange.send(304, withCors(prepared.notModified), null);
    else exchange.send(200, withCors(prepared.full), prepared.frozen.body);
    return true;
  });
}

/** `GET|HEAD /files/<sha256>.<ext>` without a query string; transforms and the rest go to Koa. */
export function filesFastPath(files: ArtifactFiles, log: Logger): FastPathHandler {
  const respond = (exchange: RawExchange, file: StoredFile): void => {
    let answer: FileAnswer;
    try {
      answer = answerFile(file, exchange.req.method!, exchange.req.headers);
    } catch (err) {
      exchange.fail(err, FILE_RESPONSE_HEADER_LIST);
      return;
    }
    if (answer.body === null || Buffer.isBuffer(answer.body)) {
      exchange.send(answer.status, withCors(answer.headers), answer.body);
      return;
    }
    void files.open(answer.body).then((stream) => {
      if (!stream) exchange.fail(notFound(), FILE_RESPONSE_HEADER_LIST);
      else exchange.stream(answer.status, withCors(answer.headers), stream);
    }, (err: unknown) => exchange.fail(err, FILE_RESPONSE_HEADER_LIST));
  };
  return guarded(log, (req, res) => {
    const url = req.url;
    if (url === undefined || !url.startsWith(FILES_PREFIX) || !isReadMethod(req.method)) return false;
    const name = url.slice(FILES_PREFIX.length);
    if (!ArtifactFiles.isPublicName(name)) return false;
    const exchange = new RawExchange(req, res, log);
    const hit = files.cached(name);
    if (hit) respond(exchange, hit);
    else {
      files.byName(name).then(
        (file) => (file ? respond(exchange, file) : exchange.fail(notFound(), FILE_RESPONSE_HEADER_LIST)),
        (err: unknown) => exchange.fail(err, FILE_RESPONSE_HEADER_LIST),
      );
    }
    return true;
  });
}

// ---------------------------------------------------------------------------------------------
// Keyed reads of the content snapshot

/**
 * A keyed GET answered from the content snapshot. Given the path and query it returns undefined —
 * "not exactly what my Koa route would answer the same way; let Koa have it" — or the function that
 * produces the pre-serialized body from a snapshot (it may throw an HttpError, e.g. 404). The route
 * module uses the same body functions in its Koa handler, so both answers agree by construction.
 */
export type SnapshotRead = (pathname: string, search: string) => ((snapshot: ContentSnapshot) => Buffer) | undefined;

/**
 * The first value of each parameter of a raw query string (no `?`), decoded as Koa decodes it
 * (URLSearchParams): what a Koa route's query schema sees (`?page=2&page=3` reads page 2).
 */
export function firstQueryValues(search: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(search)) if (!Object.hasOwn(out, name)) out[name] = value;
  return out;
}

export interface KeyedReadDeps {
  keys: KeyStore;
  limiter: RateLimitStore;
  content: ContentStore;
  log: Logger;
}

/**
 * Keyed snapshot reads under `prefix` without Koa: the same authentication (`authenticate`), the same
 * per-key limit (`hitKeyLimit`, headers on every answer, 429 with Retry-After) and the same envelope.
 * A request is taken only when `read` claims it, before its key is checked or counted; everything
 * else (other methods, unusual paths or queries) reaches Koa untouched.
 */
export function keyedReadsFastPath({ keys, limiter, content, log }: KeyedReadDeps, prefix: string, read: SnapshotRead): FastPathHandler {
  const answer = (exchange: RawExchange, decision: RateDecision, body: (snapshot: ContentSnapshot) => Buffer): void => {
    const remaining = String(decision.remaining);
    const limitHeaders = ['X-RateLimit-Limit', LIMIT, 'X-RateLimit-Remaining', remaining];
    if (!decision.allowed) return exchange.fail(keyLimitExceeded(), limitHeaders);
    let bytes: Buffer;
    try {
      bytes = body(content.snapshot);
    } catch (err) {
      return exchange.fail(err, limitHeaders);
    }
    exchange.send(200, [...CORS_LIST, 'X-RateLimit-Limit', LIMIT, 'X-RateLimit-Remaining', remaining, 'Content-Type', JSON_TYPE, 'Content-Length', String(bytes.length)], bytes);
  };
  const limitThenAnswer = (exchange: RawExchange, keyId: number | HttpError, body: (snapshot: ContentSnapshot) => Buffer): void => {
    if (keyId instanceof HttpError) return exchange.fail(keyId);
    const decision = hitKeyLimit(limiter, keyId);
    if (decision instanceof Promise) decision.then((d) => answer(exchange, d, body), (err: unknown) => exchange.fail(err));
    else answer(exchange, decision, body);
  };
  return guarded(log, (req, res) => {
    const url = req.url;
    if (url === undefined || !url.startsWith(prefix) || !isReadMethod(req.method)) return false;
    // Characters that make Koa's URL parsing take its slow, normalizing road: leave those to Koa.
    if (UNUSUAL_URL.test(url)) return false;
    const mark = url.indexOf('?');
    const body = read(mark < 0 ? url : url.slice(0, mark), mark < 0 ? '' : url.slice(mark + 1));
    if (!body) return false;
    const exchange = new RawExchange(req, res, log);
    const keyId = authenticate(keys, keyFromHeaders(single(req.headers['x-api-key']), req.headers.authorization));
    if (keyId instanceof Promise) keyId.then((id) => limitThenAnswer(exchange, id, body), (err: unknown) => exchange.fail(err));
    else limitThenAnswer(exchange, keyId, body);
    return true;
  });
}

const LIMIT = String(KEY_LIMIT.limit);
const UNUSUAL_URL = /[\t\n\f\r #\u00a0\ufeff]/;
