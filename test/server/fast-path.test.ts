/**
 * The keyed content reads (collections, artworks, rooms) are answered by the fast path; this proves
 * they are answered exactly as the Koa routes answer them — the same app is also served without the
 * fast path and both answers are compared, hostile queries included — that one key has one budget
 * across both paths, and that the fast path really takes these requests.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeDirectus } from '../fakes/directus.ts';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { nodeRequest, type RawResponse } from '../helpers/raw-http.ts';
import { capturedLogger } from '../helpers/logs.ts';
import { serveKoaOnly, startTestServer, type TestServer } from '../helpers/server.ts';

let server: TestServer;
let koaOnly: Awaited<ReturnType<typeof serveKoaOnly>>;
const { log: testLog, lines: logLines } = capturedLogger();

beforeAll(async () => {
  server = await startTestServer({ log: testLog });
  await publishFixtureBake(server.dataDir, { extraArtworks: 40 });
  await server.services.content.reload();
  koaOnly = await serveKoaOnly(server);
});
afterAll(async () => {
  await koaOnly.close();
  await server.close();
});

let keyCounter = 0;
const freshKey = async () => (await server.services.keys.create(`fast-${++keyCounter}`)).key;
const comparable = (r: RawResponse) => {
  // Vary: Koa's compression stage varies every /v1 answer by Accept-Encoding (test/server/compression.test.ts).
  const { date: _date, connection: _connection, 'keep-alive': _keepAlive, vary: _vary, ...headers } = r.headers;
  return { status: r.status, headers, body: r.body.toString('utf8') };
};

/** The same request on both stacks, each with its own fresh key (so both budgets start equal). */
async function compare(
  path: string,
  options: { method?: string; headers?: Record<string, string>; key?: 'fresh' | 'none' | string; bearer?: boolean } = {},
) {
  const keyFor = async () => (options.key === undefined || options.key === 'fresh' ? (await freshKey()) : options.key === 'none' ? null : options.key);
  const auth = (key: string | null): Record<string, string> => (!key ? {} : options.bearer ? { Authorization: `Bearer ${key}` } : { 'X-API-Key': key });
  const send = (port: number, key: string | null) =>
    nodeRequest(port, { path, method: options.method ?? 'GET', headers: { 'X-Request-Id': 'same', ...auth(key), ...options.headers } });
  const fast = await send(server.port, await keyFor());
  const koa = await send(koaOnly.port, await keyFor());
  expect(comparable(fast), `${options.method ?? 'GET'} ${path} ${JSON.stringify(options.headers ?? {})}`).toEqual(comparable(koa));
  return fast;
}

describe('keyed reads on the fast path', () => {
  it('answer exactly like the Koa routes: lists, items, misses, HEAD', async () => {
    const paths = [
      '/v1/artworks',
      '/v1/artworks?page=2',
      '/v1/artworks?limit=5&page=3',
      '/v1/artworks?collection=genesis',
      '/v1/artworks?collection=genesis,rooms&search=gen&limit=7',
      '/v1/artworks?search=%C3%89MILE',
      '/v1/artworks?search=a+b',
      '/v1/artworks?search=Generated%20Work%201',
      '/v1/artworks?page=abc&limit=-1',
      '/v1/artworks?page=1&page=2&limit=3&limit=9',
      '/v1/artworks?limit=1000',
      '/v1/artworks?page=99999999',
      '/v1/artworks/101',
      '/v1/artworks/105',
      '/v1/artworks/999',
      '/v1/artworks/107',
      '/v1/rooms',
      '/v1/collections',
      '/v1/collections/genesis',
      '/v1/collections/genesis-portraits',
      '/v1/collections/genesis-sketches',
      '/v1/collections/nope',
    ];
    for (const path of paths) {
      const res = await compare(path);
      expect(res.headers['x-ratelimit-remaining'], path).toBe('119');
      await compare(path, { method: 'HEAD' });
    }
  });

  it('answer hostile queries and odd paths exactly like the Koa routes (or leave them to Koa)', async () => {
    const hostile = ['%', '%zz', '%E0%A4%A', '%00', '__proto__', 'constructor', '😀', 'a'.repeat(3000), '1e3', '-0', '0x10', '+1', ' 5 ', '&&', '=', '9'.repeat(40), '[]'];
    for (const value of hostile) {
      const encoded = /^%|^&|^=/.test(value) ? value : encodeURIComponent(value);
      for (const name of ['page', 'limit', 'search', 'collection', '__proto__', 'toString']) {
        await compare(`/v1/artworks?${name}=${encoded}`);
      }
    }
    for (const path of [
      '/v1/artworks/',
      '/v1/artworks//',
      '/v1/artworks/%31%30%31',
      '/v1/artworks/0101',
      '/v1/artworks/1.0',
      '/v1/artworks/9999999999999999',
      '/v1/ARTWORKS',
      '/v1/artworks?search=a#fragment',
      '/v1/rooms/',
      '/v1/roomsx',
      '/v1/collections/genesis%2Dportraits',
      '/v1/collections/%67enesis',
      '/v1/collections/genesis/',
      '/v1/collections/a.b~c',
    ]) {
      await compare(path);
    }
  });

  it('answer missing, unknown, malformed and revoked keys like the Koa routes', async () => {
    await compare('/v1/artworks', { key: 'none' });
    await compare('/v1/artworks', { key: `museum_${'f'.repeat(48)}` });
    await compare('/v1/rooms', { key: 'none', headers: { Authorization: 'Bearer nope' } });
    const bearer = await compare('/v1/collections', { bearer: true });
    expect(bearer.status).toBe(200);
    const { key } = await server.services.keys.create('fast-revoked');
    await server.services.keys.revoke('fast-revoked');
    const revoked = await compare('/v1/artworks/101', { key });
    expect(revoked.status).toBe(401);
  });

  it('share one budget per key with the Koa path and answer the 429 alike', async () => {
    const key = (await freshKey());
    const fast = (path: string) => nodeRequest(server.port, { path, headers: { 'X-API-Key': key } });
    const koa = (path: string) => nodeRequest(koaOnly.port, { path, headers: { 'X-API-Key': key } });
    for (let i = 0; i < 60; i++) {
      expect((await fast('/v1/artworks')).status).toBe(200);
      expect((await koa('/v1/artworks')).status).toBe(200);
    }
    const [a, b] = [await fast('/v1/rooms'), await koa('/v1/rooms')];
    expect(a.status).toBe(429);
    expect(comparable({ ...a, headers: { ...a.headers, 'x-request-id': '' } })).toEqual(comparable({ ...b, headers: { ...b.headers, 'x-request-id': '' } }));
    expect(a.headers['retry-after']).toBe('60');
  });

  it('really serves these requests without Koa', async () => {
    const before = logLines.length;
    await nodeRequest(server.port, { path: '/v1/artworks?page=2', headers: { 'X-API-Key': (await freshKey()) } });
    await nodeRequest(server.port, { path: '/v1/artworks/%31', headers: { 'X-API-Key': (await freshKey()) } });
    const lines = logLines.slice(before).filter((l) => l.msg === 'request');
    expect(lines.map((l) => [l.path, l.fast ?? false])).toEqual([
      ['/v1/artworks', true],
      ['/v1/artworks/%31', false],
    ]);
  });
});

