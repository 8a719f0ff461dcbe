/**
 * Source files of the bake: a local path (relative to the content directory) or an http(s) URL.
 *
 * - Remote files are downloaded once into `DATA_DIR/cache/blobs/<sha256>` and revalidated with
 *   conditional requests (ETag / Last-Modified), with a size cap, retries with exponential
 *   backoff on timeouts, network errors and 5xx, and an immediate clear error on other 4xx.
 * - Local files are hashed once: a bounded stat cache (path + size + mtime → sha256, persisted in
 *   `DATA_DIR/cache/stat-cache.json`) lets a no-op re-bake skip reading unchanged files.
 * - A .gltf brings its external buffers and images; they are resolved too, and the model's
 *   fingerprint covers them all.
 */
import { createHash } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import { dirname, isAbsolute, join, resolve as resolvePath } from 'node:path';
import { LRUCache } from 'lru-cache';
import { sha256, writeFileAtomic } from '../artifacts/store.ts';
import { causeOf, oneLine } from '../common/errors.ts';
import {
  BodyTooLarge,
  guardedGet,
  NetRefused,
  type NetPolicy,
  netPolicyFromEnv,
  RetriesExhausted,
  Transient,
  withRetries,
} from '../common/net.ts';
import { externalUris, isGlb, localResourcePath } from './gltf-io.ts';

/** A source that could not be fetched; one line for operators. */
export class FetchError extends Error {
  override name = 'FetchError';
}

export interface FetchOptions {
  /** Largest accepted file, in bytes. */
  maxBytes: number;
  /** Per attempt, covering the whole download. */
  timeoutMs: number;
  /** Attempts after the first, for timeouts, network errors, 408, 429 and 5xx. */
  retries: number;
  /** First backoff delay; doubles per retry. */
  backoffMs: number;
}

const DEFAULT_FETCH_OPTIONS: FetchOptions = { maxBytes: 512 * 1024 * 1024, timeoutMs: 60_000, retries: 3, backoffMs: 500 };

/** A source file available on the local disk, with its content hash. */
export interface ResolvedFile {
  /** As written in the content (path or URL). */
  ref: string;
  path: string;
  sha256: string;
  bytes: number;
}

/** A model with the external files a .gltf references (keyed by the URI as written in it). */
export interface ResolvedModel {
  main: ResolvedFile;
  resources: Record<string, ResolvedFile>;
  /** sha256 over the model and its resources: changes whenever any of them changes. */
  fingerprint: string;
}

const isRemote = (ref: string): boolean => /^https?:\/\//i.test(ref);

interface StatEntry {
  size: number;
  mtimeMs: number;
  sha256: string;
  /** When the hash was taken; a file modified within a second of that cannot be trusted by stat. */
  hashedAt: number;
  /** External URIs, for .gltf files. */
  uris?: string[];
}

interface RemoteEntry {
  sha256: string;
  bytes: number;
  etag?: string;
  lastModified?: string;
  uris?: string[];
}

async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const looksLikeGltfJson = (ref: string) => /\.gltf$/i.test(new URL(ref, 'file:///').pathname);

/** The local files of a resolved model: the main file and its external resources by URI. */
export const modelFiles = (model: ResolvedModel): { path: string; resources: Record<string, string> } => ({
  path: model.main.path,
  resources: Object.fromEntries(Object.entries(model.resources).map(([uri, f]) => [uri, f.path])),
});

export interface SourceResolverOptions {
  /** Relative paths are resolved against this directory (the content directory). */
  baseDir: string;
  /** `DATA_DIR/cache`. */
  cacheDir: string;
  fetch?: Partial<FetchOptions>;
  /** What may be fetched (default: BAKE_ALLOW_HOSTS and CONTENT_UPSTREAM_URL from the environment). */
  net?: NetPolicy;
  /** Bounds of the persisted indexes. */
  maxStatEntries?: number;
  maxRemoteEntries?: number;
}

/**
 * Resolves content references to local files with hashes. One per bake run; call `save()` at the
 * end to persist what was learnt (a crash only loses cache entries, never correctness).
 */
export class SourceResolver {
  private readonly fetchOptions: FetchOptions;
  private readonly net: NetPolicy;
  private readonly statCache: LRUCache<string, StatEntry>;
  private readonly remoteIndex: LRUCache<string, RemoteEntry>;
  private readonly inflight = new Map<string, Promise<ResolvedFile & { uris?: string[] }>>();
  private loaded = false;
  private dirty = false;

  constructor(private readonly options: SourceResolverOptions) {
    this.fetchOptions = { ...DEFAULT_FETCH_OPTIONS, ...options.fetch };
    this.net = options.net ?? netPolicyFromEnv();
    this.statCache = new LRUCache({ max: options.maxStatEntries ?? 20_000 });
    this.remoteIndex = new LRUCache({ max: options.maxRemoteEntries ?? 5_000 });
  }

