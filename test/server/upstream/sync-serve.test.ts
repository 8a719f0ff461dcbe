import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artwork } from '../../../artifacts/format.ts';
import { bakeRooms } from '../../../bake/pipeline.ts';
import { syncContent } from '../../../bake/sync.ts';
import { sampleContentStore } from '../../fakes/content-store.ts';
import { type DirectusFake, startFakeDirectus } from '../../fakes/directus.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

// The operator's path, end to end: bake sync from a store with the real schema → bake rooms →
// serve. Artworks keep their media, and the list's collection filter matches museum collections.
const STORE = sampleContentStore({ artworks: 60, rooms: 0 });
let fake: DirectusFake;
let server: TestServer;
let tmp: string;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'sync-serve-'));
  fake = await startFakeDirectus({ characters: 0, content: STORE });
  const content = join(tmp, 'content');
  const data = join(tmp, 'data');
  await syncContent({ upstreamUrl: fake.url, contentDir: content, backoffMs: 5 });
  const summary = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
  expect(summary.published).toBe(true);
  server = await startTestServer({ dataDir: data, env: { IPFS_GATEWAY: 'https://gw.example' } });
}, 120_000);
afterAll(async () => {
  await server?.close();
  await fake?.close();
  rmSync(tmp, { recursive: true, force: true });
});

type Page = { data: Artwork[]; meta: { total: number } };
const list = async (query: string): Promise<Page> => (await (await server.get(`/v1/artworks${query}`)).json()) as Page;

describe('bake sync → bake → serve', () => {
  it('serves every listed artwork with its media, showing the marketplace slug as collection', async () => {
    const all = await list('?limit=100');
    const listed = STORE.content.artworks.filter((a) => !['generative-studies', 'vault'].includes(a.museum_collection ?? ''));
    expect(all.data.map((a) => a.id)).toEqual(listed.map((a) => a.id).sort((x, y) => x - y));
    expect(all.data.filter((a) => a.media === null).map((a) => a.id)).toEqual([112]); // the one with nothing live
    expect(all.data.find((a) => a.id === 101)).toMatchObject({
      collection: 'first-season',
      ratio: 0.75,
      media: { url: 'https://media.museum.example/works/101.png' },
    });
  });

  it("filters by museum collection (a parent's slug includes its children), never by the marketplace slug", async () => {
    const inFounders = STORE.content.artworks
      .filter((a) => ['founders', 'founders-portraits', 'founders-landscapes'].includes(a.museum_collection ?? ''))
      .map((a) => a.id);
    const founders = await list('?collection=founders&limit=100');
    expect(founders.data.map((a) => a.id)).toEqual(inFounders.sort((x, y) => x - y));
    expect(founders.meta.total).toBeGreaterThan(10);
    const union = await list('?collection=founders-portraits,generative&limit=100');
    const inUnion = STORE.content.artworks
      .filter((a) => ['founders-portraits', 'generative'].includes(a.museum_collection ?? ''))
      .map((a) => a.id);
    expect(union.data.map((a) => a.id)).toEqual(inUnion.sort((x, y) => x - y));
    expect((await list('?collection=first-season')).meta.total).toBe(0);
  });
});
