/**
 * The content source of a bake: a directory holding three JSON files (each a JSON array) and the
 * model / image files they reference by relative path or http(s) URL. `museum bake sample`
 * generates one; `museum bake sync` writes one from the content store.
 *
 *   rooms.json        [{ id, title, architect, description, series, slots, token_id, model, image, kind? }]
 *                     slots = onchain slot count; model = .glb or .gltf; image = preview image or null;
 *                     kind = 'room' | 'sculpture' (detected from the geometry when absent)
 *   collections.json  [{ id, name, title, description, slug, status: 'published' | 'draft', parent, sort? }]
 *                     parent = id of the parent collection or null; sort = display order (then id)
 *   artworks.json     [{ id, name, artist_name, collection, museum_collection, marketplace_url,
 *                        media_info, display_media_info, display_animation_info, marketplace }]
 *                     The artwork as the content store holds it (decisions: "Content store"):
 *                     collection = the marketplace's collection slug (shown as the Artwork's
 *                     `collection`); museum_collection = slug of the museum collection in
 *                     collections.json, or null (what the artworks list's `collection` filter
 *                     matches); the three media blobs { url, type, content_type, width, height } or
 *                     null; marketplace = the marketplace record's media URLs (image_url,
 *                     display_image_url, original_image_url, animation_url, display_animation_url).
 *                     Media normalization (bake/media.ts) turns it into the public Artwork.
 *                     A still's url may also be a path relative to the directory (a content file,
 *                     as the sample's pictures are): the bake stores it in the artifacts (raster
 *                     images only) and publishes its /files URL.
 */
import { promises as fs } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { z } from 'zod';
import type { Collection, FileExt, FileRef, ManifestArtwork, Media } from '../artifacts/format.ts';
import { contentTypeOf, fileName } from '../artifacts/format.ts';
import { putContentFile } from '../artifacts/store.ts';
import { issuesLine } from '../common/errors.ts';
import { normalizeArtwork, type NormalizeOptions } from './media.ts';
import { inspectPreview } from './thumbnail.ts';

export const CONTENT_FILES = { rooms: 'rooms.json', collections: 'collections.json', artworks: 'artworks.json' } as const;

const text = z.string();
const optionalText = z
  .string()
  .nullish()
  .transform((v) => v ?? '');
const nullableText = z
  .string()
  .min(1)
  .nullish()
  .transform((v) => v ?? null);
const dimension = z
  .number()
  .int()
  .positive()
  .nullish()
  .transform((v) => v ?? null);
