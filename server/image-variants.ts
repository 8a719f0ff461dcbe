/**
 * Image variants of content-addressed raster images (`?width=` 16..4096, `?format=` webp|jpeg|png|avif),
 * cached content-addressed under DATA_DIR/cache/variants with a bounded total size (least recently
 * used removed first). The route is public, so making one is bounded (decisions.md, second attack
 * round): widths snap up to a ladder (few cache entries per image, not one per pixel), variants not
 * yet cached are made at most 2 at a time per client and 4 in all (more: 503 BUSY), and one variant's
 * cost is bounded (input and output pixels, AVIF at its fastest effort, a time limit).
 */
import { promises as fs } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import sharp, { type Sharp } from 'sharp';
import { clientBucket } from '../common/net.ts';
import { artifactPaths, contentTypeOf, type FileExt } from '../artifacts/format.ts';
import { writeFileAtomic } from '../artifacts/store.ts';
import type { ArtifactFiles, FileResponsePlan, StoredFile } from './artifact-files.ts';
import { diskCacheIndex } from './disk-index.ts';
import { badRequest, HttpError } from './errors.ts';
import { etagMatches, IMMUTABLE_CACHE_CONTROL } from './http-conditional.ts';

export const VARIANT_FORMATS = ['webp', 'jpeg', 'png', 'avif'] as const;
type VariantFormat = (typeof VARIANT_FORMATS)[number];
export const VARIANT_WIDTH = { min: 16, max: 4096 } as const;
/** The widths variants are made at (decisions): a requested width snaps up to the next one. */
const VARIANT_WIDTHS = [16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096] as const;

/** The width a variant of a `sourceWidth` image is made at for a requested width; null: the source's own (never enlarged). */
function snapWidth(requested: number, sourceWidth: number): number | null {
  const step = VARIANT_WIDTHS.find((w) => w >= requested) ?? VARIANT_WIDTH.max;
  return step < sourceWidth ? step : null;
}

/** Raster images sharp can transform; SVG and non-images are served as they are. */
const TRANSFORMABLE: Partial<Record<FileExt, VariantFormat>> = { png: 'png', jpg: 'jpeg', webp: 'webp', avif: 'avif' };
const EXT_OF_FORMAT: Record<VariantFormat, FileExt> = { webp: 'webp', jpeg: 'jpg', png: 'png', avif: 'avif' };

export interface VariantLimits {
  /** Total bytes of cached variants on disk; the least recently used are removed beyond it. */
  maxBytes: number;
  /** Transforms running at once (sharp jobs). */
  concurrency: number;
  /** Variants being made (running or waiting for a transform) at once, in all and per client; beyond: 503 BUSY. */
  maxInProgress: number;
  maxPerClient: number;
  /** sharp's limitInputPixels: larger sources are refused before decoding. */
  maxInputPixels: number;
  /** Larger variants are refused (400): a 4096-wide variant of a tall image is capped too. */
  maxOutputPixels: number;
  /** sharp's own time limit on one transform (libvips checks it while it works). */
  timeoutSeconds: number;
}

const DEFAULT_VARIANT_LIMITS: VariantLimits = {
  maxBytes: 256 * 1024 * 1024,
  concurrency: Math.max(1, Math.min(2, availableParallelism())),
  maxInProgress: 4,
  maxPerClient: 2,
  maxInputPixels: 64_000_000,
  maxOutputPixels: 4096 * 4096,
  timeoutSeconds: 30,
};

const BUSY_RETRY_AFTER = '5';

export interface VariantRequest {
  width?: number;
  format?: VariantFormat;
}

/** Where a variant lives and how it is validated; `source` when the request asks for the original. */
type VariantPlan =
  | { source: true }
  | { source: false; name: string; path: string; etag: string; contentType: string; width: number | null; format: VariantFormat };

/**
 * Image variants of content-addressed images. A variant is addressed by its source's sha256 and the
 * effective parameters (a width at or above the source's is the source's width: no enlargement, and
 * no distinct cache entries for equivalent requests), so the cache needs no invalidation.
 */
