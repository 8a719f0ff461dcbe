/**
 * Collections (keyed): the published top-level collections with their `child_collections`, and any
 * published collection by slug. Bodies are serialized once per bake and read from the content
 * snapshot (fast path and Koa alike).
 */
import { z } from 'zod';
import { Collection } from '../../artifacts/format.ts';
import type { RouteModule } from '../api.ts';
import { type ContentSnapshot, freeze, perSnapshot } from '../content.ts';
import { notFound } from '../errors.ts';

const listBody = perSnapshot((snapshot) => freeze({ data: snapshot.topCollections }).body);
const bySlugBodies = perSnapshot(
  (snapshot) => new Map([...snapshot.collectionsBySlug].map(([slug, collection]) => [slug, freeze({ data: collection }).body])),
);

function collectionBody(snapshot: ContentSnapshot, slug: string): Buffer {
  const body = bySlugBodies(snapshot).get(slug);
  if (!body) throw notFound('No published collection with this slug');
  return body;
}

export const collectionRoutes: RouteModule = (api, { content }) => {
  api.route({
    method: 'GET',
    path: '/v1/collections',
    operationId: 'listCollections',
    summary: 'Published top-level collections, each with its child collections',
    tag: 'collections',
    access: 'key',
    response: { json: z.object({ data: z.array(Collection) }) },
    fast: () => () => listBody(content.snapshot),
  });

  api.route({
    method: 'GET',
    path: '/v1/collections/{slug}',
    operationId: 'getCollection',
    summary: 'One published collection (top-level or child) by slug',
    tag: 'collections',
    access: 'key',
    params: z.object({ slug: z.string().min(1).max(200).describe('collection slug') }),
    response: { json: z.object({ data: Collection }) },
    errors: [404],
    fast: ({ params }) => () => collectionBody(content.snapshot, params.slug),
  });
};