const SLUG = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'slug must be URL-safe');
const ref = z
  .string()
  .min(1)
  .refine((v) => !/^[a-z][a-z0-9+.-]*:/i.test(v) || /^https?:\/\//i.test(v), 'must be a relative path or an http(s) URL');

export const ContentRoom = z.object({
  id: z.number().int().positive(),
  title: text,
  architect: optionalText,
  description: optionalText,
  series: optionalText,
  slots: z.number().int().min(0).max(10_000),
  token_id: z
    .union([z.string(), z.number().int()])
    .nullish()
    .transform((v) => v ?? null),
  model: ref,
  image: ref.nullish().transform((v) => v ?? null),
  kind: z.enum(['room', 'sculpture']).optional(),
});
export type ContentRoom = z.infer<typeof ContentRoom>;

export const ContentCollection = z.object({
  id: z.number().int().positive(),
  name: text,
  title: optionalText,
  description: optionalText,
  slug: SLUG,
  status: z.enum(['published', 'draft']),
  parent: z
    .number()
    .int()
    .positive()
    .nullish()
    .transform((v) => v ?? null),
  /** Display order among siblings (the store's `sort`); then by id. */
  sort: z
    .number()
    .int()
    .nullish()
    .transform((v) => v ?? null),
});
export type ContentCollection = z.infer<typeof ContentCollection>;

/** One of the store's media blobs: a file of the work as the store describes it. */
export const ContentMedia = z.object({
  url: z.string().min(1),
  /** The store's kind of file (image, video, model, …), when it says. */
  type: nullableText,
  content_type: nullableText,
  width: dimension,
  height: dimension,
});
export type ContentMedia = z.infer<typeof ContentMedia>;

/** The media URLs of the work's marketplace record (the four normalization rules read them). */
export const MarketplaceMedia = z.object({
  image_url: nullableText,
  display_image_url: nullableText,
  original_image_url: nullableText,
  animation_url: nullableText,
  display_animation_url: nullableText,
});
export type MarketplaceMedia = z.infer<typeof MarketplaceMedia>;

const media = ContentMedia.nullish().transform((v) => v ?? null);

export const ContentArtwork = z
  .object({
    id: z.number().int().positive(),
    name: optionalText,
    artist_name: optionalText,
    /** The marketplace's collection slug, shown as the artwork's `collection`. */
    collection: optionalText,
    /** Slug of the museum collection (collections.json) the artwork belongs to, or null. */
    museum_collection: SLUG.nullish().transform((v) => v ?? null),
    marketplace_url: optionalText,
    media_info: media,
    display_media_info: media,
    display_animation_info: media,
    marketplace: MarketplaceMedia.nullish().transform((v) => v ?? MarketplaceMedia.parse({})),
  })
  // Strict: a field this format does not have (e.g. `image_url` of the older flat format) is an
  // error, never media silently dropped.
  .strict();
export type ContentArtwork = z.infer<typeof ContentArtwork>;

export interface Content {
  dir: string;
  rooms: ContentRoom[];
  collections: ContentCollection[];
  artworks: ContentArtwork[];
}

/** Invalid content; one line naming the file, the record and the problem. */
export class ContentError extends Error {
  override name = 'ContentError';
}

/** The first problem of a content file, at its record (index and id) and field, and how many more. */
function describeIssues(file: string, error: z.ZodError, items: unknown): string {
  const at = ([index, ...rest]: PropertyKey[]) => {
    const record = Array.isArray(items) && typeof index === 'number' ? (items[index] as { id?: unknown } | undefined) : undefined;
    const where =
      typeof index === 'number' ? `record ${index}${record?.id !== undefined ? ` (id ${JSON.stringify(record.id)})` : ''}` : 'file';
    return `${where}${rest.length ? ` field ${rest.map(String).join('.')}` : ''}`;
  };
  return `${file}: ${issuesLine(error, { max: 1, at })}`;
}

async function readArray<S extends z.ZodType>(dir: string, file: string, schema: S, required: boolean): Promise<z.infer<S>[]> {
  const path = join(dir, file);
  const source = await fs.readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' && !required) return null;
    throw new ContentError(
      `${path}: ${err.code === 'ENOENT' ? 'not found (is this a content directory? `museum bake sample` writes one)' : err.message}`,
    );
  });
  if (source === null) return [];
  let items: unknown;
  try {
    items = JSON.parse(source);
  } catch (err) {
    throw new ContentError(`${path}: not valid JSON (${(err as Error).message})`);
  }
  const parsed = z.array(schema).safeParse(items);
  if (!parsed.success) throw new ContentError(describeIssues(path, parsed.error, items));
  return parsed.data;
}

function assertUnique<T>(file: string, items: T[], key: (item: T) => string | number, what: string): void {
  const seen = new Set<string | number>();
  for (const item of items) {
    const k = key(item);
    if (seen.has(k)) throw new ContentError(`${file}: duplicate ${what} ${JSON.stringify(k)}`);
    seen.add(k);
  }
}

