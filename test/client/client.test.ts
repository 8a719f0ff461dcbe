/**
 * The typed client (client/index.ts) against a real server with a real key, over the fixture bake
 * and every upstream answered by the test fakes: EVERY GET operation of the served document is
 * called through it (the test fails when one is added without a call here), and the answers are
 * read through their generated types (tsc checks this file). And the committed client/schema.d.ts
 * must be what `make client` makes of the served document.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMuseumClient, type MuseumClient } from '../../client/index.ts';
import { SCHEMA_PATH, schemaSource } from '../../scripts/client-schema.ts';
import type { OpenApiDoc } from '../helpers/openapi.ts';
import { type EveryUpstream, startWithEveryUpstream } from './every-upstream.ts';

let world: EveryUpstream;
let museum: MuseumClient;
let doc: OpenApiDoc;
/** `METHOD template` of every request the client sent. */
const called = new Set<string>();

beforeAll(async () => {
  world = await startWithEveryUpstream();
  museum = createMuseumClient(world.server.url, world.server.key);
  museum.use({
    onRequest({ request, schemaPath }) {
      called.add(`${request.method} ${schemaPath}`);
    },
  });
  doc = (await (await fetch(`${world.server.url}/v1/openapi.json`)).json()) as OpenApiDoc;
}, 30_000);
afterAll(() => world?.close());

describe('client/schema.d.ts', () => {
  it('is what `make client` makes of the served document', async () => {
    const fresh = await schemaSource(doc as unknown as Record<string, unknown>);
    const committed = readFileSync(SCHEMA_PATH, 'utf8');
    if (fresh !== committed) expect.fail(`${SCHEMA_PATH} is stale: the API changed since it was generated; run make client`);
  });
});

describe('every GET operation through the typed client', () => {
  it('content: index, document, collections, artworks, rooms, slots, files', async () => {
    const index = await museum.GET('/v1');
    expect(index.data?.data.endpoints).toContain('GET /v1/rooms/{id}');
    const document = await museum.GET('/v1/openapi.json');
    expect(document.data?.openapi).toBe('3.1.0');

    const collections = await museum.GET('/v1/collections');
    const slug = collections.data!.data[0]!.slug;
    const collection = await museum.GET('/v1/collections/{slug}', { params: { path: { slug } } });
    expect(collection.data?.data.slug).toBe(slug);

    const artworks = await museum.GET('/v1/artworks', { params: { query: { limit: 2, page: 1 } } });
    expect(artworks.data?.meta).toMatchObject({ page: 1, limit: 2 });
    const id = artworks.data!.data[0]!.id;
    const artwork = await museum.GET('/v1/artworks/{id}', { params: { path: { id } } });
    expect(artwork.data?.data.id).toBe(id);

    const rooms = await museum.GET('/v1/rooms');
    const first = rooms.data!.data[0]!;
    const room = await museum.GET('/v1/rooms/{id}', { params: { path: { id: first.id } } });
    expect(room.data?.data).toEqual(first);
    const slots = await museum.GET('/v1/rooms/{id}/slots', { params: { path: { id: first.id } } });
    expect(slots.data?.data.slots.length).toBeGreaterThan(0);

    const name = new URL(first.image_url!).pathname.split('/').pop()!;
    const variant = { path: { name }, query: { width: 64, format: 'webp' as const } };
    const file = await museum.GET('/files/{name}', { params: variant, parseAs: 'arrayBuffer' });
    expect(file.response.headers.get('content-type')).toBe('image/webp');
    expect((file.data as ArrayBuffer).byteLength).toBeGreaterThan(0);
  });

  it('upstreams: characters, search, Library, souls', async () => {
    const characters = await museum.GET('/v1/characters', { params: { query: { limit: 2 } } });
    const character = await museum.GET('/v1/characters/{id}', { params: { path: { id: characters.data!.data[0]!.id } } });
    expect(character.data?.data.id).toBe(characters.data!.data[0]!.id);

    const search = await museum.GET('/v1/search', { params: { query: { q: 'a', limit: 3 } } });
    expect(search.data?.meta.unavailable).toBeUndefined();
    expect(search.data?.data.characters.length).toBeGreaterThan(0);

    const libraryCollections = await museum.GET('/v1/library/collections');
    expect(libraryCollections.data?.data.length).toBeGreaterThan(0);

    const { chainId, contract } = world.souls;
    const souls = await museum.GET('/v1/souls/{chainId}/{contractAddress}', { params: { path: { chainId, contractAddress: contract } } });
    const tokenId = souls.data!.data.souls[0]!.tokenId!;
    const soulPath = { chainId, contractAddress: contract, tokenId };
    const soul = await museum.GET('/v1/souls/{chainId}/{contractAddress}/{tokenId}', { params: { path: soulPath } });
    expect(soul.data?.data.tokenId).toBe(tokenId);
  });

  it('guide and presence', async () => {
    const id = world.exhibitionId;
    const exhibition = await museum.GET('/v1/guide/exhibitions/{id}', { params: { path: { id } } });
    expect(exhibition.data?.data.id).toBe(id);
    const tour = await museum.GET('/v1/guide/exhibitions/{id}/tour', { params: { path: { id } } });
    expect(tour.data?.data.exhibition).toBe(id);
    expect(tour.data?.data.rooms.length).toBeGreaterThan(0);
    const suggestions = await museum.GET('/v1/guide/exhibitions/{id}/suggestions', { params: { path: { id } } });
    expect(suggestions.data?.data.suggestions.length).toBeGreaterThan(0);
    const followup = await museum.GET('/v1/guide/followup', { params: { query: { exhibition: id, session: world.session } } });
    expect(typeof followup.data?.meta.pending).toBe('boolean');

    const clip = world.speechPath.replace(/^\/v1\/guide\/tts\//, '').replace(/\.mp3$/, '');
    const speech = await museum.GET('/v1/guide/tts/{id}.mp3', { params: { path: { id: clip } }, parseAs: 'arrayBuffer' });
    expect(speech.response.headers.get('content-type')).toMatch(/^audio\/mpeg/);

    const controller = new AbortController();
    const presence = await museum.GET('/v1/presence/stream', { parseAs: 'stream', signal: controller.signal });
    const reader = (presence.data as ReadableStream<Uint8Array>).getReader();
    const { value } = await reader.read();
    expect(new TextDecoder().decode(value)).toMatch(/^data: \{"type":"hello"/m);
    controller.abort();
  });

  it('typed errors: the envelope with its code', async () => {
    const missing = await museum.GET('/v1/rooms/{id}', { params: { path: { id: 424242 } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.errors[0]?.extensions.code).toBe('NOT_FOUND');
    const anonymous = await createMuseumClient(world.server.url).GET('/v1/rooms');
    expect(anonymous.error?.errors[0]?.extensions.code).toBe('UNAUTHORIZED');
  });

  it('called every GET operation of the document', () => {
    const gets = Object.entries(doc.paths).flatMap(([template, ops]) => ('get' in ops ? [`GET ${template}`] : []));
    expect(gets.length).toBeGreaterThan(20);
    expect(gets.filter((operation) => !called.has(operation))).toEqual([]);
  });
});
