import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CharactersClient, DETAIL_FIELDS, SUMMARY_FIELDS, TtlCache } from '../../../server/upstream/characters.ts';
import { type DirectusFake, HEAVY_CHARACTER_IDS, startFakeDirectus } from '../../fakes/directus.ts';
import { type OpenApiDoc, validateAgainstOpenApi } from '../../helpers/openapi.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';

type Character = Record<string, unknown> & { id: number };
type ListBody = { data: Character[]; meta: { total: number; filtered: number; page: number; limit: number } };

let fake: DirectusFake;
let server: TestServer;

beforeAll(async () => {
  fake = await startFakeDirectus();
  server = await startTestServer({ env: { CHARACTERS_UPSTREAM_URL: fake.url, UPSTREAM_TIMEOUT_MS: '400' } });
});
afterAll(async () => {
  await server?.close();
  await fake?.close();
});

const upstreamRecord = (id: number) => fake.items.codex!.find((r) => r.id === id)!;
const codexRequests = () => fake.requestsTo(/^\/items\/codex/);

describe('GET /v1/characters', () => {
  it('lists the lightweight summary fields, page by page, with the list meta', async () => {
    const res = await server.get('/v1/characters');
    expect(res.status).toBe(200);
    const body = (await res.json()) as ListBody;
    expect(body.meta).toEqual({ total: 300, filtered: 300, page: 1, limit: 25 });
    expect(body.data.map((c) => c.id)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    for (const c of body.data) expect(Object.keys(c).sort()).toEqual([...SUMMARY_FIELDS].sort());

    const page3 = (await (await server.get('/v1/characters?page=3&limit=10')).json()) as ListBody;
    expect(page3.data.map((c) => c.id)).toEqual(Array.from({ length: 10 }, (_, i) => i + 21));
    expect(page3.meta).toEqual({ total: 300, filtered: 300, page: 3, limit: 10 });
    const sent = codexRequests().find((r) => r.query.get('offset') === '20')!;
    expect(sent.query.get('limit')).toBe('10');
    expect(sent.query.get('sort')).toBe('id');
    expect(sent.query.get('meta')).toBe('total_count,filter_count');
  });

  it('resolves Directus file ids to absolute asset URLs and the CID to an ipfs:// URI', async () => {
    const body = (await (await server.get('/v1/characters?limit=10')).json()) as ListBody;
    for (const c of body.data) {
      const r = upstreamRecord(c.id);
      expect(c.thumbnail_url).toBe(`${fake.url}/assets/${r.thumbnail as string}`);
      expect(c.thumbnail_character_url).toBe(`${fake.url}/assets/${r.thumbnail_character as string}`);
      expect(c.thumbnail_background_url).toBe(
        r.thumbnail_background === null ? null : `${fake.url}/assets/${r.thumbnail_background as string}`,
      );
      expect(c.image_ipfs_url).toBe(`ipfs://${r.ipfs_final as string}`);
      expect(c.name).toEqual(r.name);
      expect(c.owner).toBe(r.owner);
    }
    expect(body.data.find((c) => c.id === 10)!.thumbnail_background_url).toBeNull();
  });

  it('selects fields, but never the heavy profiles, the codex document or unknown names', async () => {
    const res = await server.get(
      '/v1/characters?limit=5&fields=name,thumbnail_url,biography,agent_profiles,bot_profile,codex_document,bogus',
    );
    const body = (await res.json()) as ListBody;
    for (const c of body.data) expect(Object.keys(c).sort()).toEqual(['biography', 'id', 'name', 'thumbnail_url']);
    const sent = codexRequests().at(-1)!;
    expect(sent.query.get('fields')!.split(',').sort()).toEqual(['biography', 'id', 'name', 'thumbnail']);

    // Heavy records listed: the upstream was never asked for their blobs.
    const heavyPage = (await (await server.get(`/v1/characters?page=1&limit=100&fields=agent_profiles`)).json()) as ListBody;
    expect(heavyPage.data.some((c) => HEAVY_CHARACTER_IDS.includes(c.id))).toBe(true);
    for (const c of heavyPage.data) expect(Object.keys(c).sort()).toEqual([...SUMMARY_FIELDS].sort());
    for (const r of codexRequests()) expect(r.query.get('fields') ?? '').not.toMatch(/agent_profiles|bot_profile/);
  });

  it('searches upstream and reports the filtered count', async () => {
    const word = 'steppe';
    const expected = fake.items.codex!.filter((r) =>
      Object.values(r).some((v) =>
        (typeof v === 'string' ? [v] : Array.isArray(v) ? v.filter((x) => typeof x === 'string') : []).some((s: string) =>
          s.toLowerCase().includes(word),
        ),
      ),
    );
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThan(300);
    const body = (await (await server.get(`/v1/characters?search=${word}&limit=100`)).json()) as ListBody;
    expect(body.meta).toEqual({ total: 300, filtered: expected.length, page: 1, limit: 100 });
    expect(body.data.map((c) => c.id)).toEqual(expected.map((r) => r.id).slice(0, 100));
  });

  it('clamps limit and falls back on malformed page parameters', async () => {
    const body = (await (await server.get('/v1/characters?limit=1000&page=zero')).json()) as ListBody;
    expect(body.meta).toMatchObject({ page: 1, limit: 100 });
    expect(body.data).toHaveLength(100);
  });
});

describe('GET /v1/characters/{id}', () => {
  it('answers the detail fields, without the heavy extras unless included', async () => {
    const res = await server.get('/v1/characters/7');
    expect(res.status).toBe(200);
    const { data } = (await res.json()) as { data: Character };
    expect(Object.keys(data).sort()).toEqual([...SUMMARY_FIELDS, ...DETAIL_FIELDS].sort());
    expect(data.biography).toEqual(upstreamRecord(7).biography);
    expect(data.writing_flavor).toBe(upstreamRecord(7).writing_flavor);
  });

  it('adds agent_profiles and bot_profile with include=profiles, codex_document with include=codex', async () => {
    const profiles = (await (await server.get('/v1/characters/77?include=profiles')).json()) as { data: Character };
    expect(profiles.data.agent_profiles).toEqual(upstreamRecord(77).agent_profiles);
    expect(profiles.data.bot_profile).toEqual(upstreamRecord(77).bot_profile);
    expect(JSON.stringify(profiles.data.agent_profiles).length).toBeGreaterThan(100_000);
    expect(profiles.data).not.toHaveProperty('codex_document');

    const codex = (await (await server.get('/v1/characters/8?include=codex,unknown')).json()) as { data: Character };
    expect(codex.data.codex_document).toBe(upstreamRecord(8).codex_document);
    expect(typeof codex.data.codex_document).toBe('string');
    expect(codex.data).not.toHaveProperty('agent_profiles');

    const none = (await (await server.get('/v1/characters/9?include=codex,profiles')).json()) as { data: Character };
    expect(none.data.codex_document).toBeNull();
    expect(none.data.agent_profiles).toEqual(upstreamRecord(9).agent_profiles);
  });

  it('answers 404 for ids the upstream refuses (403) and for ids outside 1..10000 without asking it', async () => {
    const before = codexRequests().length;
    expect(await errorOf(await server.get('/v1/characters/9999'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(codexRequests().length).toBe(before + 1);
    expect(codexRequests().at(-1)!.status).toBe(403);
    for (const id of ['0', '10001', 'abc', '-3', '1.5']) {
      expect((await server.get(`/v1/characters/${id}`)).status).toBe(404);
    }
    expect(codexRequests().length).toBe(before + 1);
  });
});

describe('cache', () => {
  it('makes one upstream call for concurrent misses of the same key and serves repeats from the cache', async () => {
    const before = codexRequests().length;
    const responses = await Promise.all(Array.from({ length: 12 }, () => server.get('/v1/characters?page=7&limit=13')));
    const bodies = await Promise.all(responses.map((r) => r.text()));
    expect(responses.every((r) => r.status === 200)).toBe(true);
    expect(new Set(bodies).size).toBe(1);
    expect(codexRequests().length).toBe(before + 1);

    await server.get('/v1/characters?page=7&limit=13');
    await Promise.all(Array.from({ length: 5 }, () => server.get('/v1/characters/123?include=codex')));
    await server.get('/v1/characters/123?include=codex');
    expect(codexRequests().length).toBe(before + 2);
  });

  it('expires entries after the TTL and stays within its entry bound', async () => {
    let now = 1_000_000;
    const client = new CharactersClient({ url: fake.url, timeoutMs: 2_000, now: () => now, cacheMaxEntries: 3 });
    const before = codexRequests().length;
    await client.get(1);
    await client.get(1);
    expect(codexRequests().length).toBe(before + 1);
    now += 4 * 60_000;
    await client.get(1);
    expect(codexRequests().length).toBe(before + 1);
    now += 2 * 60_000; // past 5 minutes since it was fetched
    await client.get(1);
    expect(codexRequests().length).toBe(before + 2);

    // Entries 2, 3, 4 push 1 out of a 3-entry cache.
    for (const id of [2, 3, 4]) await client.get(id);
    expect(codexRequests().length).toBe(before + 5);
    await client.get(1);
    expect(codexRequests().length).toBe(before + 6);
    await client.get(4);
    expect(codexRequests().length).toBe(before + 6);
  });
});

describe('TtlCache', () => {
  it('stays within its byte bound, least recently used out first, and answers an entry larger than the bound uncached', async () => {
    const cache = new TtlCache<string>({ ttlMs: 60_000, maxEntries: 10, maxBytes: 100 });
    const loads: string[] = [];
    const load = (key: string, bytes: number) => () => {
      loads.push(key);
      return Promise.resolve({ value: key, bytes });
    };
    for (const key of ['a', 'b']) await cache.get(key, load(key, 40));
    await cache.get('a', load('a', 40)); // a is now the most recently used
    await cache.get('c', load('c', 40)); // 120 bytes > 100: b goes
    expect(cache.size).toEqual({ entries: 2, bytes: 80 });
    expect(cache.peek('b')).toBeUndefined();
    expect(cache.peek('a')?.value).toBe('a');
    expect((await cache.get('huge', load('huge', 101))).value).toBe('huge');
    expect(cache.peek('huge')).toBeUndefined();
    expect(cache.size).toEqual({ entries: 2, bytes: 80 });
    expect(loads).toEqual(['a', 'b', 'c', 'huge']);
  });
});

describe('upstream failures', () => {
  it.each([
    ['a 5xx', { kind: 'status', status: 503 } as const, 11],
    ['a garbage body', { kind: 'garbage' } as const, 12],
    ['a reset connection', { kind: 'reset' } as const, 13],
    ['no answer (timeout)', { kind: 'timeout' } as const, 14],
  ])('answers 502 UPSTREAM for %s, without upstream text, and does not cache the failure', async (_name, fault, page) => {
    fake.fault('/items/codex', { ...fault, times: 1 });
    const path = `/v1/characters?page=${page}&limit=3`;
    const res = await server.get(path);
    const error = await errorOf(res);
    expect(error).toMatchObject({ status: 502, code: 'UPSTREAM' });
    expect(error.message).toBe('The character knowledge base is temporarily unavailable');
    const ok = await server.get(path);
    expect(ok.status).toBe(200);
    const first = (page - 1) * 3 + 1;
    expect(((await ok.json()) as ListBody).data.map((c) => c.id)).toEqual([first, first + 1, first + 2]);
    fake.clearFaults();
  });

  it('serves a slow upstream that answers within the timeout', async () => {
    fake.fault('/items/codex/56', { kind: 'slow', ms: 50, times: 1 });
    const res = await server.get('/v1/characters/56');
    expect(res.status).toBe(200);
    expect(fake.requestsTo('/items/codex/56').at(-1)!.fault).toBe('slow');
  });

  it('answers 502 for a failing detail request too', async () => {
    fake.fault('/items/codex/55', { kind: 'status', status: 500, times: 1 });
    expect(await errorOf(await server.get('/v1/characters/55'))).toMatchObject({ status: 502, code: 'UPSTREAM' });
    expect((await server.get('/v1/characters/55')).status).toBe(200);
  });

  it('answers 503 UNCONFIGURED when no character upstream is configured', async () => {
    const bare = await startTestServer();
    try {
      expect(await errorOf(await bare.get('/v1/characters'))).toMatchObject({ status: 503, code: 'UNCONFIGURED' });
      expect(await errorOf(await bare.get('/v1/characters/1'))).toMatchObject({ status: 503, code: 'UNCONFIGURED' });
    } finally {
      await bare.close();
    }
  });

  it('requires a key', async () => {
    expect(await errorOf(await server.get('/v1/characters', { key: null }))).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
  });
});

describe('OpenAPI', () => {
  it('documents every response of the character routes', async () => {
    const doc = (await (await server.get('/v1/openapi.json')).json()) as OpenApiDoc;
    fake.fault('/items/codex/4242', { kind: 'status', status: 500 });
    for (const path of [
      '/v1/characters',
      '/v1/characters?fields=name,biography&limit=3',
      '/v1/characters?search=steppe',
      '/v1/characters/7?include=profiles,codex',
      '/v1/characters/12',
      '/v1/characters/9999',
      '/v1/characters/4242',
    ]) {
      const res = await server.get(path);
      validateAgainstOpenApi(doc, 'GET', path, res.status, await res.json());
    }
    const unauthorized = await server.get('/v1/characters', { key: null });
    validateAgainstOpenApi(doc, 'GET', '/v1/characters', unauthorized.status, await unauthorized.json());
    fake.clearFaults();
  });
});
