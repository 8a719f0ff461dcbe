/**
 * The artifact file store: content-addressed files under DATA_DIR/files (and server-chosen paths such
 * as image variants). Content-addressed files never change, so what was read once stays valid: small
 * files are kept in a bounded in-memory LRU, large ones are streamed from disk with their metadata
 * remembered (bounded too). `answerFile` and `fileResponse` turn a file and a request into the answer
 * both the fast path and the Koa route send.
 */
import { promises as fs } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { LruMap } from '../common/lru.ts';
import { contentTypeOf, FILE_EXTENSIONS, FILE_NAME_PATTERN } from '../artifacts/format.ts';
import { HttpError, notFound } from './errors.ts';
import { type ByteRange, etagMatches, IMMUTABLE_CACHE_CONTROL, parseRange } from './http-conditional.ts';
import type { RawAnswer } from './types.ts';

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
  /** Small files with their bytes, bounded by total size. */
  private readonly inMemory: LruMap<string, StoredFile>;
  /** Large files' metadata (their bytes stay on disk), bounded by count. */
  private readonly streamed: LruMap<string, StoredFile>;
  private readonly loading = new Map<string, Promise<StoredFile | null>>();
  readonly limits: ArtifactFilesLimits;

  /** DATA_DIR/files (normalized): the only directory public names resolve into. */
  readonly filesDir: string;

  constructor(filesDir: string, limits: Partial<ArtifactFilesLimits> = {}) {
    this.filesDir = resolve(filesDir);
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.inMemory = new LruMap(this.limits.memoryBytes, { weigh: (file) => file.size });
    this.streamed = new LruMap(this.limits.maxStreamedEntries);
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
    this.inMemory.delete(path);
    this.streamed.delete(path);
  }

  get memoryUsed(): number {
    return this.inMemory.weight;
  }

  private known(path: string): StoredFile | undefined {
    return this.inMemory.get(path) ?? this.streamed.get(path);
  }

  private async read(path: string, contentType: string, etag: string): Promise<StoredFile | null> {
    const stat = await fs.stat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
      throw err;
    });
    if (!stat?.isFile()) return null;
    // (nosniff and the sandbox CSP are the /files route's headers, on every answer of it)
    const notModified = { ETag: etag, 'Cache-Control': IMMUTABLE_CACHE_CONTROL };
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
      if (file.size <= this.limits.memoryBytes) this.inMemory.set(path, file);
      return file;
    }
    const file: StoredFile = { path, size: stat.size, etag, full: headersFor(stat.size), notModified, data: null };
    this.streamed.set(path, file);
    return file;
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

/**
 * The answer for a file answer, its bytes opened for streaming when they stay on disk. The stream is
 * opened before anything is sent, so a file that vanished is a 404, not success headers and nothing.
 */
export async function fileResponse(files: ArtifactFiles, answer: FileAnswer): Promise<RawAnswer> {
  if (answer.body === null || Buffer.isBuffer(answer.body)) return answer as RawAnswer;
  const stream = await files.open(answer.body);
  if (!stream) throw notFound();
  return { status: answer.status, headers: answer.headers, body: stream };
}