/** Load and validate a content directory; throws ContentError with one clear line. */
export async function loadContent(dir: string): Promise<Content> {
  const [rooms, collections, artworks] = await Promise.all([
    readArray(dir, CONTENT_FILES.rooms, ContentRoom, true),
    readArray(dir, CONTENT_FILES.collections, ContentCollection, false),
    readArray(dir, CONTENT_FILES.artworks, ContentArtwork, false),
  ]);
  const at = (file: string) => join(dir, file);
  assertUnique(at(CONTENT_FILES.rooms), rooms, (r) => r.id, 'room id');
  assertUnique(at(CONTENT_FILES.collections), collections, (c) => c.id, 'collection id');
  assertUnique(at(CONTENT_FILES.collections), collections, (c) => c.slug, 'collection slug');
  assertUnique(at(CONTENT_FILES.artworks), artworks, (a) => a.id, 'artwork id');
  const ids = new Set(collections.map((c) => c.id));
  for (const c of collections) {
    if (c.parent !== null && !ids.has(c.parent)) {
      throw new ContentError(`${at(CONTENT_FILES.collections)}: collection ${c.id} has parent ${c.parent}, which does not exist`);
    }
    if (c.parent === c.id) throw new ContentError(`${at(CONTENT_FILES.collections)}: collection ${c.id} is its own parent`);
  }
  const slugs = new Set(collections.map((c) => c.slug));
  const stray = artworks.find((a) => a.museum_collection !== null && !slugs.has(a.museum_collection));
  if (stray) {
    throw new ContentError(
      `${at(CONTENT_FILES.artworks)}: artwork ${stray.id} is in museum collection "${stray.museum_collection}", which is not ` +
        `in ${CONTENT_FILES.collections}`,
    );
  }
  return { dir, rooms, collections, artworks };
}

// ---------------------------------------------------------------------------------------------
// Content files: artwork stills that live in the content directory

/** A media url without a scheme that is not rooted: a file of the content directory. */
const isContentFile = (url: string): boolean => !/^[a-z][a-z0-9+.-]*:/i.test(url) && !/^[\\/]/.test(url);

/** Largest content file the bake reads. */
const MAX_CONTENT_FILE_BYTES = 32 * 1024 * 1024;
/** Content files read at once. */
const CONTENT_FILE_READS = 4;

/** The content files the artworks name, with the first record (and field) naming each. */
function contentFileRefs(artworks: ContentArtwork[], artworksFile: string): Map<string, string> {
  const refs = new Map<string, string>();
  for (const a of artworks) {
    for (const field of ['media_info', 'display_media_info', 'display_animation_info'] as const) {
      const url = a[field]?.url;
      if (url === undefined || !isContentFile(url)) continue;
      const where = `${artworksFile}: artwork ${a.id} field ${field}.url`;
      if (field === 'display_animation_info') throw new ContentError(`${where}: a content file can only be the still image`);
      if (!refs.has(url)) refs.set(url, where);
    }
  }
  return refs;
}

/** Read one content file: inside the directory (no `..`, no link out of it), bounded, a raster image. */
async function readContentImage(dir: string, ref: string, where: string, maxPixels: number): Promise<{ bytes: Buffer; ext: FileExt }> {
  const fail = (problem: string) => new ContentError(`${where}: "${ref}" ${problem}`);
  if (ref.split(/[\\/]/).some((part) => part === '..' || part === '')) throw fail('must be a relative path inside the content directory');
  const root = await fs.realpath(dir);
  const path = await fs.realpath(resolve(root, ref)).catch((err: NodeJS.ErrnoException) => {
    throw fail(err.code === 'ENOENT' ? 'not found in the content directory' : `cannot be read (${err.code ?? err.message})`);
  });
  if (!path.startsWith(root + sep)) throw fail('leads out of the content directory');
  const stat = await fs.stat(path);
  if (!stat.isFile()) throw fail('is not a file');
  if (stat.size > MAX_CONTENT_FILE_BYTES) throw fail(`is ${stat.size} bytes, over the ${MAX_CONTENT_FILE_BYTES}-byte limit`);
  const bytes = await fs.readFile(path);
  const image = await inspectPreview(bytes, maxPixels).catch((err: Error) => {
    throw fail(err.message.replace(/^preview image /, ''));
  });
  if (image.ext === 'svg') throw fail('is an SVG; content files must be raster images (png, jpeg, webp or avif)');
  return { bytes, ext: image.ext };
}

