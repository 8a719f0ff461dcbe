/**
 * The content store's records (decisions: "Content store") → the bake's content records
 * (bake/content.ts), for `museum bake sync`. Records that cannot be used become warnings naming
 * them; signs that the store's records are not what we read (expected fields absent, most listed
 * artworks left without media) fail the whole sync with one line, so the previous content stays.
 *
 *   collections  id, name, title, description, slug, sort, status, parent_collection (many-to-one)
 *   nfts         id, name, artist_name, collection (marketplace slug), collection_type (many-to-one
 *                → collections: the museum collection), media_info, display_media_info,
 *                display_animation_info (blobs { type, content_type, url, width, height }),
 *                response_opensea (the marketplace record; opensea_url → marketplace_url).
 *                Listed artworks have media_info set: the others are not synced.
 *   rooms        id, title, architect, description, series, slots, token_id, image, model (file ids)
 */
import type { z } from 'zod';
import { issuesLine } from '../common/errors.ts';
import { ContentArtwork, ContentCollection, type ContentMedia, type MarketplaceMedia } from './content.ts';
import { normalizeArtwork } from './media.ts';

export type StoreRecord = Record<string, unknown>;

/** The sync failed; one line for operators. The previous content is untouched. */
export class SyncError extends Error {
  override name = 'SyncError';
}

/** Fields a collection's records must carry (Directus answers every readable field with `fields=*`). */
const EXPECTED_FIELDS = {
  collections: ['id', 'name', 'slug', 'status'],
  nfts: [
    'id',
    'name',
    'artist_name',
    'collection',
    'collection_type',
    'media_info',
    'display_media_info',
    'display_animation_info',
    'response_opensea',
  ],
  rooms: ['id', 'title', 'slots', 'model', 'image'],
} as const;
export type StoreCollection = keyof typeof EXPECTED_FIELDS;

/** Throws when no record of a non-empty collection has one of the fields we read. */
export function checkFields(store: string, collection: StoreCollection, records: StoreRecord[]): void {
  if (records.length === 0) return;
  const missing = EXPECTED_FIELDS[collection].filter((field) => !records.some((r) => field in r));
  if (missing.length === 0) return;
  throw new SyncError(
    `content store at ${store}: ${collection} records have no ${missing.join(', ')}: ` +
      "not the content store schema the sync reads (or the token's role may not read those fields)",
  );
}

/** At most this many ids are listed in one warning. */
const LISTED_IDS = 20;
const listIds = (ids: Array<string | number>): string =>
  ids.length <= LISTED_IDS ? ids.join(', ') : `${ids.slice(0, LISTED_IDS).join(', ')} and ${ids.length - LISTED_IDS} more`;

/** A record's first problem (at its field, or `record`) and how many more. */
export const describeIssue = (error: z.ZodError) => issuesLine(error, { max: 1, at: (path) => path.map(String).join('.') || 'record' });
const refId = (v: unknown): number | null => {
  const id = typeof v === 'object' && v !== null ? (v as { id?: unknown }).id : v;
  return id === null || id === undefined || id === '' ? null : Number(id);
};
/** Records with a `status` field are used only when published (drafts and archived ones are not). */
export const isPublished = (r: StoreRecord) => !('status' in r) || r.status === 'published';

/** A JSON field: Directus answers parsed JSON, but a text field holding JSON is read too. */
function jsonObject(v: unknown): Record<string, unknown> | null {
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      return null;
    }
  }
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}
const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
const dimension = (v: unknown): number | null => {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n >= 1 ? Math.round(n) : null;
};

/** A media blob `{ type, content_type, url, width, height }`; null when absent or without a url. */
function mediaBlob(v: unknown): ContentMedia | null {
  const blob = jsonObject(v);
  const url = blob && str(blob.url);
  if (!blob || !url) return null;
  return {
    url,
    type: str(blob.type),
    content_type: str(blob.content_type)?.toLowerCase() ?? null,
    width: dimension(blob.width),
    height: dimension(blob.height),
  };
}

function marketplaceOf(record: Record<string, unknown> | null): { media: MarketplaceMedia; url: string } {
  const r = record ?? {};
  return {
    media: {
      image_url: str(r.image_url),
      display_image_url: str(r.display_image_url),
      original_image_url: str(r.original_image_url),
      animation_url: str(r.animation_url),
      display_animation_url: str(r.display_animation_url),
    },
    url: str(r.opensea_url) ?? '',
  };
}

