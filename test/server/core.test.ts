/**
 * The server core as a client sees it: request ids, CORS, the error envelope for unknown routes and
 * wrong methods (with or without a key), requests node's parser rejects, and the index.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { errorOf, startTestServer, type TestServer } from '../helpers/server.ts';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
  await publishFixtureBake(server.dataDir);
  await server.services.content.reload();
});
afterAll(() => server.close());

/** 12 base64url characters of randomness per process, then a base-36 counter. */
const FRESH_ID = /^[\w-]{12}-[0-9a-z]+$/;

describe('request id', () => {
  it('gives every response an X-Request-Id, fresh unless the caller sent a sane one', async () => {
    // Fresh ids: this process's random prefix and a counter (every kind of response alike).
    const ids = [];
    for (const path of ['/v1', '/v1/rooms/1/slots', '/v1', '/nope']) ids.push((await server.get(path)).headers.get('x-request-id')!);
    for (const id of ids) expect(id).toMatch(FRESH_ID);
    expect(new Set(ids).size).toBe(ids.length);
    const [prefix] = ids[0]!.split('-');
    const counters = ids.map((id) => parseInt(id.split('-')[1]!, 36));
    expect(ids.every((id) => id.startsWith(`${prefix}-`))).toBe(true);
    expect(counters).toEqual([...counters].sort((x, y) => x - y));
    // A fresh id is itself a sane token: a client may send it back and gets it echoed.
    const echoedFresh = await server.get('/v1', { headers: { 'X-Request-Id': ids[0]! } });
    expect(echoedFresh.headers.get('x-request-id')).toBe(ids[0]);
    const echoed = await server.get('/v1/rooms', { headers: { 'X-Request-Id': 'trace-42.a:b' } });
    expect(echoed.headers.get('x-request-id')).toBe('trace-42.a:b');
    const replaced = await server.get('/v1', { headers: { 'X-Request-Id': 'no spaces <allowed>' } });
    expect(replaced.headers.get('x-request-id')).toMatch(FRESH_ID);
  });

  it('also on errors, snapshot responses and keyed 401s', async () => {
    const fx = await publishFixtureBake(server.dataDir);
    for (const [path, key] of [
      ['/v1/nope', undefined],
      ['/v1/rooms', null],
      ['/v1/rooms/1/slots', undefined],
      [`/files/${fx.files['room1.image']!.ref.sha256}.png`, undefined],
    ] as const) {
      const res = await server.get(path, { key, headers: { 'X-Request-Id': 'same-id' } });
      expect(res.headers.get('x-request-id'), path).toBe('same-id');
    }
  });
});

describe('CORS', () => {
  it('answers preflights for keyed routes without a key', async () => {
    const res = await server.get('/v1/artworks', {
      method: 'OPTIONS',
      key: null,
      headers: { Origin: 'https://client.example', 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'x-api-key' },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-headers')).toMatch(/X-API-Key/);
    expect(res.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(res.headers.get('access-control-allow-methods')).toMatch(/GET/);
  });

  it('puts Access-Control-Allow-Origin and the exposed headers on responses and errors', async () => {
    for (const res of [
      await server.get('/v1/rooms'),
      await server.get('/v1/rooms', { key: null }),
      await server.get('/v1/rooms/1/slots'),
    ]) {
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-expose-headers')).toBe('*');
    }
  });
});

describe('unknown routes and methods', () => {
  it('answers 404 NOT_FOUND for unknown /v1 routes with or without a key (no 401 leak)', async () => {
    for (const key of [undefined, null, `museum_${'0'.repeat(48)}`]) {
      for (const path of ['/v1/nope', '/v1/rooms/1/nope', '/v1/artworks/1/extra', '/nope']) {
        const res = await server.get(path, { key });
        expect(await errorOf(res)).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      }
    }
  });

  it('answers 405 METHOD_NOT_ALLOWED in the envelope, with Allow', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const res = await server.get('/v1/rooms', { method });
      expect(res.headers.get('allow')).toMatch(/GET/);
      expect(await errorOf(res)).toMatchObject({ status: 405, code: 'METHOD_NOT_ALLOWED' });
    }
    const slots = await server.get('/v1/rooms/1/slots', { method: 'DELETE' });
    expect(await errorOf(slots)).toMatchObject({ status: 405, code: 'METHOD_NOT_ALLOWED' });
  });

  it('treats methods nobody implements like any other wrong method (never a 501)', async () => {
    const onRoute = await rawRequest(server.port, 'PROPFIND /v1/rooms HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(onRoute.status).toBe(405);
    expect(JSON.parse(onRoute.body.toString()).errors[0].extensions.code).toBe('METHOD_NOT_ALLOWED');
    const elsewhere = await rawRequest(server.port, 'PURGE /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(elsewhere.status).toBe(404);
    expect(JSON.parse(elsewhere.body.toString()).errors[0].extensions.code).toBe('NOT_FOUND');
  });

  it('answers requests the HTTP parser rejects with the envelope too', async () => {
    const cases: Array<[string, number]> = [
      ['GET /v1 HTTP/1.1\r\nHost: x\r\nX-Bad\u0001Name: y\r\n\r\n', 400],
      ['BREW /v1 HTTP/1.1\r\nHost: x\r\n\r\n', 400],
      ['GET /v1 HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n', 400],
      [`GET /v1 HTTP/1.1\r\nHost: x\r\nX-Huge: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    ];
    for (const [text, status] of cases) {
      const res = await rawRequest(server.port, text);
      expect(res.status).toBe(status);
      expect(res.headers['x-request-id']).toBeTruthy();
      expect(JSON.parse(res.body.toString()).errors[0].extensions.code).toBe('BAD_REQUEST');
    }
    expect((await server.get('/v1')).status).toBe(200);
  });
});

describe('index', () => {
  it('lists the content routes and points at the OpenAPI document', async () => {
    const body = (await (await server.get('/v1', { key: null })).json()) as {
      data: { endpoints: string[]; documentation: string; version: string };
    };
    expect(body.data.version).toBe('1.0.0');
    expect(body.data.documentation).toBe('http://museum.test/v1/openapi.json');
    for (const route of [
      'GET /v1/collections',
      'GET /v1/collections/{slug}',
      'GET /v1/artworks',
      'GET /v1/artworks/{id}',
      'GET /v1/rooms',
      'GET /v1/rooms/{id}/slots',
      'GET /files/{name}',
    ]) {
      expect(body.data.endpoints).toContain(route);
    }
  });
});
