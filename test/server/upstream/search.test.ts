import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Artwork, Collection } from '../../../artifacts/format.ts';
import { emptyManifest, publishManifest } from '../../../artifacts/store.ts';
import { type DirectusFake, startFakeDirectus } from '../../fakes/directus.ts';
import { type OpenApiDoc, validateAgainstOpenApi } from '../../helpers/openapi.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';

const ref = (c: Pick<Collection, 'id' | 'name' | 'slug'>) => ({ id: c.id, name: c.name, slug: c.slug });
const parent: Collection = {
  id: 1,
  name: 'Lantern Works',
  title: 'Works of the Lantern Guild',
  description: '',
  slug: 'lantern-works',
  parent_collection: null,
  child_collections: [],
};
const child: Collection = {
  id: 2,
  name: 'Embers',
  title: 'Small embers',
  description: '',
  slug: 'embers',
  parent_collection: ref(parent),
  child_collections: [],
};
parent.child_collections.push(ref(child));
const other: Collection = {
  id: 3,
  name: 'Salt',
  title: 'Salt and bone',
  description: '',
  slug: 'salt-series',
  parent_collection: null,
  child_collections: [],
};

const artwork = (id: number, name: string, artist_name: string, collection: string): Artwork => ({
  id,
  name,
  artist_name,
  collection,
  media: { url: `https://example.test/${id}.png`, type: 'image', content_type: 'image/png', width: 800, height: 600 },
  animation: null,
  ratio: 800 / 600,
  marketplace_url: `https://market.example/${id}`,
});
const artworks = [
  artwork(10, 'Lantern at Dusk', 'Mara Okafor', 'lantern-works'),
  artwork(11, 'Quiet Harbor', 'Lena LANTERNA', 'salt-series'),
  artwork(12, 'Salt Study', 'Ines Marrow', 'salt-series'),
  artwork(13, 'Third lantern', 'Ines Marrow', 'embers'),
];

let fake: DirectusFake;
let server: TestServer;

beforeAll(async () => {
  fake = await startFakeDirectus();
  server = await startTestServer({ env: { CHARACTERS_UPSTREAM_URL: fake.url, UPSTREAM_TIMEOUT_MS: '400' } });
  await publishManifest(server.dataDir, {
    ...emptyManifest(),
    bake_id: 'search-test',
    collections: [parent, child, other],
    artworks: artworks.map((a) => ({ ...a, museum_collection: a.collection })),
  });
  await server.services.content.reload();
});
afterAll(async () => {
  await server?.close();
  await fake?.close();
});
afterEach(() => fake.clearFaults());

type SearchBody = {
  data: { artworks: Artwork[]; collections: Collection[]; characters: Array<{ id: number }> };
  meta: { query: string; limit: number; unavailable?: unknown[] };
};

describe('GET /v1/search', () => {
  it('finds artworks by title or artist, collections by name, title or slug, and characters upstream', async () => {
    const res = await server.get('/v1/search?q=LanTern');
    expect(res.status).toBe(200);
    const body = (await res.json()) as SearchBody;
    expect(body.meta).toEqual({ query: 'LanTern', limit: 10 });
    expect(body.data.artworks.map((a) => a.id)).toEqual([10, 11, 13]);
    expect(body.data.artworks[0]).toEqual(artworks[0]);
    expect(body.data.collections.map((c) => c.slug)).toEqual(['lantern-works']);
    expect(body.data.characters.length).toBe(10);
    const sent = fake.requestsTo('/items/codex').at(-1)!;
    expect(sent.query.get('search')).toBe('LanTern');
    expect(sent.query.get('limit')).toBe('10');
    expect(Object.keys(body.data.characters[0]!)).not.toContain('agent_profiles');

    const bySlug = (await (await server.get('/v1/search?q=salt-ser')).json()) as SearchBody;
    expect(bySlug.data.collections.map((c) => c.id)).toEqual([3]);
    const byTitle = (await (await server.get('/v1/search?q=small%20embers')).json()) as SearchBody;
    expect(byTitle.data.collections.map((c) => c.id)).toEqual([2]);
    expect(byTitle.data.artworks).toEqual([]);
    const byArtist = (await (await server.get('/v1/search?q=ines%20marrow')).json()) as SearchBody;
    expect(byArtist.data.artworks.map((a) => a.id)).toEqual([12, 13]);
  });

  it('applies limit per group (1..25, default 10, clamped)', async () => {
    const two = (await (await server.get('/v1/search?q=lantern&limit=2')).json()) as SearchBody;
    expect(two.meta.limit).toBe(2);
    expect(two.data.artworks.map((a) => a.id)).toEqual([10, 11]);
    expect(two.data.characters).toHaveLength(2);
    const clamped = (await (await server.get('/v1/search?q=lantern&limit=500')).json()) as SearchBody;
    expect(clamped.meta.limit).toBe(25);
    expect(clamped.data.characters).toHaveLength(25);
  });

  it('requires q', async () => {
    for (const path of ['/v1/search', '/v1/search?q=', '/v1/search?q=%20%20']) {
      const error = await errorOf(await server.get(path));
      expect(error).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
      expect(error.message).toContain('q');
    }
  });

  it.each([
    ['fails', { kind: 'status', status: 500 } as const],
    ['times out', { kind: 'timeout' } as const],
    ['answers garbage', { kind: 'garbage' } as const],
  ])('still answers when the character upstream %s, with an empty characters group', async (_name, fault) => {
    fake.fault('/items/codex', fault);
    const res = await server.get('/v1/search?q=harbor');
    expect(res.status).toBe(200);
    const body = (await res.json()) as SearchBody;
    expect(body.data.characters).toEqual([]);
    expect(body.meta.unavailable).toEqual([
      { group: 'characters', reason: 'UPSTREAM', message: expect.stringMatching(/character upstream/) },
    ]);
    expect(body.data.artworks.map((a) => a.id)).toEqual([11]);
  });

  it('answers without a character upstream configured', async () => {
    const bare = await startTestServer();
    try {
      const body = (await (await bare.get('/v1/search?q=anything')).json()) as SearchBody;
      expect(body).toEqual({
        data: { artworks: [], collections: [], characters: [] },
        meta: { query: 'anything', limit: 10, unavailable: [{ group: 'characters', reason: 'UNCONFIGURED', message: expect.any(String) }] },
      });
    } finally {
      await bare.close();
    }
  });
});

describe('OpenAPI', () => {
  it('documents the search responses', async () => {
    const doc = (await (await server.get('/v1/openapi.json')).json()) as OpenApiDoc;
    for (const path of ['/v1/search?q=lantern', '/v1/search?q=salt&limit=1', '/v1/search']) {
      const res = await server.get(path);
      validateAgainstOpenApi(doc, 'GET', path, res.status, await res.json());
    }
  });
});
