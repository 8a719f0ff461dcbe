/**
 * Collections (keyed): the published top-level collections with their `child_collections`, and any
 * published collection by slug. Bodies are serialized once per bake; the fast path serves them
 * without Koa (keyed snapshot reads), with the same body functions.
 */
import { z } from 'zod';
import { Collection } from '../../artifacts/format.ts';
import type { RouteModule } from '../app.ts';
import { type ContentSnapshot, freeze, perSnapshot } from '../content.ts';
import { notFound } from '../errors.ts';
import { JSON_TYPE, keyedReadsFastPath, type SnapshotRead } from '../fastpath.ts';

const listBody = perSnapshot((snapshot) => freeze({ data: snapshot.topCollections }).body);
const bySlugBodies = perSnapshot(
  (snapshot) => new Map([...snapshot.collectionsBySlug].map(([slug, collection]) => [slug, freeze({ data: collection }).body])),
);

const Slug = z.string().min(1).max(200).describe('collection slug');
/** Slugs the fast path takes as they are; anything percent-encoded or odd goes to Koa, which decodes. */
const PLAIN_SLUG = /^[A-Za-z0-9._~-]{1,200}$/;

function collectionBody(snapshot: ContentSnapshot, slug: string): Buffer {
  const body = bySlugBodies(snapshot).get(slug);
  if (!body) throw notFound('No published collection with this slug');
  return body;
}

const ITEM_PREFIX = '/v1/collections/';
const collectionReads: SnapshotRead = (pathname) => {
  if (pathname === '/v1/collections') return listBody;
  if (!pathname.startsWith(ITEM_PREFIX)) return undefined;
  const slug = pathname.slice(ITEM_PREFIX.length);
  return PLAIN_SLUG.test(slug) ? (snapshot) => collectionBody(snapshot, slug) : undefined;
};

export const collectionRoutes: RouteModule = (api, services) => {
  const { content } = services;
  services.addFastPath(keyedReadsFastPath(services, '/v1/collections', collectionReads));
  api.route({
    method: 'GET',
    path: '/v1/collections',
    summary: 'Published top-level collections, each with its child collections',
    tag: 'collections',
    access: 'key',
    response: { json: z.object({ data: z.array(Collection) }) },
    handler(ctx) {
      ctx.type = JSON_TYPE;
      ctx.body = listBody(content.snapshot);
    },
  });

  api.route({
    method: 'GET',
    path: '/v1/collections/{slug}',
    summary: 'One published collection (top-level or child) by slug',
    tag: 'collections',
    access: 'key',
    params: z.object({ slug: Slug }),
    response: { json: z.object({ data: Collection }) },
    errors: [404],
    handler(ctx, { params }) {
      const body = collectionBody(content.snapshot, params.slug);
      ctx.type = JSON_TYPE;
      ctx.body = body;
    },
  });
};
