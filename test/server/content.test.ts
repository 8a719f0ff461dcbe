/**
 * The content routes over a published fixture bake: collections, artworks (every field, the four
 * media normalization results, paging, clamping, fallbacks, search, the collection filter) and rooms
 * (all twelve fields, URLs that lead to the right bytes).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artwork, Collection } from '../../artifacts/format.ts';
import { publishManifest, putContentFile } from '../../artifacts/store.ts';
import { type FixtureBake, publishFixtureBake } from '../helpers/artifacts.ts';
import { errorOf, startTestServer, type TestServer } from '../helpers/server.ts';

const EXTRA = 60;
let server: TestServer;
let fx: FixtureBake;

interface Page {
  data: Artwork[];
  meta: { total: number; page: number; limit: number };
}

beforeAll(async () => {
  // Plenty of requests below: several keys keep every test clear of the rate limit.
  server = await startTestServer({ env: { IPFS_GATEWAY: 'https://gateway.example' } });
  fx = await publishFixtureBake(server.dataDir, { extraArtworks: EXTRA, ipfsGateway: 'https://gateway.example' });
  await server.services.content.reload();
});
afterAll(() => server.close());

let keyCounter = 0;
const freshKey = async () => (await server.services.keys.create(`content-${++keyCounter}`)).key;
const json = async <T>(path: string, key?: string): Promise<T> => {
  key ??= await freshKey();
  const res = await server.get(path, { key });
  expect(res.status, path).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  return (await res.json()) as T;
};
const artworksPage = (query: string) => json<Page>(`/v1/artworks${query}`);
const published = () => fx.manifest.artworks;
const record = (id: number) => fx.content.artworks.find((a) => a.id === id)!;

describe('collections', () => {
  it('lists the published top-level collections with their published children', async () => {
    const { data } = await json<{ data: Collection[] }>('/v1/collections');
    expect(data.map((c) => c.slug)).toEqual(['genesis', 'rooms']);
    const genesis = data[0]!;
    expect(genesis).toEqual({
      id: 1,
      name: 'Genesis',
      title: 'Genesis',
      description: 'The first works of the museum.',
      slug: 'genesis',
      parent_collection: null,
      // The draft child (genesis-sketches) is not published.
      child_collections: [{ id: 2, name: 'Genesis Portraits', slug: 'genesis-portraits' }],
    });
    expect(data[1]!.child_collections).toEqual([]);
  });

  it('finds any published collection by slug, children included, with its parent reference', async () => {
    const child = (await json<{ data: Collection }>('/v1/collections/genesis-portraits')).data;
    expect(child).toMatchObject({ id: 2, slug: 'genesis-portraits', parent_collection: { id: 1, name: 'Genesis', slug: 'genesis' } });
    expect(child.child_collections).toEqual([{ id: 6, name: 'Portrait Close-ups', slug: 'portrait-close-ups' }]);
    expect((await json<{ data: Collection }>('/v1/collections/genesis')).data.id).toBe(1);
  });

  it("answers 404 for drafts, drafts' descendants and unknown slugs", async () => {
    for (const slug of ['genesis-sketches', 'archive', 'nope', 'GENESIS', '%20genesis']) {
      expect(await errorOf(await server.get(`/v1/collections/${slug}`, { key: await freshKey() }))).toMatchObject({
        status: 404,
        code: 'NOT_FOUND',
      });
    }
  });
});

describe('artworks: fields and media normalization', () => {
  it('returns every field of an artwork by id', async () => {
    const { data } = await json<{ data: Artwork }>(`/v1/artworks/${fx.artworks.trustworthy}`);
    expect(Object.keys(data).sort()).toEqual(
      ['animation', 'artist_name', 'collection', 'id', 'marketplace_url', 'media', 'name', 'ratio'].sort(),
    );
    const stored = record(fx.artworks.trustworthy);
    expect(data).toEqual({
      id: stored.id,
      name: stored.name,
      artist_name: stored.artist_name,
      collection: stored.collection,
      media: { url: stored.media_info!.url, type: 'image', content_type: 'image/jpeg', width: 1920, height: 1080 },
      animation: null,
      ratio: 1920 / 1080,
      marketplace_url: stored.marketplace_url,
    });
  });

  it('(1) replaces a dead-host URL with the live one of the marketplace record', async () => {
    const stored = record(fx.artworks.deadHost);
    expect(stored.media_info!.url).toMatch(/openseauserdata\.com/);
    const { data } = await json<{ data: Artwork }>(`/v1/artworks/${stored.id}`);
    expect(data.media!.url).toBe(stored.marketplace.display_image_url);
    expect(JSON.stringify(data)).not.toMatch(/openseauserdata/);
  });

  it('(2) replaces a square CDN crop with the original file and drops the crop dimensions', async () => {
    const stored = record(fx.artworks.squareCrop);
    expect(stored.media_info!.url).toMatch(/i2c\.seadn\.io/);
    const { data } = await json<{ data: Artwork }>(`/v1/artworks/${stored.id}`);
    expect(data.media).toMatchObject({ url: stored.marketplace.original_image_url, width: null, height: null });
    // (3) no trustworthy dimensions: ratio stays 1 (and the 500×500 crop did not produce it).
    expect(data.ratio).toBe(1);
  });

  it('(3) takes the ratio from trustworthy dimensions only, never from a square crop', async () => {
    const stored = record(fx.artworks.squareCropWithMotion);
    const { data } = await json<{ data: Artwork }>(`/v1/artworks/${stored.id}`);
    // The "original" is a video, so the crop URL stays — without its square dimensions…
    expect(data.media).toMatchObject({ url: stored.media_info!.url, width: null, height: null });
    // …and the ratio comes from the animation's real dimensions.
    expect(data.animation).toMatchObject({
      url: stored.display_animation_info!.url,
      type: 'video',
      content_type: 'video/mp4',
      width: 1280,
      height: 720,
    });
    expect(data.ratio).toBeCloseTo(16 / 9, 10);
    const portrait = (await json<{ data: Artwork }>(`/v1/artworks/${fx.artworks.inGrandchild}`)).data;
    expect(portrait.ratio).toBeCloseTo(600 / 900, 10);
  });

  it('(4) resolves ipfs:// and ipfs://ipfs/ URIs to the configured gateway', async () => {
    const single = (await json<{ data: Artwork }>(`/v1/artworks/${fx.artworks.ipfs}`)).data;
    expect(single.media!.url).toBe('https://gateway.example/ipfs/QmYwAPJzv5CZsnAzt8auVTLpG1bG6dkprdFM5ocTyBCQb/105.png');
    expect(single.ratio).toBeCloseTo(0.8, 10);
    const double = (await json<{ data: Artwork }>(`/v1/artworks/${fx.artworks.ipfsDoublePrefix}`)).data;
    expect(double.media!.url).toBe('https://gateway.example/ipfs/bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/106.gif');
    expect(double.animation!.url).toBe('https://gateway.example/ipfs/bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/106.mp4');
    const { data } = await artworksPage('?limit=100');
    expect(JSON.stringify(data)).not.toContain('ipfs://');
  });

  it('answers 404 for unknown ids, unpublished artworks and ids that are not positive integers', async () => {
    for (const id of ['999999', String(fx.artworks.inDraftCollection), '0', '-1', '1.5', 'abc', '1e3', '00101', '99999999999999999999']) {
      expect(await errorOf(await server.get(`/v1/artworks/${id}`, { key: await freshKey() })), id).toMatchObject({
        status: 404,
        code: 'NOT_FOUND',
      });
    }
  });
});

describe('artworks: paging', () => {
  it('defaults to 25 per page, in id order, with meta {total, page, limit}', async () => {
    const page = await artworksPage('');
    expect(page.meta).toEqual({ total: published().length, page: 1, limit: 25 });
    expect(page.data.map((a) => a.id)).toEqual(
      published()
        .slice(0, 25)
        .map((a) => a.id),
    );
    const ids = page.data.map((a) => a.id);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  });

  it('pages through everything exactly once', async () => {
    const seen: number[] = [];
    for (let page = 1; ; page++) {
      const { data, meta } = await artworksPage(`?page=${page}&limit=20`);
      expect(meta).toEqual({ total: published().length, page, limit: 20 });
      if (data.length === 0) break;
      seen.push(...data.map((a) => a.id));
    }
    expect(seen).toEqual(published().map((a) => a.id));
  });

  it('clamps out-of-range values and falls back to the default for non-integers', async () => {
    const cases: Array<[string, number, number]> = [
      ['?limit=1000', 1, 100],
      ['?limit=0', 1, 1],
      ['?limit=-5', 1, 1],
      ['?limit=abc', 1, 25],
      ['?limit=2.5', 1, 25],
      ['?limit=', 1, 25],
      ['?page=0', 1, 25],
      ['?page=-3', 1, 25],
      ['?page=two', 1, 25],
      ['?page=99999999999999999999999', 1, 25],
      ['?page=2&page=3&limit=10&limit=50', 2, 10],
    ];
    for (const [query, page, limit] of cases) {
      const body = await artworksPage(query);
      expect(body.meta, query).toEqual({ total: published().length, page, limit });
      expect(body.data).toHaveLength(Math.min(limit, Math.max(0, published().length - (page - 1) * limit)));
    }
  });

  it('returns an empty page (with the total) past the end', async () => {
    const body = await artworksPage('?page=1000&limit=100');
    expect(body).toEqual({ data: [], meta: { total: published().length, page: 1000, limit: 100 } });
  });
});

describe('artworks: search and collection filter', () => {
  it('searches title or artist, case-insensitively (unicode included)', async () => {
    const byTitle = await artworksPage('?search=LANDSCAPE');
    expect(byTitle.data.map((a) => a.id)).toEqual([fx.artworks.trustworthy]);
    const byArtist = await artworksPage(`?search=${encodeURIComponent('émile ünger')}`);
    expect(byArtist.data.map((a) => a.id)).toEqual([fx.artworks.ipfs, fx.artworks.ipfsDoublePrefix]);
    const upper = await artworksPage(`?search=${encodeURIComponent('ÉMILE')}`);
    expect(upper.data.map((a) => a.id)).toEqual(byArtist.data.map((a) => a.id));
    const generated = await artworksPage('?search=artist%203&limit=100');
    const expected = published().filter(
      (a) => a.artist_name.toLowerCase().includes('artist 3') || a.name.toLowerCase().includes('artist 3'),
    );
    expect(generated.meta.total).toBe(expected.length);
    expect(generated.data.map((a) => a.id)).toEqual(expected.map((a) => a.id));
    expect((await artworksPage('?search=no%20such%20thing')).meta.total).toBe(0);
    // Title and artist are separate fields: a phrase spanning both matches nothing.
    expect((await artworksPage(`?search=${encodeURIComponent('landscape\nchiara')}`)).meta.total).toBe(0);
    // An empty or blank search does not filter.
    expect((await artworksPage('?search=%20%20')).meta.total).toBe(published().length);
  });

  it("filters by comma-separated slugs; a parent slug also matches its descendants' artworks", async () => {
    const ofCollections = (slugs: string[]) =>
      published()
        .filter((a) => slugs.includes(a.museum_collection!))
        .map((a) => a.id);
    const genesis = await artworksPage('?collection=genesis&limit=100');
    expect(genesis.data.map((a) => a.id)).toEqual(ofCollections(['genesis', 'genesis-portraits', 'portrait-close-ups']));
    expect(genesis.data.map((a) => a.id)).toContain(fx.artworks.inGrandchild);
    const portraits = await artworksPage('?collection=genesis-portraits&limit=100');
    expect(portraits.data.map((a) => a.id)).toEqual(ofCollections(['genesis-portraits', 'portrait-close-ups']));
    const two = await artworksPage('?collection=rooms,%20portrait-close-ups&limit=100');
    expect(two.data.map((a) => a.id)).toEqual(ofCollections(['rooms', 'portrait-close-ups']));
    expect(two.meta.total).toBe(ofCollections(['rooms', 'portrait-close-ups']).length);
    // The filter matches the museum collection, never the marketplace slug shown as `collection`.
    expect(genesis.data.every((a) => a.collection !== 'genesis')).toBe(true); // shown: the marketplace slug
    expect((await artworksPage('?collection=genesis-drop')).meta.total).toBe(0);
    expect((await artworksPage('?collection=loose-marketplace-collection')).meta.total).toBe(0);
    const all = await artworksPage('?limit=100');
    expect(all.data.map((a) => a.id)).toContain(fx.artworks.outsideMuseumCollections); // listed, in no museum collection
    // Drafts are not published, so nothing matches them.
    expect((await artworksPage('?collection=genesis-sketches')).meta.total).toBe(0);
    expect((await artworksPage('?collection=unknown')).meta.total).toBe(0);
    // Only separators: no filter.
    expect((await artworksPage('?collection=,,')).meta.total).toBe(published().length);
  });

  it('combines the filter, search and paging', async () => {
    const all = published().filter((a) => a.museum_collection === 'rooms' && a.name.toLowerCase().includes('generated'));
    const first = await artworksPage('?collection=rooms&search=Generated&limit=5');
    expect(first.meta).toEqual({ total: all.length, page: 1, limit: 5 });
    expect(first.data.map((a) => a.id)).toEqual(all.slice(0, 5).map((a) => a.id));
    const second = await artworksPage('?collection=rooms&search=Generated&limit=5&page=2');
    expect(second.data.map((a) => a.id)).toEqual(all.slice(5, 10).map((a) => a.id));
  });
});

describe('rooms', () => {
  it('lists every room with all twelve fields (and its model variants) and URLs to the content-addressed files', async () => {
    const { data } = await json<{ data: Array<Record<string, unknown>> }>('/v1/rooms');
    expect(data.map((r) => r.id)).toEqual([1, 2, 3]);
    for (const room of data) {
      expect(Object.keys(room).sort()).toEqual(
        [
          'architect',
          'description',
          'id',
          'image_url',
          'model_optimized_url',
          'model_url',
          'series',
          'slot_data_url',
          'slots',
          'thumbnail_url',
          'title',
          'token_id',
          'model_variants',
          'navmesh_url',
          'spawn',
        ].sort(),
      );
    }
    const file = (role: string) => `http://museum.test/files/${fx.files[role]!.ref.sha256}.${fx.files[role]!.ref.ext}`;
    expect(data[0]).toEqual({
      id: 1,
      title: 'The Atrium',
      architect: 'Studio Lovelace',
      description: 'A bright hall with a doorway to the south.',
      series: 'Genesis',
      slots: 3,
      token_id: '1',
      image_url: file('room1.image'),
      thumbnail_url: file('room1.thumbnail'),
      model_url: file('room1.model'),
      model_optimized_url: file('room1.model_optimized'),
      slot_data_url: 'http://museum.test/v1/rooms/1/slots',
      navmesh_url: null,
      spawn: null,
      // The fixture bake predates model variants (test/server/files-encoding.test.ts has baked ones).
      model_variants: [],
    });
    expect(data[1]).toMatchObject({
      id: 2,
      token_id: '2',
      model_optimized_url: null,
      slot_data_url: 'http://museum.test/v1/rooms/2/slots',
    });
    expect(data[2]).toMatchObject({
      id: 3,
      token_id: null,
      image_url: null,
      thumbnail_url: null,
      model_optimized_url: null,
      slot_data_url: null,
      model_url: file('room3.model'),
    });
  });

  it('hands out URLs that serve exactly the baked bytes', async () => {
    const { data } = await json<{ data: Array<Record<string, string | null>> }>('/v1/rooms');
    const local = (url: string) => url.replace('http://museum.test', '');
    const atrium = data[0]!;
    for (const [field, role] of [
      ['model_url', 'room1.model'],
      ['model_optimized_url', 'room1.model_optimized'],
      ['image_url', 'room1.image'],
      ['thumbnail_url', 'room1.thumbnail'],
    ] as const) {
      const res = await server.get(local(atrium[field]!), { key: null });
      expect(res.status, field).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(fx.files[role]!.bytes), field).toBe(true);
    }
    const slots = await server.get(local(atrium.slot_data_url!), { key: null });
    expect(((await slots.json()) as { data: unknown }).data).toEqual(fx.slotData.get(1));
  });
});

describe('slot data written before source_model existed (the bake before the 2026-12-02 change)', () => {
  it('is served as what it meant: computed from the source file, holding in the optimized model the manifest names', async () => {
    const old = await startTestServer();
    try {
      const bake = await publishFixtureBake(old.dataDir);
      const atrium = bake.manifest.rooms.find((r) => r.id === 1)!;
      const { source_model: _, models: __, ...current } = bake.slotData.get(1)!;
      // As the earlier bake wrote it: `model` named the source file.
      const legacy = { ...current, model: atrium.model!.sha256 };
      const slotFile = await putContentFile(old.dataDir, Buffer.from(JSON.stringify(legacy)), 'json');
      const rooms = bake.manifest.rooms.map((r) => (r.id === 1 ? { ...r, slot_data: slotFile } : r));
      await publishManifest(old.dataDir, { ...bake.manifest, bake_id: 'legacy', rooms });
      await old.services.content.reload();
      const res = await old.get('/v1/rooms/1/slots', { key: null });
      expect(res.status).toBe(200);
      const { data } = (await res.json()) as { data: Record<string, unknown> };
      expect(data).toEqual({ ...bake.slotData.get(1) });
      expect(data).toMatchObject({ model: atrium.model_optimized!.sha256, source_model: atrium.model!.sha256 });
    } finally {
      await old.close();
    }
  });
});
