/**
 * Artworks (keyed): the list with `collection`, `search`, `page`, `limit` and `meta {total, page,
 * limit}`, and one artwork by id. Media come normalized from the bake. Page responses are serialized
 * (and compressed, when asked) once per bake and query (bounded LRU per snapshot), so a repeated page
 * costs a map lookup; both are read from the content snapshot as snapshot responses (strong ETag, 304).
 */
import { z } from 'zod';
import { LRUCache } from 'lru-cache';
import { Artwork } from '../../artifacts/format.ts';
import { idParam, limitParam, pageParam, type RouteModule } from '../route-table.ts';
import { type ContentSnapshot, perSnapshot } from '../content.ts';
import { notFound } from '../errors.ts';
import { KEYED_CACHE_CONTROL, SnapshotResponse } from '../snapshot-response.ts';

const ARTWORKS_DEFAULT_LIMIT = 25;
const CACHED_PAGES = 512;
const CACHED_MATCHES = 256;
/** Longer query keys are answered without caching (they are rare and would bloat the cache). */
const MAX_CACHE_KEY = 512;

/** The museum collection slugs a `collection` filter matches: each named slug plus its published descendants. */
function expandCollectionFilter(snapshot: ContentSnapshot, filter: string): Set<string> {
  const slugs = new Set<string>();
  const visit = (slug: string) => {
    if (slugs.has(slug)) return;
    slugs.add(slug);
    for (const child of snapshot.collectionsBySlug.get(slug)?.child_collections ?? []) visit(child.slug);
  };
  for (const part of filter.split(',')) {
    const slug = part.trim();
    if (slug) visit(slug);
  }
  return slugs;
}

interface ArtworkQueries {
  pages: LRUCache<string, SnapshotResponse>;
  matches: LRUCache<string, number[]>;
  byId: Map<number, SnapshotResponse>;
}

/** One artwork is fixed per bake; a page is made per query (its compression kept cheaper). */
const ONE_ARTWORK = { cacheControl: KEYED_CACHE_CONTROL };
const PAGE = { cacheControl: KEYED_CACHE_CONTROL, effort: 'cached' } as const;

const queriesOf = perSnapshot(
  (_snapshot): ArtworkQueries => ({
    pages: new LRUCache({ max: CACHED_PAGES }),
    matches: new LRUCache({ max: CACHED_MATCHES }),
    // Made on first read of each artwork (issue 43): 200,000 responses at once would stall the server.
    byId: new Map(),
  }),
);

/** Indexes (into snapshot.artworks) of the artworks matching a filter; null: every artwork. */
function matching(snapshot: ContentSnapshot, collection: string, search: string): number[] | null {
  const slugs = collection ? expandCollectionFilter(snapshot, collection) : null;
  if ((!slugs || slugs.size === 0) && !search) return null;
  const out: number[] = [];
  const { artworks, artworkSearchText, museumCollectionOf } = snapshot;
  for (let i = 0; i < artworks.length; i++) {
    if (slugs && slugs.size > 0 && !slugs.has(museumCollectionOf.get(artworks[i]!.id)!)) continue; // Set.has(undefined): false
    if (search && !artworkSearchText[i]!.includes(search)) continue;
    out.push(i);
  }
  return out;
}

function pageResponse(snapshot: ContentSnapshot, collection: string, search: string, page: number, limit: number): SnapshotResponse {
  const queries = queriesOf(snapshot);
  const filterKey = `${collection}\u0000${search}`;
  const pageKey = `${filterKey}\u0000${page}\u0000${limit}`;
  const cacheable = pageKey.length <= MAX_CACHE_KEY;
  const cached = cacheable ? queries.pages.get(pageKey) : undefined;
  if (cached) return cached;
  let indexes = cacheable ? queries.matches.get(filterKey) : undefined;
  if (indexes === undefined) {
    indexes = matching(snapshot, collection, search) ?? undefined;
    if (indexes && cacheable) queries.matches.set(filterKey, indexes);
  }
  const total = indexes ? indexes.length : snapshot.artworks.length;
  const start = (page - 1) * limit;
  const data =
    start >= total
      ? []
      : indexes
        ? indexes.slice(start, start + limit).map((i) => snapshot.artworks[i]!)
        : snapshot.artworks.slice(start, start + limit);
  const response = SnapshotResponse.of({ data, meta: { total, page, limit } }, PAGE);
  if (cacheable) queries.pages.set(pageKey, response);
  return response;
}

const ListQuery = z.object({
  collection: z
    .string()
    .optional()
    .describe(
      'comma-separated museum collection slugs (GET /v1/collections); an artwork matches when its museum collection is one of them or ' +
        "a (published) descendant of one of them — a parent collection's slug also matches its child collections' artworks. The " +
        "artwork's own `collection` field is its marketplace collection, which this filter does not match",
    ),
  search: z.string().optional().describe('case-insensitive substring of the artwork title or the artist name'),
  page: pageParam(),
  limit: limitParam(ARTWORKS_DEFAULT_LIMIT),
});
const ArtworkId = idParam().describe('artwork id');

/** The list response for a query. */
function listResponse(snapshot: ContentSnapshot, query: z.output<typeof ListQuery>): SnapshotResponse {
  const search = (query.search ?? '').trim().toLowerCase();
  // The search text joins title and artist with a newline: a needle with one matches neither field.
  if (search.includes('\n')) return SnapshotResponse.of({ data: [], meta: { total: 0, page: query.page, limit: query.limit } }, PAGE);
  return pageResponse(snapshot, (query.collection ?? '').trim(), search, query.page, query.limit);
}

function artworkResponse(snapshot: ContentSnapshot, id: number): SnapshotResponse {
  const { byId } = queriesOf(snapshot);
  let response = byId.get(id);
  if (!response) {
    const artwork = snapshot.artworksById.get(id);
    if (!artwork) throw notFound('No artwork with this id');
    response = SnapshotResponse.of({ data: artwork }, ONE_ARTWORK);
    byId.set(id, response); // bounded: one per artwork of this bake
  }
  return response;
}

export const artworkRoutes: RouteModule = (api, { content }) => {
  api.route({
    method: 'GET',
    path: '/v1/artworks',
    operationId: 'listArtworks',
    summary: 'Artworks with normalized media, filtered by collection and/or search, paged',
    tag: 'artworks',
    access: 'key',
    query: ListQuery,
    response: {
      json: z.object({
        data: z.array(Artwork),
        meta: z.object({ total: z.number().int(), page: z.number().int(), limit: z.number().int() }),
      }),
      precompressed: true,
    },
    errors: [304],
    handler: (ctx, { query }) => listResponse(content.snapshot, query).responseTo(ctx.req),
  });

  api.route({
    method: 'GET',
    path: '/v1/artworks/{id}',
    operationId: 'getArtwork',
    summary: 'One artwork by id',
    tag: 'artworks',
    access: 'key',
    params: z.object({ id: ArtworkId }),
    response: { json: z.object({ data: Artwork }), precompressed: true },
    errors: [304, 404],
    handler: (ctx, { params }) => artworkResponse(content.snapshot, params.id).responseTo(ctx.req),
  });
};
