/**
 * Compression (decisions.md "Clients of the HTTP API"): snapshot answers are br/gzip-encoded as
 * Accept-Encoding allows, from representations made once per bake; other /v1 JSON answers are
 * compressed per request from 1 KB up; event streams never are; `Vary: Accept-Encoding` throughout.
 */
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { negotiateEncoding, PUBLIC_CACHE_CONTROL, SnapshotResponse } from '../../../server/snapshot-response.ts';
import { call, freshIp } from '../guide/helpers.ts';
import { nodeRequest, type RawResponse } from '../../helpers/raw-http.ts';
import { type EveryUpstream, startWithEveryUpstream } from '../../client/every-upstream.ts';

let world: EveryUpstream;
beforeAll(async () => {
  world = await startWithEveryUpstream();
}, 30_000);
afterAll(() => world?.close());

function get(path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawResponse> {
  return nodeRequest(world.server.port, { method, path, headers: { 'X-API-Key': world.server.key, ...headers } });
}

const decoded = (res: RawResponse): Buffer => {
  const encoding = res.headers['content-encoding'];
  if (encoding === 'br') return brotliDecompressSync(res.body);
  if (encoding === 'gzip') return gunzipSync(res.body);
  return res.body;
};

const SNAPSHOT = [
  '/v1',
  '/v1/openapi.json',
  '/v1/collections',
  '/v1/artworks?limit=10',
  '/v1/artworks/101',
  '/v1/rooms',
  '/v1/rooms/1',
  '/v1/rooms/1/slots',
];

describe('snapshot responses', () => {
  it.each(SNAPSHOT)('%s: br and gzip decode to the identity bytes, with their own length and Vary', async (path) => {
    const identity = await get(path);
    expect(identity.headers['content-encoding']).toBeUndefined();
    for (const [accept, encoding] of [
      ['gzip, deflate, br', 'br'],
      ['gzip', 'gzip'],
      ['br;q=0, gzip', 'gzip'],
      ['*', 'br'],
    ] as const) {
      const res = await get(path, { 'Accept-Encoding': accept });
      expect(res.status, accept).toBe(200);
      expect(res.headers['content-encoding'], accept).toBe(encoding);
      expect(res.headers.vary, accept).toMatch(/Accept-Encoding/i);
      expect(Number(res.headers['content-length']), accept).toBe(res.body.length);
      expect(res.body.length, accept).toBeLessThan(identity.body.length);
      expect(decoded(res).equals(identity.body), accept).toBe(true);
    }
    for (const accept of ['identity', 'compress', 'br;q=0, gzip;q=0']) {
      expect((await get(path, { 'Accept-Encoding': accept })).headers['content-encoding'], accept).toBeUndefined();
    }
  });

  it('HEAD sends the headers of the encoded response and no body', async () => {
    const full = await get('/v1/rooms', { 'Accept-Encoding': 'br' });
    const head = await get('/v1/rooms', { 'Accept-Encoding': 'br' }, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-encoding']).toBe('br');
    expect(head.headers['content-length']).toBe(full.headers['content-length']);
    expect(head.body.length).toBe(0);
  });

  it('is compressed once: every request is answered with the same prepared bytes', async () => {
    const rooms = Array.from({ length: 50 }, (_, i) => ({ id: i, title: `Room ${i}` }));
    const snapshot = SnapshotResponse.of({ rooms }, { cacheControl: PUBLIC_CACHE_CONTROL });
    const request = (acceptEncoding: string) => ({ headers: { 'accept-encoding': acceptEncoding } }) as unknown as IncomingMessage;
    const first = await snapshot.responseTo(request('br'));
    const second = await snapshot.responseTo(request('br'));
    // Once made, the representation is reused: the very same buffer and headers.
    expect(second.body).toBe(first.body);
    expect(second.headers).toBe(first.headers);
    expect(brotliDecompressSync(first.body as Buffer).equals(snapshot.body)).toBe(true);
  });

  it('sends identity when encoding would not save bytes', async () => {
    const tiny = SnapshotResponse.of({}, { cacheControl: PUBLIC_CACHE_CONTROL });
    const response = await tiny.responseTo({ headers: { 'accept-encoding': 'br, gzip' } } as unknown as IncomingMessage);
    expect(response.headers['Content-Encoding']).toBeUndefined();
    expect(response.headers.Vary).toBe('Accept-Encoding');
    expect(response.body).toEqual(Buffer.from('{}'));
  });

  it('negotiates as Accept-Encoding says: q-values, wildcards, br preferred on a tie', () => {
    expect(negotiateEncoding(undefined)).toBe('identity');
    expect(negotiateEncoding('gzip, deflate, br, zstd')).toBe('br');
    expect(negotiateEncoding('gzip;q=1, br;q=0.5')).toBe('gzip');
    expect(negotiateEncoding('*;q=0, identity')).toBe('identity');
    expect(negotiateEncoding('deflate')).toBe('identity');
  });

  // Issue 43: 12 KB of Accept-Encoding cost more CPU than the answer, on every request.
  const overlong = `br, ${Array.from({ length: 1_200 }, (_, i) => `x${i};q=0.1`).join(', ')}`;
  it('treats an Accept-Encoding over 1 KB as absent (identity), on snapshot responses and per-request ones alike', async () => {
    expect(overlong.length).toBeGreaterThan(12_000);
    const justUnder = `br, ${'x;q=0.1, '.repeat(100)}`.slice(0, 1_024);
    expect(negotiateEncoding(justUnder)).toBe('br');
    expect(negotiateEncoding(overlong)).toBe('identity');
    for (const path of ['/v1/rooms', '/v1/search?q=a&limit=25']) {
      const res = await get(path, { 'Accept-Encoding': overlong });
      expect(res.status).toBe(200);
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(res.headers.vary).toMatch(/Accept-Encoding/i);
      expect((await get(path, { 'Accept-Encoding': justUnder })).headers['content-encoding']).toBe('br');
    }
  });
});

describe('per-request compression of other /v1 JSON responses', () => {
  it('compresses a large response (search with the characters upstream) as asked, with Vary', async () => {
    const identity = await get('/v1/search?q=a&limit=25');
    expect(identity.status).toBe(200);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.headers.vary).toMatch(/Accept-Encoding/i);
    expect(identity.body.length).toBeGreaterThan(1024);
    for (const encoding of ['br', 'gzip'] as const) {
      const res = await get('/v1/search?q=a&limit=25', { 'Accept-Encoding': encoding });
      expect(res.headers['content-encoding']).toBe(encoding);
      expect(res.headers.vary).toMatch(/Accept-Encoding/i);
      expect(JSON.parse(decoded(res).toString())).toEqual(JSON.parse(identity.body.toString()));
    }
  });

  it('leaves small responses (an error envelope) as they are', async () => {
    const res = await get('/v1/characters/999999', { 'Accept-Encoding': 'br, gzip' });
    expect(res.status).toBe(404);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(res.body.toString()).errors[0].extensions.code).toBe('NOT_FOUND');
  });

  it('never encodes an event stream: presence frames arrive as they are written', async () => {
    const res = await nodeRequest(world.server.port, {
      method: 'GET',
      path: '/v1/presence/stream',
      headers: { 'Accept-Encoding': 'br, gzip' },
      timeoutMs: 1_000,
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.body.toString()).toMatch(/^data: \{"type":"hello"/m);
  });

  it('never encodes the Library answer stream', async () => {
    const res = await call(
      world.server,
      'POST',
      '/v1/library/ask/stream',
      { question: 'Who drew the Atrium?' },
      {
        ip: freshIp(),
        headers: { 'X-API-Key': world.server.key, 'Accept-Encoding': 'br, gzip' },
      },
    );
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.bytes.toString()).toMatch(/^data: /m);
  });
});