  private get statCachePath() {
    return join(this.options.cacheDir, 'stat-cache.json');
  }
  private get remoteIndexPath() {
    return join(this.options.cacheDir, 'remote-index.json');
  }
  blobPath(hash: string): string {
    return join(this.options.cacheDir, 'blobs', hash);
  }

  private async load(): Promise<void> {
    if (this.loaded) return;
    this.loaded = true;
    const read = async <V extends {}>(path: string, into: LRUCache<string, V>) => {
      // A missing or damaged cache only costs re-hashing; it is never an error.
      const text = await fs.readFile(path, 'utf8').catch(() => null);
      if (!text) return;
      try {
        for (const [key, value] of Object.entries(JSON.parse(text) as Record<string, V>)) into.set(key, value);
      } catch {
        /* ignore a damaged cache */
      }
    };
    await Promise.all([read(this.statCachePath, this.statCache), read(this.remoteIndexPath, this.remoteIndex)]);
  }

  /**
   * Persist the caches (atomically) and drop downloaded blobs the bounded remote index no longer
   * names, so the download cache is bounded too.
   */
  async save(): Promise<void> {
    if (!this.dirty) return;
    // Least recently used first: loading sets them in that order, so the order survives.
    await writeFileAtomic(this.statCachePath, JSON.stringify(Object.fromEntries(this.statCache.rentries())));
    await writeFileAtomic(this.remoteIndexPath, JSON.stringify(Object.fromEntries(this.remoteIndex.rentries())));
    this.dirty = false;
    const kept = new Set([...this.remoteIndex.values()].map((e) => e.sha256));
    const blobs = await fs.readdir(join(this.options.cacheDir, 'blobs')).catch(() => [] as string[]);
    await Promise.all(
      blobs.filter((name) => /^[0-9a-f]{64}$/.test(name) && !kept.has(name)).map((name) => fs.rm(this.blobPath(name), { force: true })),
    );
  }

  /** Resolve one file (a preview image, or a model without looking at its resources). */
  async resolveFile(ref: string): Promise<ResolvedFile> {
    const { uris: _uris, ...file } = await this.resolveWithUris(ref, 'file');
    return file;
  }

  /** Resolve a model and, for a .gltf, every external file it references. */
  async resolveModel(ref: string): Promise<ResolvedModel> {
    const main = await this.resolveWithUris(ref, 'model');
    const resources: Record<string, ResolvedFile> = {};
    for (const uri of main.uris ?? []) {
      const { uris: _none, ...resource } = await this.resolveWithUris(await this.resourceRef(ref, main.path, uri), 'resource');
      resources[uri] = resource;
    }
    const { uris: _uris, ...file } = main;
    const names = Object.keys(resources).sort();
    const fingerprint = names.length ? sha256(JSON.stringify([file.sha256, ...names.map((n) => [n, resources[n]!.sha256])])) : file.sha256;
    return { main: file, resources, fingerprint };
  }

  /**
   * Where a model's external resource may be read: inside the model's own folder (local models) or
   * from the model's own origin (remote ones). Anything else fails the room with one line.
   */
  private async resourceRef(modelRef: string, modelPath: string, uri: string): Promise<string> {
    if (isRemote(modelRef)) {
      const hasScheme = /^[a-z][a-z0-9+.-]*:/i.test(uri);
      const target = hasScheme && !isRemote(uri) ? null : new URL(uri, modelRef);
      if (!target || target.origin !== new URL(modelRef).origin) {
        throw new FetchError(`${modelRef}: resource "${uri}" refused: a remote model's resources must come from its own origin`);
      }
      return target.href;
    }
    try {
      return await localResourcePath(dirname(modelPath), uri);
    } catch (err) {
      throw new FetchError(`${modelRef}: ${(err as Error).message}`);
    }
  }

