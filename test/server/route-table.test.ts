/**
 * The route table with the request path's stages (server/stages.ts), served by a real node server
 * over HTTP: matching as @koa/router matched (case, trailing slash, percent-decoded parameters),
 * 404 and 405 envelopes, HEAD, preflights advertising the path's own methods, declared headers on
 * every answer of a path (errors and preflights too) and of an area, validation problems one per
 * field in plain words, returned answers, and declarations that would overlap refused at registration.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MemoryRateLimitStore } from '../../server/middleware/rate-limit.ts';
import { idParam, limitParam, RouteTable } from '../../server/route-table.ts';
import { museumApp } from '../../server/koa-app.ts';
import { openStateDb } from '../../server/state/db.ts';
import { SqliteKeyStore } from '../../server/state/keys.ts';
import type { MuseumContext } from '../../server/types.ts';
import { nodeRequest } from '../helpers/raw-http.ts';

let server: Server;
let port: number;
let key: string;
const records: Array<{ route: string; method: string; status: number }> = [];
const observer = {
  inFlight: new Set<MuseumContext>(),
  draining: false,
  record: (route: string, method: string, status: number) => void records.push({ route, method, status }),
};

function table(keys: SqliteKeyStore): RouteTable {
  const t = new RouteTable({ keys, limiter: new MemoryRateLimitStore() });
  const common = { tag: 'test', access: 'public', response: { json: z.unknown() } } as const;
  t.route({
    ...common,
    method: 'GET',
    path: '/v1/things',
    operationId: 'listThings',
    summary: 'list',
    query: z.object({ limit: limitParam(5), q: z.string().max(10) }),
    handler: (_ctx, { query }) => Buffer.from(JSON.stringify(query)),
  });
  t.route({
    ...common,
    method: 'GET',
    path: '/v1/things/{id}',
    operationId: 'getThing',
    summary: 'one',
    params: z.object({ id: idParam() }),
    handler: (_ctx, { params }) => Buffer.from(JSON.stringify(params)),
  });
  t.route({
    ...common,
    method: 'GET',
    path: '/v1/raw/{name}',
    operationId: 'raw',
    summary: 'raw name',
    handler: (ctx) => ({ status: 200, headers: { 'Content-Type': 'text/plain' }, body: Buffer.from(ctx.params.name!) }),
  });
  t.route({
    ...common,
    method: 'POST',
    path: '/v1/things',
    operationId: 'createThing',
    summary: 'create',
    access: 'key',
    body: z.object({ name: z.string().max(100), size: z.number().int(), tags: z.array(z.string()).min(1) }).strict(),
    handler: (ctx, { body }) => {
      ctx.status = 201;
      ctx.body = body;
    },
  });
  t.route({
    ...common,
    method: 'GET',
    path: '/page/{id}',
    operationId: 'page',
    summary: 'page',
    headers: { 'X-Page': 'yes' },
    handler: () => Buffer.from('{}'),
  });
  t.area('/page/', { 'X-Page': 'yes' });
  return t;
}

beforeAll(async () => {
  const keys = new SqliteKeyStore(openStateDb(':memory:'));
  key = (await keys.create('route-table')).key;
  const log = pino({ level: 'silent' });
  server = createServer(museumApp({ table: table(keys), log, trustProxy: false, operations: observer }).callback());
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((done) => server.close(() => done())));

const get = (path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
  nodeRequest(port, { path, ...init });
const json = (body: Buffer) => JSON.parse(body.toString()) as Record<string, unknown>;

describe('matching', () => {
  it('finds static and pattern paths as @koa/router did: any case, a trailing slash, parameters percent-decoded', async () => {
    expect(json((await get('/v1/things?q=a')).body)).toEqual({ limit: 5, q: 'a' });
    expect(json((await get('/v1/things?q=a&limit=3&q=b&limit=9')).body)).toEqual({ limit: 3, q: 'a' }); // repeated: the first
    expect((await get('/V1/Things/?q=a')).status).toBe(200);
    expect(json((await get('/v1/things/42')).body)).toEqual({ id: 42 });
    expect((await get('/v1/THINGS/42/')).status).toBe(200);
    expect((await get('/v1/raw/%C3%A9t%C3%A9')).body.toString()).toBe('été');
    expect((await get('/v1/raw/100%25')).body.toString()).toBe('100%');
    expect((await get('/v1/raw/%zz')).body.toString()).toBe('%zz'); // not decodable: as sent
  });

  it('answers 404 envelopes for unknown paths and invalid path parameters, 405 with Allow for a method the path lacks', async () => {
    for (const path of ['/v1/nothing', '/v1/things/0', '/v1/things/abc', '/v1/things/1/2', '/v1/things//']) {
      const res = await get(path);
      expect(res.status, path).toBe(404);
      expect(json(res.body), path).toEqual({ errors: [{ message: 'Not found', extensions: { code: 'NOT_FOUND' } }] });
    }
    const wrong = await get('/v1/things/1', { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.allow).toBe('GET, HEAD');
    expect(json(wrong.body)).toMatchObject({ errors: [{ extensions: { code: 'METHOD_NOT_ALLOWED' } }] });
    expect((await get('/v1/things', { method: 'DELETE' })).headers.allow).toBe('GET, HEAD, POST');
  });

  it('answers HEAD from the GET route, without a body', async () => {
    const res = await get('/v1/things/7', { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers['content-length']).toBe(String(JSON.stringify({ id: 7 }).length));
    expect(res.body.length).toBe(0);
  });

  it('refuses declarations that would overlap or repeat', () => {
    const t = new RouteTable({ keys: new SqliteKeyStore(openStateDb(':memory:')), limiter: new MemoryRateLimitStore() });
    const route = (path: string) =>
      ({
        method: 'GET',
        path,
        operationId: path,
        summary: '',
        tag: '',
        access: 'public',
        response: { json: z.unknown() },
        handler: () => undefined,
      }) as const;
    t.route(route('/v1/a/{id}'));
    expect(() => t.route(route('/v1/a/{id}'))).toThrow(/declared twice/);
    expect(() => t.route(route('/v1/a/latest'))).toThrow(/would also match \/v1\/a\/\{id\}/);
    t.route(route('/v1/b/{slug}/x'));
    expect(() => t.route(route('/v1/b/{id}/x'))).toThrow(/declared twice/);
  });
});

describe('headers and preflights', () => {
  it('advertises only the methods the table has for the path', async () => {
    const preflight = (path: string) =>
      get(path, { method: 'OPTIONS', headers: { Origin: 'https://client.example', 'Access-Control-Request-Method': 'GET' } });
    const getOnly = await preflight('/v1/things/1');
    expect(getOnly.status).toBe(204);
    expect(getOnly.headers['access-control-allow-methods']).toBe('GET, HEAD, OPTIONS');
    expect((await preflight('/v1/things')).headers['access-control-allow-methods']).toBe('GET, HEAD, POST, OPTIONS');
    expect((await preflight('/v1/nothing')).headers['access-control-allow-methods']).toBe('OPTIONS');
    expect(getOnly.headers['access-control-allow-origin']).toBe('*');
  });

  it("puts a path's declared headers on its answers, errors and preflights, and an area's on paths no route matches", async () => {
    for (const [path, method] of [
      ['/page/1', 'GET'],
      ['/page/1', 'POST'],
      ['/page/1', 'OPTIONS'],
      ['/page/', 'GET'],
      ['/page/1/2', 'GET'],
    ] as const) {
      expect((await get(path, { method })).headers['x-page'], `${method} ${path}`).toBe('yes');
    }
    expect((await get('/v1/things/1')).headers['x-page']).toBeUndefined();
  });
});

describe('validation', () => {
  it('answers one error object per problem, with its field, in plain words', async () => {
    const query = json((await get(`/v1/things?q=${'x'.repeat(11)}`)).body);
    expect(query).toEqual({ errors: [{ message: 'q must be at most 10 characters', extensions: { code: 'BAD_REQUEST', field: 'q' } }] });
    expect(json((await get('/v1/things')).body)).toEqual({
      errors: [{ message: 'q is required', extensions: { code: 'BAD_REQUEST', field: 'q' } }],
    });

    const body = { name: 'n'.repeat(101), size: 1.5, tags: [], extra: 1 };
    const res = await get('/v1/things', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': key },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    const problems = (json(res.body).errors as Array<{ message: string; extensions: { code: string; field: string } }>).map((e) => [
      e.extensions.field,
      e.message,
    ]);
    expect([...problems].sort()).toEqual([
      ['extra', 'extra is not a known field'],
      ['name', 'name must be at most 100 characters'],
      ['size', 'size must be an integer'],
      ['tags', 'tags must have at least 1 item'],
    ]);

    const nested = await get('/v1/things', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': key },
      body: JSON.stringify({ name: 'a', size: 1, tags: [3] }),
    });
    expect(json(nested.body)).toEqual({
      errors: [{ message: 'tags.0 must be a string', extensions: { code: 'BAD_REQUEST', field: 'tags.0' } }],
    });
  });

  it('runs auth before the body is read: a keyless POST is 401 with WWW-Authenticate', async () => {
    const res = await get('/v1/things', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{not json' });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="museum"');
  });
});

describe('the request path around the table', () => {
  it('labels metrics by the declared route, never by raw URL; unknown paths are not labelled', async () => {
    records.length = 0;
    await get('/v1/things/5');
    await get('/v1/things/6');
    await get('/v1/nothing/at/all');
    await expect.poll(() => records.length).toBe(2);
    expect(records).toEqual([
      { route: '/v1/things/{id}', method: 'GET', status: 200 },
      { route: '/v1/things/{id}', method: 'GET', status: 200 },
    ]);
    expect(observer.inFlight.size).toBe(0);
  });
});
