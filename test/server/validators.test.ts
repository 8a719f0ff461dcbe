/**
 * Conditional GETs of the answers from the bake snapshot (decisions.md "Clients of the HTTP API"):
 * a strong ETag per bake and representation, If-None-Match → 304 without a body, keyed answers
 * `Cache-Control: private, no-cache`; a new bake changes the validators. And GET /v1/rooms/{id}.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { nodeRequest, type RawResponse } from '../helpers/raw-http.ts';
import { errorOf, startTestServer, type TestServer } from '../helpers/server.ts';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
  await publishFixtureBake(server.dataDir);
  await server.services.content.reload();
});
afterAll(() => server?.close());

const KEYED = [
  '/v1/collections',
  '/v1/collections/genesis',
  '/v1/artworks',
  '/v1/artworks?page=2&limit=3',
  '/v1/artworks/101',
  '/v1/rooms',
  '/v1/rooms/1',
];
const PUBLIC = ['/v1', '/v1/openapi.json', '/v1/rooms/1/slots'];

function get(path: string, headers: Record<string, string> = {}, key: string | null = server.key): Promise<RawResponse> {
  return nodeRequest(server.port, { method: 'GET', path, headers: { ...(key ? { 'X-API-Key': key } : {}), ...headers } });
}

describe('validators of snapshot responses', () => {
  it.each([...KEYED, ...PUBLIC])('%s: strong ETag, 304 on If-None-Match, no body', async (path) => {
    const first = await get(path);
    expect(first.status).toBe(200);
    const etag = first.headers.etag!;
    expect(etag).toMatch(/^"[\w-]{20,}"$/);
    expect(first.headers['cache-control']).toBe(KEYED.includes(path) ? 'private, no-cache' : 'public, no-cache');
    expect(first.headers.vary).toMatch(/Accept-Encoding/i);

    const again = await get(path, { 'If-None-Match': etag });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    expect(again.headers.etag).toBe(etag);
    expect(again.headers['x-request-id']).toBeTruthy();
    if (KEYED.includes(path)) expect(again.headers['x-ratelimit-remaining']).toBeDefined();

    expect((await get(path, { 'If-None-Match': '"something-else"' })).status).toBe(200);
    expect((await get(path, { 'If-None-Match': `"x", W/${etag}` })).status).toBe(304);
  });

  it('keeps the slots ETag of the body (unchanged for clients that cached it) and a distinct one per representation', async () => {
    const identity = await get('/v1/rooms/1/slots');
    const br = await get('/v1/rooms/1/slots', { 'Accept-Encoding': 'br' });
    const gzip = await get('/v1/rooms/1/slots', { 'Accept-Encoding': 'gzip' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(new Set([identity.headers.etag, br.headers.etag, gzip.headers.etag]).size).toBe(3);
    // A validator names its representation: the br one revalidates a br request, not an identity one.
    expect((await get('/v1/rooms/1/slots', { 'Accept-Encoding': 'br', 'If-None-Match': br.headers.etag! })).status).toBe(304);
    expect((await get('/v1/rooms/1/slots', { 'If-None-Match': br.headers.etag! })).status).toBe(200);
  });

  it('a 304 still needs a valid key and counts against its limit', async () => {
    const etag = (await get('/v1/rooms')).headers.etag!;
    expect((await get('/v1/rooms', { 'If-None-Match': etag }, null)).status).toBe(401);
    const before = Number((await get('/v1/rooms', { 'If-None-Match': etag })).headers['x-ratelimit-remaining']);
    const after = Number((await get('/v1/rooms', { 'If-None-Match': etag })).headers['x-ratelimit-remaining']);
    expect(after).toBe(before - 1);
  });

  it('a new bake changes the validators of what changed', async () => {
    const paths = ['/v1/rooms', '/v1/rooms/1', '/v1/collections', '/v1/artworks/101'];
    const before = await Promise.all(paths.map(async (path) => [path, (await get(path)).headers.etag!] as const));
    await publishFixtureBake(server.dataDir, { tag: 'second bake' });
    await server.services.content.reload();
    for (const [path, etag] of before) {
      const res = await get(path, { 'If-None-Match': etag });
      expect(res.status, path).toBe(200);
      expect(res.headers.etag, path).not.toBe(etag);
      expect(res.body.toString(), path).toContain('second bake');
    }
  });
});

describe('GET /v1/rooms/{id}', () => {
  it('answers one Room, the same as in the list', async () => {
    const list = JSON.parse((await get('/v1/rooms')).body.toString()) as { data: Array<{ id: number }> };
    for (const room of list.data) {
      const res = await get(`/v1/rooms/${room.id}`);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.toString())).toEqual({ data: room });
    }
  });

  it('answers token_id as a string or null (the store handed room 2 its token id as a number)', async () => {
    const rooms = JSON.parse((await get('/v1/rooms')).body.toString()) as { data: Array<{ id: number; token_id: unknown }> };
    expect(rooms.data.map((room) => [room.id, room.token_id])).toEqual([
      [1, '1'],
      [2, '2'],
      [3, null],
    ]);
  });

  it('is keyed, and 404 NOT_FOUND for unknown or malformed ids', async () => {
    expect((await get('/v1/rooms/1', {}, null)).status).toBe(401);
    for (const id of ['424242', '0', 'abc', '1.5', '-1']) {
      const res = await server.get(`/v1/rooms/${id}`);
      expect(await errorOf(res), id).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    }
  });
});