/**
 * Store the artworks' content files in the artifacts (content-addressed, like every room file):
 * a map from each relative path to its file, for publicCatalog. A file that is missing, leads out
 * of the directory, is too large or is not a raster image fails the bake with one line (ContentError),
 * before anything is published.
 */
export async function storeArtworkFiles(
  content: Pick<Content, 'dir' | 'artworks'>,
  dataDir: string,
  maxPixels: number,
): Promise<Map<string, FileRef>> {
  const refs = [...contentFileRefs(content.artworks, join(content.dir, CONTENT_FILES.artworks))];
  const stored = new Map<string, FileRef>();
  for (let i = 0; i < refs.length; i += CONTENT_FILE_READS) {
    await Promise.all(
      refs.slice(i, i + CONTENT_FILE_READS).map(async ([ref, where]) => {
        const { bytes, ext } = await readContentImage(content.dir, ref, where, maxPixels);
        stored.set(ref, await putContentFile(dataDir, bytes, ext));
      }),
    );
  }
  return stored;
}

/** The still as published when it is a stored content file: its /files path (the server prefixes PUBLIC_URL). */
function withStoredStill(artwork: ManifestArtwork, files: ReadonlyMap<string, FileRef>): ManifestArtwork {
  const file = artwork.media && files.get(artwork.media.url);
  if (!file) return artwork;
  const media: Media = { ...artwork.media!, url: `/files/${fileName(file)}`, type: 'image', content_type: contentTypeOf(file.ext) };
  return { ...artwork, media, media_file: file };
}

/**
 * What the API publishes from the content: collections that are published together with all their
 * ancestors (a draft hides its subtree), with parent / child references, and the normalized
 * artworks (with their museum collection, for the list's filter) except those of hidden
 * collections. Collections in display order (`sort`, then id), artworks by id, so the manifest is
 * deterministic.
 */
export function publicCatalog(
  content: Pick<Content, 'collections' | 'artworks'>,
  options: NormalizeOptions & { files?: ReadonlyMap<string, FileRef> },
): { collections: Collection[]; artworks: ManifestArtwork[] } {
  const byId = new Map(content.collections.map((c) => [c.id, c]));
  const visible = (c: ContentCollection): boolean => {
    const seen = new Set<number>();
    for (let at: ContentCollection | undefined = c; at; at = at.parent === null ? undefined : byId.get(at.parent)) {
      if (at.status !== 'published' || seen.has(at.id)) return false; // a cycle is never published
      seen.add(at.id);
    }
    return true;
  };
  const order = (c: ContentCollection) => c.sort ?? Number.MAX_SAFE_INTEGER;
  const shown = content.collections.filter(visible).sort((a, b) => order(a) - order(b) || a.id - b.id);
  const refOf = (c: ContentCollection) => ({ id: c.id, name: c.name, slug: c.slug });
  const collections: Collection[] = shown.map((c) => ({
    id: c.id,
    name: c.name,
    title: c.title,
    description: c.description,
    slug: c.slug,
    parent_collection: c.parent === null ? null : refOf(byId.get(c.parent)!),
    child_collections: shown.filter((child) => child.parent === c.id).map(refOf),
  }));
  const hiddenSlugs = new Set(content.collections.filter((c) => !visible(c)).map((c) => c.slug));
  const artworks = content.artworks
    .filter((a) => a.museum_collection === null || !hiddenSlugs.has(a.museum_collection))
    .sort((a, b) => a.id - b.id)
    .map((a): ManifestArtwork => ({ ...normalizeArtwork(a, options), museum_collection: a.museum_collection }))
    .map((a) => (options.files ? withStoredStill(a, options.files) : a));
  return { collections, artworks };
}
