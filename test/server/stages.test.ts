/**
 * The stages of the request path (server/stages.ts) around a small route table, over HTTP: every
 * answer carries a request id and CORS (errors, 404s and preflights too), the access line and the
 * metrics come from the declaration that answered (none for `logged: false`), a draining server says
 * `Connection: close` on every answer, an unexpected exception is a generic 500 envelope whose
 * detail is only logged, and large JSON answers made per request are compressed while a route that
 * compresses its own answers is left alone.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MemoryRateLimitStore } from '../../server/middleware/rate-limit.ts';
import { RouteTable } from '../../server/route-table.ts';
import { museumApp } from '../../server/koa-app.ts';
import { openStateDb } from '../../server/state/db.ts';
import { SqliteKeyStore } from '../../server/state/keys.ts';
import type { MuseumContext } from '../../server/types.ts';
import { capturedLogger } from '../helpers/logs.ts';
import { nodeRequest } from '../helpers/raw-http.ts';

let server: Server;
let port: number;
const { log, lines } = capturedLogger();
const records: string[] = [];
const operations = {
  inFlight: new Set<MuseumContext>(),
  draining: false,
  record: (route: string, method: string, status: number) => void records.push(`${method} ${route} ${status}`),
};
const big = Buffer.from(JSON.stringify({ data: 'x'.repeat(4000) }));

beforeAll(async () => {
  const table = new RouteTable({ keys: new SqliteKeyStore(openStateDb(':memory:')), limiter: new MemoryRateLimitStore() });
  const common = { method: 'GET', tag: 't', summary: 's', access: 'public', response: { json: z.unknown() } } as const;
  table.route({ ...common, path: '/v1/big', operationId: 'big', handler: () => big });
  table.route({ ...common, path: '/v1/own', operationId: 'own', response: { json: z.unknown(), precompressed: true }, handler: () => big });
  table.route({ ...common, path: '/v1/quiet', operationId: 'quiet', logged: false, handler: () => Buffer.from('{}') });
  table.route({
    ...common,
    path: '/v1/boom',
    operationId: 'boom',
    handler: () => {
      throw new Error('secret detail');
    },
  });
  server = createServer(museumApp({ table, log, trustProxy: false, operations }).callback());
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((done) => server.close(() => done())));

const get = (path: string, init: { method?: string; headers?: Record<string, string> } = {}) => nodeRequest(port, { path, ...init });

describe('the stages', () => {
  it('give every answer a request id and CORS headers: success, 404, 405, 500, preflight', async () => {
    for (const [path, method, status] of [
      ['/v1/big', 'GET', 200],
      ['/v1/none', 'GET', 404],
      ['/v1/big', 'POST', 405],
      ['/v1/boom', 'GET', 500],
      ['/v1/big', 'OPTIONS', 204],
    ] as const) {
      const res = await get(path, { method, headers: { 'X-Request-Id': `id-${status}` } });
      expect(res.status, path).toBe(status);
      expect(res.headers['x-request-id'], path).toBe(`id-${status}`);
      expect(res.headers['access-control-allow-origin'], path).toBe('*');
    }
  });

  it('answer an exception with a generic 500 envelope and log its detail with the request id', async () => {
    const res = await get('/v1/boom', { headers: { 'X-Request-Id': 'boom-1' } });
    expect(JSON.parse(res.body.toString())).toEqual({ errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL' } }] });
    expect(res.body.toString()).not.toContain('secret');
    expect(lines.some((l) => l.msg === 'unhandled error' && l.requestId === 'boom-1')).toBe(true);
  });

  it('write the access line and the metrics from the answering declaration; none for logged: false', async () => {
    records.length = 0;
    await get('/v1/quiet', { headers: { 'X-Request-Id': 'quiet-1' } });
    await get('/v1/big', { headers: { 'X-Request-Id': 'big-1' } });
    await get('/v1/nowhere', { headers: { 'X-Request-Id': 'nowhere-1' } });
    await expect
      .poll(() => lines.filter((l) => l.msg === 'request' && ['big-1', 'nowhere-1'].includes(String(l.requestId))).length)
      .toBe(2);
    const line = lines.find((l) => l.requestId === 'big-1')!;
    // (pid and hostname: this test logger's pino bindings)
    expect(
      Object.keys(line)
        .filter((k) => k !== 'pid' && k !== 'hostname')
        .sort(),
    ).toEqual(['level', 'method', 'ms', 'msg', 'path', 'requestId', 'status', 'time']);
    expect(line).toMatchObject({ method: 'GET', path: '/v1/big', status: 200 });
    expect(lines.some((l) => l.requestId === 'quiet-1')).toBe(false);
    expect(lines.find((l) => l.requestId === 'nowhere-1')).toMatchObject({ status: 404 });
    expect(records).toEqual(['GET /v1/big 200']);
    expect(operations.inFlight.size).toBe(0);
  });

  it('say Connection: close on every answer while draining', async () => {
    operations.draining = true;
    try {
      for (const path of ['/v1/big', '/v1/none']) expect((await get(path)).headers.connection, path).toBe('close');
    } finally {
      operations.draining = false;
    }
    expect((await get('/v1/big')).headers.connection).toBe('keep-alive');
  });

  it('compress large answers made per request, and leave a route that compresses its own answers alone', async () => {
    const made = await get('/v1/big', { headers: { 'Accept-Encoding': 'gzip' } });
    expect(made.headers['content-encoding']).toBe('gzip');
    expect(made.headers.vary).toMatch(/Accept-Encoding/);
    const own = await get('/v1/own', { headers: { 'Accept-Encoding': 'gzip' } });
    expect(own.headers['content-encoding']).toBeUndefined();
    expect(own.body.equals(big)).toBe(true);
  });
});
