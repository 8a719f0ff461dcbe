/**
 * Artwork textures for the 3D viewer. Artwork images live on outside hosts that may send no CORS
 * headers and may be many megabytes; WebGL needs a same-origin, reasonably sized image. So the
 * server makes a texture variant (WebP, at most 1024 px on its longest side) of an artwork's still
 * image — only ever from the media URL the published snapshot holds for that artwork id, never a
 * URL a request supplies — fetched with size and time bounds, public addresses only (unless the
 * operator allows a host), decoded by sharp with a pixel bound, and cached: recent variants in
 * memory, all of them on disk under DATA_DIR/cache/textures (bounded by bytes, least recently used evicted).
 * A failure is remembered briefly, so a dead host is not hammered by every visitor.
 * A still the bake stored itself (a content file, as the sample's pictures are) is read from the
 * artifacts by its file id from the published manifest — never fetched, and never by a URL.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import sharp from 'sharp';
import { type Artwork, fileName, filePath } from '../../artifacts/format.ts';
import { writeFileAtomic } from '../../artifacts/store.ts';
import { BodyTooLarge, guardedGet, type NetPolicy } from '../../common/net.ts';
import type { ContentSnapshot } from '../content.ts';
import { diskCacheIndex } from '../disk-index.ts';

export interface TextureOptions {
  cacheDir: string;
  /** Public addresses only, plus the hosts the operator allows (VIEWER_MEDIA_ALLOW_HOSTS). */
  policy: NetPolicy;
  log: Logger;
  /** Longest side of a variant in pixels. */
  size?: number;
  maxSourceBytes?: number;
  timeoutMs?: number;
  maxDiskBytes?: number;
  memoryEntries?: number;
  /** How long a failure is remembered. */
  failureTtlMs?: number;
  concurrency?: number;
}

/** Bumped when the variant recipe changes, so old cached files are not served. */
const RECIPE = 'tex1';
const DECODABLE = new Set(['jpeg', 'png', 'webp', 'gif', 'avif', 'heif', 'tiff']);

class TextureError extends Error {}

/** The still image of an artwork: its media when that is an image. */
const stillImageUrl = (artwork: Artwork): string | null =>
  artwork.media && artwork.media.type === 'image' && /^https?:\/\//i.test(artwork.media.url) ? artwork.media.url : null;

/** Where a texture is made from: an outside image URL, or a file of the artifacts (by its file id). */
export type TextureSource = { url: string } | { file: string; name: string };

/**
 * The source of an artwork's texture: its stored still (our own file, read from `dataDir`), else
 * its outside image URL; null when it has no still image.
 */
export function textureSource(snapshot: ContentSnapshot, artwork: Artwork, dataDir: string): TextureSource | null {
  const stored = snapshot.storedStills.get(artwork.id);
  if (stored) return { file: filePath(dataDir, stored), name: fileName(stored) };
  const url = stillImageUrl(artwork);
  return url ? { url } : null;
}

export class ArtworkTextures {
  private readonly size: number;
  private readonly maxSourceBytes: number;
  private readonly timeoutMs: number;
  private readonly maxDiskBytes: number;
  private readonly concurrency: number;
  private readonly memory: LRUCache<string, Buffer>;
  /** Sources that failed recently (the value is unused: an entry is there until failureTtlMs passes). */
  private readonly failures: LRUCache<string, true> | null;
  private readonly inflight = new Map<string, Promise<Buffer>>();
  /** Files on disk with their sizes, bounded by bytes, least recently used first (read from disk at the first write). */
  private disk: LRUCache<string, number> | null = null;
  private listing: Promise<LRUCache<string, number>> | null = null;
  /** Files evicted from `disk`, still to be removed. */
  private evicted: string[] = [];
  private running = 0;
  private readonly queue: Array<() => void> = [];

  constructor(private readonly options: TextureOptions) {
    this.size = options.size ?? 1024;
    this.maxSourceBytes = options.maxSourceBytes ?? 25 * 1024 * 1024;
    this.timeoutMs = options.timeoutMs ?? 15_000;
    this.maxDiskBytes = options.maxDiskBytes ?? 256 * 1024 * 1024;
    const failureTtlMs = options.failureTtlMs ?? 60_000;
    this.concurrency = options.concurrency ?? 4;
    this.memory = new LRUCache({ max: options.memoryEntries ?? 48 });
    // lru-cache reads a ttl of 0 as "never expires": no failure is remembered then.
    this.failures = failureTtlMs > 0 ? new LRUCache({ max: 1024, ttl: failureTtlMs }) : null;
  }

  /** The WebP variant of this image (a URL, or a stored file); throws TextureError when it cannot be had. */
  async variant(from: string | TextureSource): Promise<Buffer> {
    const source = typeof from === 'string' ? { url: from } : from;
    const id = 'url' in source ? source.url : `file:${source.name}`;
    const key = createHash('sha256').update(`${RECIPE}\n${this.size}\n${id}`).digest('hex').slice(0, 40);
    const hit = this.memory.get(key);
    if (hit) return hit;
    if (this.failures?.get(key)) throw new TextureError('the image failed recently');
    let job = this.inflight.get(key);
    if (!job) {
      job = this.load(key, source).finally(() => this.inflight.delete(key));
      this.inflight.set(key, job);
    }
    return job;
  }