export class ImageVariants {
  readonly dir: string;
  readonly limits: VariantLimits;
  /** Cached variant files → size, least recently used first (scanned from disk on first use). */
  private index: LRUCache<string, number> | null = null;
  private indexing: Promise<LRUCache<string, number>> | null = null;
  /** Variants evicted from the index whose files are still to be removed. */
  private evicted: string[] = [];
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly inflight = new Map<string, Promise<void>>();
  /** Variants being made for each client (by clientBucket); entries leave at zero, so at most maxInProgress. */
  private readonly perClient = new Map<string, number>();
  private inProgress = 0;
  private readonly dimensions = new LRUCache<string, { width: number; height: number }>({ max: 10_000 });

  constructor(
    dataDir: string,
    private readonly files: ArtifactFiles,
    private readonly log: Logger,
    limits: Partial<VariantLimits> = {},
  ) {
    this.dir = join(artifactPaths(dataDir).cache, 'variants');
    this.limits = { ...DEFAULT_VARIANT_LIMITS, ...limits };
  }

  /**
   * The file answering `request` for the source image `name` (which must exist as `source`). A variant
   * not cached yet is made within the bounds of the module comment for `clientIp`'s client, else 503 BUSY.
   */
  async variant(
    name: string,
    source: StoredFile,
    request: VariantRequest,
    ifNoneMatch?: string,
    clientIp = 'local',
  ): Promise<StoredFile | FileResponsePlan> {
    const plan = await this.plan(name, source, request);
    if (plan.source) return source;
    // A client revalidating a variant it has needs no transform at all.
    if (etagMatches(ifNoneMatch, plan.etag))
      return { status: 304, headers: { ETag: plan.etag, 'Cache-Control': IMMUTABLE_CACHE_CONTROL }, body: null };
    let file = await this.files.load(plan.path, plan.contentType, plan.etag);
    if (file) {
      this.touch(plan.name);
      return file;
    }
    let pending = this.inflight.get(plan.name);
    if (!pending) {
      // Waiting for a variant someone else is making costs nothing; making one is admitted.
      const done = this.admit(clientBucket(clientIp));
      pending = this.produce(source, plan).finally(() => {
        done();
        this.inflight.delete(plan.name);
      });
      this.inflight.set(plan.name, pending);
    }
    await pending;
    file = await this.files.load(plan.path, plan.contentType, plan.etag);
    if (!file) throw new Error(`variant ${plan.name} vanished right after it was written`);
    return file;
  }

  /** Bytes of variants currently cached on disk (as far as this process knows). */
  async cachedBytes(): Promise<number> {
    let bytes = 0;
    for (const size of (await this.loadIndex()).values()) bytes += size;
    return bytes;
  }

  private async plan(name: string, source: StoredFile, request: VariantRequest): Promise<VariantPlan> {
    const ext = name.slice(name.indexOf('.') + 1) as FileExt;
    const sourceFormat = TRANSFORMABLE[ext];
    if (!sourceFormat) throw badRequest('width and format apply only to raster images (png, jpg, webp, avif)');
    const format = request.format ?? sourceFormat;
    const { width: sourceWidth, height: sourceHeight } = await this.dimensionsOf(name, source);
    const width = request.width === undefined ? null : snapWidth(request.width, sourceWidth);
    if (width === null && format === sourceFormat) return { source: true };
    const pixels = width === null ? sourceWidth * sourceHeight : width * Math.max(1, Math.round((sourceHeight * width) / sourceWidth));
    if (pixels > this.limits.maxOutputPixels) {
      throw badRequest(`This variant would be larger than ${this.limits.maxOutputPixels} pixels; ask for a smaller width`);
    }
    const sha = name.slice(0, name.indexOf('.'));
    const variantName = `${sha}-${width === null ? 'full' : `w${width}`}.${EXT_OF_FORMAT[format]}`;
    return {
      source: false,
      name: variantName,
      path: join(this.dir, variantName),
      etag: `"${variantName.replace('.', '-')}"`,
      contentType: contentTypeOf(EXT_OF_FORMAT[format]),
      width,
      format,
    };
  }