describe('cached character reads on the fast path', () => {
  let withUpstream: TestServer;
  let koaOnlyUpstream: Awaited<ReturnType<typeof serveKoaOnly>>;
  let directus: Awaited<ReturnType<typeof startFakeDirectus>>;
  const { log: upstreamLog, lines } = capturedLogger();

  beforeAll(async () => {
    directus = await startFakeDirectus();
    withUpstream = await startTestServer({ env: { CHARACTERS_UPSTREAM_URL: directus.url }, log: upstreamLog });
    koaOnlyUpstream = await serveKoaOnly(withUpstream);
  });
  afterAll(async () => {
    await koaOnlyUpstream.close();
    await withUpstream.close();
    await directus.close();
  });

  it('a miss goes through Koa to the upstream; the cached answer is then served without Koa, identically', async () => {
    const key = async () => (await withUpstream.services.keys.create(`chars-${++keyCounter}`)).key;
    const paths = ['/v1/characters/7', '/v1/characters/7?include=codex', '/v1/characters?limit=5&page=2', '/v1/characters?fields=name,owner&search=a'];
    for (const path of paths) {
      const before = lines.length;
      const upstreamBefore = directus.requestsTo(/^\/items\/codex/).length;
      const first = await nodeRequest(withUpstream.port, { path, headers: { 'X-Request-Id': 'same', 'X-API-Key': await key() } });
      const cached = await nodeRequest(withUpstream.port, { path, headers: { 'X-Request-Id': 'same', 'X-API-Key': await key() } });
      const viaKoa = await nodeRequest(koaOnlyUpstream.port, { path, headers: { 'X-Request-Id': 'same', 'X-API-Key': await key() } });
      expect(first.status, path).toBe(200);
      expect(comparable(cached), path).toEqual(comparable(first));
      expect(comparable(viaKoa), path).toEqual(comparable(cached));
      // One upstream call for the three answers; only the second request skipped Koa (the third
      // went to the Koa-only listener of the same app, which logs too).
      expect(directus.requestsTo(/^\/items\/codex/).length - upstreamBefore, path).toBe(1);
      const served = lines.slice(before).filter((l) => l.msg === 'request').map((l) => l.fast ?? false);
      expect(served, path).toEqual([false, true, false]);
    }
  });

  it('unknown characters and failures are never answered from the fast path', async () => {
    const before = lines.length;
    const res = await nodeRequest(withUpstream.port, { path: '/v1/characters/9999', headers: { 'X-API-Key': withUpstream.key } });
    const again = await nodeRequest(withUpstream.port, { path: '/v1/characters/9999', headers: { 'X-API-Key': withUpstream.key } });
    expect([res.status, again.status]).toEqual([404, 404]);
    expect(lines.slice(before).filter((l) => l.msg === 'request').map((l) => l.fast ?? false)).toEqual([false, false]);
  });
});
