/**
 * `GET /files/<sha256>.<ext>` (public): the content-addressed artifact files — immutable, strong ETag
 * (the sha256), one `Range`, HEAD, CORS — and image transforms of raster images (`?width=` 16..4096,
 * `?format=` webp|jpeg|png|avif), made with sharp under bounded concurrency and cached
 * content-addressed under DATA_DIR/cache/variants with a bounded total size.
 *
 * Plain file requests are answered by the fast path (fastpath.ts); this Koa route gives the same
 * answers for the requests the fast path hands over (a query string, an unusual encoding) and does
 * the transforms. Only names matching `<sha256>.<ext>` with a known extension resolve, and only inside
 * DATA_DIR/files: nothing else on disk is reachable.
 */
import { promises as fs } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import sharp, { type Sharp } from 'sharp';
import { z } from 'zod';
import { artifactPaths, contentTypeOf, FILE_NAME_PATTERN, type FileExt } from '../../artifacts/format.ts';
import { writeFileAtomic } from '../../artifacts/store.ts';
import type { RouteModule } from '../app.ts';
import { badRequest, HttpError, notFound } from '../errors.ts';
import {
  answerFile,
  ArtifactFiles,
  etagMatches,
  type FileAnswer,
  filesFastPath,
  IMMUTABLE_CACHE_CONTROL,
  type StoredFile,
} from '../fastpath.ts';
import { FILE_RESPONSE_HEADERS } from '../middleware/file-headers.ts';

export const VARIANT_FORMATS = ['webp', 'jpeg', 'png', 'avif'] as const;
export type VariantFormat = (typeof VARIANT_FORMATS)[number];
export const VARIANT_WIDTH = { min: 16, max: 4096 } as const;

/** Raster images sharp can transform; SVG and non-images are served as they are. */
const TRANSFORMABLE: Partial<Record<FileExt, VariantFormat>> = { png: 'png', jpg: 'jpeg', webp: 'webp', avif: 'avif' };
const EXT_OF_FORMAT: Record<VariantFormat, FileExt> = { webp: 'webp', jpeg: 'jpg', png: 'png', avif: 'avif' };

export interface VariantLimits {
  /** Total bytes of cached variants on disk; the least recently used are removed beyond it. */
  maxBytes: number;
  /** Transforms running at once. */
  concurrency: number;
  /** Transforms waiting for a slot; beyond it the request is refused with 503 BUSY. */
  maxQueue: number;
  /** sharp's limitInputPixels: larger sources are refused before decoding. */
  maxInputPixels: number;
}

const DEFAULT_VARIANT_LIMITS: VariantLimits = {
  maxBytes: 256 * 1024 * 1024,
  concurrency: Math.max(1, Math.min(2, availableParallelism())),
  maxQueue: 64,
  maxInputPixels: 64_000_000,
};

export interface VariantRequest {
  width?: number;
  format?: VariantFormat;
}

/** Where a variant lives and how it is validated; `source` when the request asks for the original. */
type VariantPlan = { source: true } | { source: false; name: string; path: string; etag: string; contentType: string; width: number | null; format: VariantFormat };

/**
 * Image variants of content-addressed images. A variant is addressed by its source's sha256 and the
 * effective parameters (a width at or above the source's is the source's width: no enlargement, and
 * no distinct cache entries for equivalent requests), so the cache needs no invalidation.
 */
export class ImageVariants {
  readonly dir: string;
  readonly limits: VariantLimits;
  /** Cached variant files → size, least recently used first (scanned from disk on first use). */
  private index: Map<string, number> | null = null;
  private indexing: Promise<Map<string, number>> | null = null;
  private totalBytes = 0;
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly dimensions = new Map<string, { width: number; height: number }>();

  constructor(
    dataDir: string,
    private readonly files: ArtifactFiles,
    private readonly log: Logger,
    limits: Partial<VariantLimits> = {},
  ) {
    this.dir = join(artifactPaths(dataDir).cache, 'variants');
    this.limits = { ...DEFAULT_VARIANT_LIMITS, ...limits };
  }

  /** The file answering `request` for the source image `name` (which must exist as `source`). */
  async variant(name: string, source: StoredFile, request: VariantRequest, ifNoneMatch?: string): Promise<StoredFile | FileAnswer> {
    const plan = await this.plan(name, source, request);
    if (plan.source) return source;
    // A client revalidating a variant it has needs no transform at all.
    if (etagMatches(ifNoneMatch, plan.etag)) return { status: 304, headers: { ETag: plan.etag, 'Cache-Control': IMMUTABLE_CACHE_CONTROL, ...FILE_RESPONSE_HEADERS }, body: null };
    let file = await this.files.load(plan.path, plan.contentType, plan.etag);
    if (file) {
      this.touch(plan.name);
      return file;
    }
    let pending = this.inflight.get(plan.name);
    if (!pending) {
      pending = this.produce(source, plan).finally(() => this.inflight.delete(plan.name));
      this.inflight.set(plan.name, pending);
    }
    await pending;
    file = await this.files.load(plan.path, plan.contentType, plan.etag);
    if (!file) throw new Error(`variant ${plan.name} vanished right after it was written`);
    return file;
  }

  /** Bytes of variants currently cached on disk (as far as this process knows). */
  async cachedBytes(): Promise<number> {
    await this.loadIndex();
    return this.totalBytes;
  }