  private async load(key: string, source: TextureSource): Promise<Buffer> {
    const file = join(this.options.cacheDir, `${key}.webp`);
    const cached = await fs.readFile(file).catch(() => null);
    if (cached) {
      this.disk?.get(`${key}.webp`);
      this.memory.set(key, cached);
      return cached;
    }
    try {
      const bytes = await this.limited(() => this.make(source));
      this.memory.set(key, bytes);
      await this.store(`${key}.webp`, bytes);
      return bytes;
    } catch (err) {
      this.failures?.set(key, true);
      const where = 'url' in source ? { url: source.url } : { file: source.name };
      this.options.log.warn({ ...where, err: err instanceof Error ? err.message : String(err) }, 'artwork texture unavailable');
      throw err instanceof TextureError ? err : new TextureError('the image could not be fetched or decoded');
    }
  }

  private async make(source: TextureSource): Promise<Buffer> {
    const bytes = 'url' in source ? await this.fetchBounded(source.url) : await this.readBounded(source.file);
    const image = sharp(bytes, { limitInputPixels: 64_000_000, failOn: 'error' });
    const meta = await image.metadata();
    if (!meta.format || !DECODABLE.has(meta.format)) throw new TextureError(`not a raster image (${meta.format ?? 'unknown'})`);
    return image
      .rotate()
      .resize(this.size, this.size, { fit: 'inside', withoutEnlargement: true })
      .webp({ quality: 82, effort: 3 })
      .toBuffer();
  }

  /** A stored file of the artifacts, under the same byte bound as a fetched image. */
  private async readBounded(path: string): Promise<Buffer> {
    const stat = await fs.stat(path).catch(() => null);
    if (!stat?.isFile()) throw new TextureError('the stored image is missing');
    if (stat.size > this.maxSourceBytes) throw new TextureError('the image is too large');
    return fs.readFile(path);
  }

  /** GET with a byte bound and one overall deadline, through the guarded outbound GET. */
  private async fetchBounded(url: string): Promise<Buffer> {
    const res = await guardedGet(url, {
      policy: this.options.policy,
      signal: AbortSignal.timeout(this.timeoutMs),
      headers: { accept: 'image/*', 'user-agent': 'museum-viewer' },
      maxBytes: this.maxSourceBytes,
      maxRedirects: 3,
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new TextureError(`the image host answered ${res.status}`);
    }
    if (Number(res.headers.get('content-length') ?? 0) > this.maxSourceBytes) {
      await res.body?.cancel();
      throw new TextureError('the image is too large');
    }
    try {
      return Buffer.from(await res.arrayBuffer());
    } catch (err) {
      throw err instanceof BodyTooLarge ? new TextureError('the image is too large') : err;
    }
  }

  private async limited<T>(fn: () => Promise<T>): Promise<T> {
    if (this.running >= this.concurrency) await new Promise<void>((resolve) => this.queue.push(resolve));
    this.running++;
    try {
      return await fn();
    } finally {
      this.running--;
      this.queue.shift()?.();
    }
  }

  /** Write a variant to the disk cache and remove the least recently used files beyond the byte budget. */
  private async store(name: string, bytes: Buffer): Promise<void> {
    try {
      await fs.mkdir(this.options.cacheDir, { recursive: true });
      const disk = await this.diskIndex();
      await writeFileAtomic(join(this.options.cacheDir, name), bytes);
      disk.set(name, bytes.length); // evicts beyond the budget, never this file
      for (const evicted of this.evicted.splice(0)) await fs.rm(join(this.options.cacheDir, evicted), { force: true });
    } catch (err) {
      // A full or read-only disk costs only the cache.
      this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'texture cache write failed');
    }
  }

  /** The index of the disk cache; at first, the files already in its directory, oldest first (listed once). */
  private async diskIndex(): Promise<LRUCache<string, number>> {
    if (this.disk) return this.disk;
    this.listing ??= this.listDisk().finally(() => (this.listing = null));
    return (this.disk = await this.listing);
  }

  private async listDisk(): Promise<LRUCache<string, number>> {
    const entries = await Promise.all(
      (await fs.readdir(this.options.cacheDir))
        .filter((n) => n.endsWith('.webp'))
        .map(async (n) => {
          const stat = await fs.stat(join(this.options.cacheDir, n)).catch(() => null);
          return stat ? ([n, stat.size, stat.mtimeMs] as const) : null;
        }),
    );
    const index = diskCacheIndex(this.maxDiskBytes, (n) => this.evicted.push(n));
    for (const [n, size] of entries.filter((e) => e !== null).sort((a, b) => a[2] - b[2])) index.set(n, size);
    return index;
  }
}
