/**
 * The artifact file store: content-addressed files under DATA_DIR/files (and server-chosen paths such
 * as image variants). Content-addressed files never change, so what was read once stays valid: small
 * files are kept in a bounded in-memory LRU, large ones are streamed from disk with their metadata
 * remembered (bounded too). `planFileResponse` and `fileResponse` turn a file and a request into the response
 * the files route sends.
 */
import { promises as fs } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import Negotiator from 'negotiator';
import {
  CONTENT_ENCODINGS,
  type ContentEncoding,
  contentTypeOf,
  FILE_EXTENSIONS,
  FILE_NAME_PATTERN,
  type FileExt,
  PRECOMPRESSED_EXTENSIONS,
} from '../artifacts/format.ts';
import { HttpError, notFound } from './errors.ts';
import { type ByteRange, etagMatches, IMMUTABLE_CACHE_CONTROL, parseRange } from './http-conditional.ts';
import type { PreparedResponse } from './types.ts';

export interface StoredFile {
  path: string;
  size: number;
  etag: string;
  /** Headers of a full 200 response (type, length, validators, caching). */
  full: Readonly<Record<string, string>>;
  /** Headers of a 304 response. */
  notModified: Readonly<Record<string, string>>;
  /** The bytes when the file is small enough to keep in memory; null: streamed from disk. */
  data: Buffer | null;
  /**
   * Its precompressed representations (the bake's `.br` / `.gz` siblings), each with its own strong
   * ETag and headers; empty when it has none.
   */
  encoded: ReadonlyArray<{ encoding: ContentEncoding; file: StoredFile }>;
}

export interface FileSlice extends ByteRange {
  path: string;
}

export interface FileResponsePlan {
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

/** Bytes a stored file keeps in memory, its precompressed representations included. */
const bytesHeld = (file: StoredFile): number => (file.data?.length ?? 0) + file.encoded.reduce((n, e) => n + (e.file.data?.length ?? 0), 0);

const DEFAULT_LIMITS: ArtifactFilesLimits = { memoryBytes: 64 * 1024 * 1024, maxInMemoryFile: 1024 * 1024, maxStreamedEntries: 4096 };

/**
 * Lookup of artifact files. Content-addressed files never change, so what was read once stays valid:
 * small files are served from a bounded in-memory LRU, large ones from disk with remembered metadata.
 */
export class ArtifactFiles {
  /** Small files with their bytes, bounded by total size. */
  private readonly inMemory: LRUCache<string, StoredFile>;
  /** Large files' metadata (their bytes stay on disk), bounded by count. */
  private readonly streamed: LRUCache<string, StoredFile>;
  private readonly loading = new Map<string, Promise<StoredFile | null>>();
  readonly limits: ArtifactFilesLimits;

  /** DATA_DIR/files (normalized): the only directory public names resolve into. */
  readonly filesDir: string;

  constructor(filesDir: string, limits: Partial<ArtifactFilesLimits> = {}) {
    this.filesDir = resolve(filesDir);
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    // An empty file weighs 1: lru-cache sizes are positive.
    this.inMemory = new LRUCache({ maxSize: this.limits.memoryBytes, sizeCalculation: (file) => Math.max(1, bytesHeld(file)) });
    this.streamed = new LRUCache({ max: this.limits.maxStreamedEntries });
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
    return this.load(
      this.pathOf(name),
      contentTypeOf(ext),
      `"${name.slice(0, name.indexOf('.'))}"`,
      PRECOMPRESSED_EXTENSIONS.has(ext as FileExt),
    );
  }

  /** A public name is a single plain segment, so plain concatenation is its path (no normalizing). */
  private pathOf(name: string): string {
    return `${this.filesDir}${sep}${name}`;
  }