  private async plan(name: string, source: StoredFile, request: VariantRequest): Promise<VariantPlan> {
    const ext = name.slice(name.indexOf('.') + 1) as FileExt;
    const sourceFormat = TRANSFORMABLE[ext];
    if (!sourceFormat) throw badRequest('width and format apply only to raster images (png, jpg, webp, avif)');
    const format = request.format ?? sourceFormat;
    const { width: sourceWidth } = await this.dimensionsOf(name, source);
    const width = request.width !== undefined && request.width < sourceWidth ? request.width : null;
    if (width === null && format === sourceFormat) return { source: true };
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
    if (this.dimensions.size >= 10_000) this.dimensions.delete(this.dimensions.keys().next().value!);
    this.dimensions.set(name, dims);
    return dims;
  }

  private async produce(source: StoredFile, plan: Extract<VariantPlan, { source: false }>): Promise<void> {
    await this.acquire();
    let bytes: Buffer;
    try {
      let image = sharp(source.data ?? source.path, { limitInputPixels: this.limits.maxInputPixels });
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

  private acquire(): Promise<void> {
    if (this.running < this.limits.concurrency) {
      this.running++;
      return Promise.resolve();
    }
    if (this.waiting.length >= this.limits.maxQueue) {
      return Promise.reject(new HttpError(503, 'BUSY', 'Too many image transforms in progress; retry shortly', { 'Retry-After': '5' }));
    }
    // The slot is handed over directly by release(), so `running` stays counted.
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }

  private loadIndex(): Promise<Map<string, number>> {
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
      const index = new Map<string, number>();
      for (const [name, size] of entries) index.set(name, size);
      this.totalBytes = entries.reduce((sum, [, size]) => sum + size, 0);
      this.index = index;
      return index;
    })();
    return this.indexing;
  }

  private touch(name: string): void {
    const size = this.index?.get(name);
    if (size === undefined || !this.index) return;
    this.index.delete(name);
    this.index.set(name, size);
  }

  private async add(name: string, size: number): Promise<void> {
    const index = await this.loadIndex();
    this.totalBytes += size - (index.get(name) ?? 0);
    index.delete(name);
    index.set(name, size);
    // Evict least recently used variants beyond the bound (never the one just written).
    for (const [old, oldSize] of index) {
      if (this.totalBytes <= this.limits.maxBytes || old === name) break;
      index.delete(old);
      this.totalBytes -= oldSize;
      this.files.forget(join(this.dir, old));
      await fs.rm(join(this.dir, old), { force: true });
    }
  }
}

const ENCODERS: Record<VariantFormat, (image: Sharp) => Sharp> = {
  webp: (image) => image.webp({ quality: 80 }),
  jpeg: (image) => image.jpeg({ quality: 82 }),
  png: (image) => image.png(),
  avif: (image) => image.avif({ quality: 50, effort: 2 }),
};

/** Set a file answer on a Koa context (the fast path writes the same answer raw). */
async function sendAnswer(ctx: Context, files: ArtifactFiles, answer: FileAnswer): Promise<void> {
  // Open a streamed body first: a file that vanished must not leave success headers behind.
  const body = answer.body === null || Buffer.isBuffer(answer.body) ? answer.body : await files.open(answer.body);
  if (body === null && answer.body !== null) throw notFound();
  ctx.status = answer.status;
  ctx.set(answer.headers);
  if (body !== null) ctx.body = body;
}

const widthParam = z
  .string()
  .regex(/^\d{1,4}$/, `width must be an integer from ${VARIANT_WIDTH.min} to ${VARIANT_WIDTH.max}`)
  .transform(Number)
  .refine((n) => n >= VARIANT_WIDTH.min && n <= VARIANT_WIDTH.max, `width must be from ${VARIANT_WIDTH.min} to ${VARIANT_WIDTH.max}`)
  .optional()
  .meta({
    type: 'integer',
    minimum: VARIANT_WIDTH.min,
    maximum: VARIANT_WIDTH.max,
    description: 'raster images only: resize to this width in pixels (never enlarged beyond the original)',
  } as Record<string, unknown>);

export const filesRoutes: RouteModule = (api, services) => {
  const files = new ArtifactFiles(artifactPaths(services.config.dataDir).files);
  const variants = new ImageVariants(services.config.dataDir, files, services.log);
  services.addFastPath(filesFastPath(files, services.log));

  api.route({
    method: 'GET',
    path: '/files/{name}',
    summary: 'A content-addressed artifact file (GLB model, image, JSON), optionally an image variant',
    tag: 'files',
    access: 'public',
    params: z.object({
      name: z.string().regex(FILE_NAME_PATTERN).describe('`<sha256>.<ext>`, as in the URLs the API hands out'),
    }),
    query: z.object({
      width: widthParam,
      format: z.enum(VARIANT_FORMATS).optional().describe('raster images only: re-encode as webp, jpeg, png or avif'),
    }),
    response: {
      binary: '*/*',
      description:
        'The file (Content-Type from its extension; ETag = its sha256; Cache-Control: public, max-age=31536000, immutable; HEAD and a single byte Range supported). With width/format: the transformed image, cached.',
      ranges: true,
    },
    errors: [304, 400, 404, 416, 503],
    async handler(ctx, { params, query }) {
      const file = await files.byName(params.name);
      if (!file) throw notFound();
      let target: StoredFile | FileAnswer = file;
      if (query.width !== undefined || query.format !== undefined) {
        target = await variants.variant(params.name, file, query, ctx.get('if-none-match'));
      }
      await sendAnswer(ctx, files, 'status' in target ? target : answerFile(target, ctx.method, ctx.headers));
    },
  });
};