export function mapCollections(records: StoreRecord[], warnings: string[]): ContentCollection[] {
  const out: ContentCollection[] = [];
  const slugs = new Set<string>();
  for (const r of records) {
    const parsed = ContentCollection.safeParse({
      id: Number(r.id),
      name: r.name,
      title: r.title,
      description: r.description,
      slug: r.slug,
      status: r.status === 'published' ? 'published' : 'draft',
      parent: refId(r.parent_collection ?? r.parent),
      sort: typeof r.sort === 'number' && Number.isInteger(r.sort) ? r.sort : null,
    });
    if (!parsed.success) {
      warnings.push(`collection ${String(r.id)} skipped: ${describeIssue(parsed.error)}`);
      continue;
    }
    if (slugs.has(parsed.data.slug)) {
      warnings.push(`collection ${parsed.data.id} skipped: slug "${parsed.data.slug}" is already used`);
      continue;
    }
    slugs.add(parsed.data.slug);
    out.push(parsed.data);
  }
  const ids = new Set(out.map((c) => c.id));
  for (const c of out) {
    if (c.parent !== null && (!ids.has(c.parent) || c.parent === c.id)) {
      warnings.push(`collection ${c.id}: parent ${c.parent} is not in the store; kept unpublished`);
      c.parent = null;
      c.status = 'draft';
    }
  }
  return out;
}

export interface MappedArtworks {
  artworks: ContentArtwork[];
  /** Records without media_info: not listed, not synced. */
  unlisted: number;
}

/**
 * The listed artworks. Fails the sync when more than half of them would have no media (the store's
 * records are not what we read); fewer become one warning listing their ids.
 */
export function mapArtworks(store: string, records: StoreRecord[], collections: ContentCollection[], warnings: string[]): MappedArtworks {
  const slugOf = new Map(collections.map((c) => [c.id, c.slug]));
  const artworks: ContentArtwork[] = [];
  const withoutMedia: Array<{ id: string; why: string }> = [];
  let unlisted = 0;
  for (const r of records.filter(isPublished)) {
    const id = String(r.id);
    if (r.media_info === null || r.media_info === undefined) {
      unlisted++;
      continue;
    }
    const mediaInfo = mediaBlob(r.media_info);
    const museumId = refId(r.collection_type);
    const museum = museumId === null ? null : slugOf.get(museumId);
    if (museum === undefined) {
      warnings.push(`artwork ${id} skipped: its museum collection ${museumId} is not in the store`);
      continue;
    }
    const marketplace = marketplaceOf(jsonObject(r.response_opensea));
    const parsed = ContentArtwork.safeParse({
      id: Number(r.id),
      name: r.name,
      artist_name: r.artist_name,
      collection: typeof r.collection === 'string' ? r.collection : null,
      museum_collection: museum,
      marketplace_url: marketplace.url,
      media_info: mediaInfo,
      display_media_info: mediaBlob(r.display_media_info),
      display_animation_info: mediaBlob(r.display_animation_info),
      marketplace: marketplace.media,
    });
    if (!parsed.success) {
      warnings.push(`artwork ${id} skipped: ${describeIssue(parsed.error)}`);
      continue;
    }
    artworks.push(parsed.data);
    if (normalizeArtwork(parsed.data, { ipfsGateway: 'https://ipfs.invalid' }).media === null) {
      withoutMedia.push({ id, why: mediaInfo ? 'no live still image' : 'media_info has no url' });
    }
  }
  const listed = artworks.length;
  if (listed === 0 && unlisted > 0) {
    throw new SyncError(
      `content store at ${store}: none of the ${unlisted} nfts records has media_info set, so no artwork would be listed: ` +
        'the nfts records are not what the sync reads',
    );
  }
  if (withoutMedia.length * 2 > listed) {
    const first = withoutMedia[0]!;
    throw new SyncError(
      `content store at ${store}: ${withoutMedia.length} of ${listed} listed artworks would have no media ` +
        `(artwork ${first.id}: ${first.why}): the nfts records are not what the sync reads`,
    );
  }
  if (withoutMedia.length > 0) {
    warnings.push(`${withoutMedia.length} artworks have no usable still image (media null): ${listIds(withoutMedia.map((w) => w.id))}`);
  }
  return { artworks, unlisted };
}