  /**
   * A file at an absolute path chosen by the server (e.g. an image variant), or null when missing.
   * `withEncoded`: look for its precompressed siblings too.
   */
  load(path: string, contentType: string, etag: string, withEncoded = false): Promise<StoredFile | null> {
    const hit = this.known(path);
    if (hit) return Promise.resolve(hit);
    let pending = this.loading.get(path);
    if (!pending) {
      pending = this.read(path, contentType, etag, withEncoded).finally(() => this.loading.delete(path));
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
    this.inMemory.delete(path);
    this.streamed.delete(path);
  }

  get memoryUsed(): number {
    return this.inMemory.calculatedSize;
  }

  private known(path: string): StoredFile | undefined {
    return this.inMemory.get(path) ?? this.streamed.get(path);
  }

  private async read(path: string, contentType: string, etag: string, withEncoded: boolean): Promise<StoredFile | null> {
    // The siblings first: the bake writes them before their file, so a file seen has its siblings.
    let encoded = withEncoded ? await this.readEncoded(path, contentType, etag) : [];
    // (nosniff and the sandbox CSP are the /files route's headers, on every response of it)
    const vary: Record<string, string> = encoded.length ? { Vary: 'Accept-Encoding' } : {};
    const file = await readOne(
      path,
      this.limits.maxInMemoryFile,
      { 'Content-Type': contentType, 'Accept-Ranges': 'bytes' },
      { ETag: etag, ...vary },
    );
    if (!file) return null;
    // A streamed file's entry is bounded by count, not bytes: its siblings stream too.
    if (!file.data) encoded = encoded.map((e) => ({ ...e, file: { ...e.file, data: null } }));
    const stored: StoredFile = { ...file, encoded };
    if (stored.data && bytesHeld(stored) <= this.limits.memoryBytes) this.inMemory.set(path, stored);
    else if (!stored.data) this.streamed.set(path, stored);
    return stored;
  }

  /**
   * The `.br` / `.gz` siblings of a file. Their bytes stay in memory only when they are small (the
   * file's own entry accounts for them); a Range request never gets them, so they need no ranges.
   */
  private async readEncoded(path: string, contentType: string, etag: string): Promise<StoredFile['encoded']> {
    const found = await Promise.all(
      CONTENT_ENCODINGS.map(async ({ encoding, suffix }) => {
        const headers = { 'Content-Type': contentType, 'Content-Encoding': encoding };
        const file = await readOne(`${path}.${suffix}`, this.limits.maxInMemoryFile, headers, {
          ETag: `${etag.slice(0, -1)}.${suffix}"`,
          Vary: 'Accept-Encoding',
        });
        return file ? { encoding, file: { ...file, encoded: [] } } : null;
      }),
    );
    return found.filter((e) => e !== null);
  }
}

/** One file's metadata and headers, and its bytes when it is small enough to keep; null when missing. */
async function readOne(
  path: string,
  maxInMemory: number,
  typeHeaders: Record<string, string>,
  validators: Record<string, string>,
): Promise<Omit<StoredFile, 'encoded'> | null> {
  const stat = await fs.stat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
    throw err;
  });
  if (!stat?.isFile()) return null;
  const notModified = { ...validators, 'Cache-Control': IMMUTABLE_CACHE_CONTROL };
  const headersFor = (size: number) => ({ ...typeHeaders, 'Content-Length': String(size), ...notModified });
  if (stat.size > maxInMemory)
    return { path, size: stat.size, etag: validators.ETag!, full: headersFor(stat.size), notModified, data: null };
  const data = await fs.readFile(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (!data) return null;
  return { path, size: data.length, etag: validators.ETag!, full: headersFor(data.length), notModified, data };
}

const single = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

/** Best first when the client rates them equally: brotli is the smaller. */
const ENCODING_PREFERENCE = [...CONTENT_ENCODINGS.map((e) => e.encoding), 'identity'];

/**
 * The representation a request gets (decisions, "Clients of the HTTP API"): the encoding its
 * Accept-Encoding prefers among those the file has, br before gzip on a tie; identity for a Range
 * request, or when the client accepts none of them.
 */
function representationFor(file: StoredFile, headers: IncomingHttpHeaders): StoredFile {
  if (!file.encoded.length || headers.range !== undefined) return file;
  const available = [...file.encoded.map((e) => e.encoding), 'identity'];
  // negotiator 1's `preferred` (ties go to the server's order) is missing from @types/negotiator 0.6.
  const negotiator = new Negotiator({ headers }) as unknown as {
    encodings(available: string[], options: { preferred: string[] }): string[];
  };
  const best = negotiator.encodings(available, { preferred: ENCODING_PREFERENCE })[0];
  return file.encoded.find((e) => e.encoding === best)?.file ?? file;
}

/**
 * The response plan for a GET/HEAD of a stored file in the representation the request negotiates: 304, 206
 * for one satisfiable range (identity), else 200. Throws 416.
 */
export function planFileResponse(stored: StoredFile, method: string, headers: IncomingHttpHeaders): FileResponsePlan {
  const file = representationFor(stored, headers);
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

/**
 * The response for a file response plan, its bytes opened for streaming when they stay on disk. The stream is
 * opened before anything is sent, so a file that vanished is a 404, not success headers and nothing.
 */
export async function fileResponse(files: ArtifactFiles, plan: FileResponsePlan): Promise<PreparedResponse> {
  if (plan.body === null || Buffer.isBuffer(plan.body)) return plan as PreparedResponse;
  const stream = await files.open(plan.body);
  if (!stream) throw notFound();
  return { status: plan.status, headers: plan.headers, body: stream };
}