  /** A model (with the external files it names), a file, or a model's resource (which must not be redirected off its origin). */
  private resolveWithUris(ref: string, kind: 'model' | 'file' | 'resource'): Promise<ResolvedFile & { uris?: string[] }> {
    const key = `${kind}:${ref}`;
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = (async () => {
        await this.load();
        const wantUris = kind === 'model';
        return isRemote(ref) ? this.fetchRemote(ref, wantUris, kind === 'resource') : this.hashLocal(ref, wantUris);
      })();
      this.inflight.set(key, pending);
    }
    return pending;
  }

  private async hashLocal(ref: string, wantUris: boolean): Promise<ResolvedFile & { uris?: string[] }> {
    const path = isAbsolute(ref) ? ref : resolvePath(this.options.baseDir, ref);
    const stat = await fs.stat(path).catch((err: NodeJS.ErrnoException) => {
      throw new FetchError(`${ref}: ${err.code === 'ENOENT' ? 'file not found' : oneLine(err)}`);
    });
    if (!stat.isFile()) throw new FetchError(`${ref}: not a file`);
    if (stat.size > this.fetchOptions.maxBytes)
      throw new FetchError(`${ref}: ${stat.size} bytes, over the ${this.fetchOptions.maxBytes}-byte limit`);
    const cached = this.statCache.get(path);
    if (
      cached &&
      cached.size === stat.size &&
      cached.mtimeMs === stat.mtimeMs &&
      stat.mtimeMs < cached.hashedAt - 1000 &&
      (!wantUris || cached.uris)
    ) {
      return { ref, path, sha256: cached.sha256, bytes: stat.size, uris: cached.uris };
    }
    const hashedAt = Date.now();
    let hash: string;
    let uris: string[] | undefined;
    if (wantUris && looksLikeGltfJson(ref)) {
      const bytes = await fs.readFile(path);
      hash = sha256(bytes);
      uris = gltfUris(bytes);
    } else {
      hash = await hashFile(path);
      if (wantUris) uris = [];
    }
    this.statCache.set(path, { size: stat.size, mtimeMs: stat.mtimeMs, sha256: hash, hashedAt, uris });
    this.dirty = true;
    return { ref, path, sha256: hash, bytes: stat.size, uris };
  }

  private async fetchRemote(url: string, wantUris: boolean, stayOnOrigin: boolean): Promise<ResolvedFile & { uris?: string[] }> {
    const known = this.remoteIndex.get(url);
    const haveBlob = known
      ? await fs.stat(this.blobPath(known.sha256)).then(
          (s) => s.size === known.bytes,
          () => false,
        )
      : false;
    const outcome = await withRetries(() => this.fetchOnce(url, haveBlob ? known : undefined, stayOnOrigin), this.fetchOptions).catch(
      (err: unknown) => {
        throw err instanceof RetriesExhausted ? new FetchError(`GET ${url} ${err.message}`) : err;
      },
    );
    const entry = outcome.kind === 'not-modified' ? known! : outcome.entry;
    if (wantUris && entry.uris === undefined) {
      entry.uris = gltfUris(await fs.readFile(this.blobPath(entry.sha256)));
    }
    this.remoteIndex.set(url, entry);
    this.dirty = true;
    return { ref: url, path: this.blobPath(entry.sha256), sha256: entry.sha256, bytes: entry.bytes, uris: entry.uris };
  }

  /** One attempt; throws Transient for what is worth retrying, FetchError for the rest. */
  private async fetchOnce(
    url: string,
    known: RemoteEntry | undefined,
    stayOnOrigin: boolean,
  ): Promise<{ kind: 'not-modified' } | { kind: 'fetched'; entry: RemoteEntry }> {
    const { timeoutMs, maxBytes } = this.fetchOptions;
    const headers: Record<string, string> = {};
    if (known?.etag) headers['if-none-match'] = known.etag;
    if (known?.lastModified) headers['if-modified-since'] = known.lastModified;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const timedOut = () => new Transient(`timed out after ${timeoutMs} ms`);
    try {
      let response: Response;
      try {
        response = await guardedGet(url, { policy: this.net, headers, signal: controller.signal, maxBytes, stayOnOrigin });
      } catch (err) {
        if (err instanceof NetRefused) throw new FetchError(err.message);
        throw controller.signal.aborted ? timedOut() : new Transient(`network error (${causeOf(err)})`);
      }
      if (response.status === 304 && known) return { kind: 'not-modified' };
      if (response.status >= 500 || response.status === 408 || response.status === 429) {
        await response.body?.cancel();
        throw new Transient(`${response.status} ${response.statusText}`.trim());
      }
      if (!response.ok) {
        await response.body?.cancel();
        throw new FetchError(`GET ${url} → ${response.status} ${response.statusText}`.trim());
      }
      const declared = Number(response.headers.get('content-length') ?? NaN);
      if (declared > maxBytes) {
        await response.body?.cancel();
        throw new FetchError(`GET ${url}: ${declared} bytes, over the ${maxBytes}-byte limit`);
      }
      let body: Buffer;
      try {
        body = Buffer.from(await response.arrayBuffer());
      } catch (err) {
        if (err instanceof BodyTooLarge) throw new FetchError(`GET ${url}: ${err.message}`);
        throw controller.signal.aborted ? timedOut() : new Transient(`download interrupted (${causeOf(err)})`);
      }
      const hash = sha256(body);
      const path = this.blobPath(hash);
      const existing = await fs.stat(path).catch(() => null);
      if (!existing || existing.size !== body.byteLength) await writeFileAtomic(path, body);
      const entry: RemoteEntry = { sha256: hash, bytes: body.byteLength };
      const etag = response.headers.get('etag');
      const lastModified = response.headers.get('last-modified');
      if (etag) entry.etag = etag;
      if (lastModified) entry.lastModified = lastModified;
      return { kind: 'fetched', entry };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** External URIs of a .gltf (none for a GLB or for bytes that are not JSON: the reader will say why). */
function gltfUris(bytes: Uint8Array): string[] {
  if (isGlb(bytes)) return [];
  try {
    return externalUris(JSON.parse(Buffer.from(bytes).toString('utf8')));
  } catch {
    return [];
  }
}