  /** Count a variant being made for `client`, or refuse (503 BUSY) past the bounds; returns its release. */
  private admit(client: string): () => void {
    const mine = this.perClient.get(client) ?? 0;
    if (this.inProgress >= this.limits.maxInProgress || mine >= this.limits.maxPerClient) {
      const whose = mine >= this.limits.maxPerClient ? 'for this address' : 'in all';
      throw new HttpError(503, 'BUSY', `Too many image variants being made ${whose}; retry shortly`, { 'Retry-After': BUSY_RETRY_AFTER });
    }
    this.inProgress++;
    this.perClient.set(client, mine + 1);
    return () => {
      this.inProgress--;
      const left = (this.perClient.get(client) ?? 1) - 1;
      if (left > 0) this.perClient.set(client, left);
      else this.perClient.delete(client);
    };
  }

  private async dimensionsOf(name: string, source: StoredFile): Promise<{ width: number; height: number }> {
    const known = this.dimensions.get(name);
    if (known) return known;
    const meta = await sharp(source.data ?? source.path, { limitInputPixels: this.limits.maxInputPixels })
      .metadata()
      .catch((err: Error) => {
        this.log.warn({ err: err.message, file: name }, 'image cannot be read for a transform');
        throw badRequest('This image cannot be transformed');
      });
    if (!meta.width || !meta.height) throw badRequest('This image cannot be transformed');
    if (meta.width * meta.height > this.limits.maxInputPixels) throw badRequest('This image is too large to transform');
    const dims = { width: meta.width, height: meta.height };
    this.dimensions.set(name, dims);
    return dims;
  }

  private async produce(source: StoredFile, plan: Extract<VariantPlan, { source: false }>): Promise<void> {
    await this.acquire();
    let bytes: Buffer;
    try {
      let image = sharp(source.data ?? source.path, { limitInputPixels: this.limits.maxInputPixels });
      image = image.timeout({ seconds: this.limits.timeoutSeconds });
      if (plan.width !== null) image = image.resize({ width: plan.width, withoutEnlargement: true });
      bytes = await ENCODERS[plan.format](image).toBuffer();
    } catch (err) {
      this.log.warn({ err: (err as Error).message, variant: plan.name }, 'image transform failed');
      throw badRequest('This image cannot be transformed');
    } finally {
      this.release();
    }
    await writeFileAtomic(plan.path, bytes);
    await this.add(plan.name, bytes.length);
  }

  /** A transform slot (at most `concurrency`); the wait is bounded by admit's `maxInProgress`. */
  private acquire(): Promise<void> {
    if (this.running < this.limits.concurrency) {
      this.running++;
      return Promise.resolve();
    }
    // The slot is handed over directly by release(), so `running` stays counted.
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }

  private loadIndex(): Promise<LRUCache<string, number>> {
    if (this.index) return Promise.resolve(this.index);
    this.indexing ??= (async () => {
      const names = await fs.readdir(this.dir).catch(() => [] as string[]);
      const entries: Array<[string, number, number]> = [];
      for (const name of names) {
        if (name.endsWith('.tmp')) continue;
        const stat = await fs.stat(join(this.dir, name)).catch(() => null);
        if (stat?.isFile()) entries.push([name, stat.size, stat.mtimeMs]);
      }
      entries.sort((a, b) => a[2] - b[2]);
      const index = diskCacheIndex(this.limits.maxBytes, (name) => this.evicted.push(name));
      for (const [name, size] of entries) index.set(name, size);
      await this.removeEvicted();
      this.index = index;
      return index;
    })();
    return this.indexing;
  }

  private touch(name: string): void {
    this.index?.get(name);
  }

  private async add(name: string, size: number): Promise<void> {
    const index = await this.loadIndex();
    // Evicts the least recently used variants beyond the bound (never the one just written).
    index.set(name, size);
    await this.removeEvicted();
  }

  private async removeEvicted(): Promise<void> {
    const names = this.evicted;
    this.evicted = [];
    for (const name of names) {
      this.files.forget(join(this.dir, name));
      await fs.rm(join(this.dir, name), { force: true });
    }
  }
}

const ENCODERS: Record<VariantFormat, (image: Sharp) => Sharp> = {
  webp: (image) => image.webp({ quality: 80 }),
  jpeg: (image) => image.jpeg({ quality: 82 }),
  png: (image) => image.png(),
  // AVIF's fastest effort: at effort 2 a 4096² variant cost ~6 s of CPU here, at 0 ~2 s (sharp's
  // time limit is not checked inside the AVIF encoder, so the effort is what bounds it).
  avif: (image) => image.avif({ quality: 50, effort: 0 }),
};
