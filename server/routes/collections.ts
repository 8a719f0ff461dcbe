/**
 * Collections (keyed): the published top-level collections with their `child_collections`, and any
 * published collection by slug. Responses are read from the content snapshot as snapshot responses:
 * serialized and compressed once per bake, strong ETag, 304.
 */
import { z } from 'zod';
import { Collection } from '../../artifacts/format.ts';
import type { RouteModule } from '../route-table.ts';
import { type ContentSnapshot, perSnapshot } from '../content.ts';
import { notFound } from '../errors.ts';
import { KEYED_CACHE_CONTROL, SnapshotResponse } from '../snapshot-response.ts';

const keyed = { cacheControl: KEYED_CACHE_CONTROL };
const listResponse = perSnapshot((snapshot) => SnapshotResponse.of({ data: snapshot.topCollections }, keyed));
const bySlugResponses = perSnapshot(
  (snapshot) =>
    new Map([...snapshot.collectionsBySlug].map(([slug, collection]) => [slug, SnapshotResponse.of({ data: collection }, keyed)])),
);

function collectionResponse(snapshot: ContentSnapshot, slug: string): SnapshotResponse {
  const response = bySlugResponses(snapshot).get(slug);
  if (!response) throw notFound('No published collection with this slug');
  return response;
}

export const collectionRoutes: RouteModule = (api, { content }) => {
  api.route({
    method: 'GET',
    path: '/v1/collections',
    operationId: 'listCollections',
    summary: 'Published top-level collections, each with its child collections',
    tag: 'collections',
    access: 'key',
    response: { json: z.object({ data: z.array(Collection) }), precompressed: true },
    errors: [304],
    handler: (ctx) => listResponse(content.snapshot).responseTo(ctx.req),
  });

  api.route({
    method: 'GET',
    path: '/v1/collections/{slug}',
    operationId: 'getCollection',
    summary: 'One published collection (top-level or child) by slug',
    tag: 'collections',
    access: 'key',
    params: z.object({ slug: z.string().min(1).max(200).describe('collection slug') }),
    response: { json: z.object({ data: Collection }), precompressed: true },
    errors: [304, 404],
    handler: (ctx, { params }) => collectionResponse(content.snapshot, params.slug).responseTo(ctx.req),
  });
};
