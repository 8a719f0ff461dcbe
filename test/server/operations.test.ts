/**
 * Operating the server: /healthz and /readyz (public, never rate limited, not in the access log;
 * 503 naming what is missing) and /metrics (Prometheus text: on METRICS_PORT, else on the main
 * port behind METRICS_TOKEN, else 404), labelled by route declaration.
 */
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { capturedLogger } from '../helpers/logs.ts';
import { unreachableRedisUrl } from '../helpers/redis.ts';
import { errorOf, startTestServer, type TestServer } from '../helpers/server.ts';

const TOKEN = 'metrics-token-0123456789';
const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.close();
});
async function server(env: Record<string, string> = {}, logs = capturedLogger('info')) {
  const s = await startTestServer({ env: { LOG_LEVEL: 'info', ...env }, log: logs.log });
  servers.push(s);
  return { s, logs };
}

describe('health and readiness', () => {
  it('/healthz answers 200 at once, and neither probe is rate limited or logged per request', async () => {
    const { s, logs } = await server();
    await publishFixtureBake(s.dataDir);
    await s.services.content.reload();
    const before = logs.lines.filter((l) => l.msg === 'request').length;
    for (let i = 0; i < 150; i++) {
      const health = await fetch(`${s.url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      expect(health.headers.get('x-request-id')).toBeTruthy();
      expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    }
    expect(logs.lines.filter((l) => l.msg === 'request').length).toBe(before);
  });

  it("probes answer like every other route: the caller's request id echoed, the same CORS headers", async () => {
    const { s } = await server();
    const api = await fetch(`${s.url}/v1/does-not-exist`);
    for (const path of ['/healthz', '/readyz', '/v1/does-not-exist']) {
      const res = await fetch(`${s.url}${path}`, { headers: { 'X-Request-Id': 'probe-42' } });
      expect(res.headers.get('x-request-id')).toBe('probe-42');
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-expose-headers')).toBe(api.headers.get('access-control-expose-headers'));
    }
    // An id that is not a sane token is replaced, never echoed.
    const forged = await fetch(`${s.url}/healthz`, { headers: { 'X-Request-Id': 'not a token; "quoted"' } });
    expect(forged.headers.get('x-request-id')).toMatch(/^[\w-]{12}-[0-9a-z]+$/);
  });

  it('/readyz is 503 with an envelope naming what is missing: no bake yet, Redis unreachable', async () => {
    const { s } = await server({ REDIS_URL: await unreachableRedisUrl() });
    const res = await fetch(`${s.url}/readyz`);
    const error = await errorOf(res);
    expect(error).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
    expect(error.message).toMatch(/no bake published/);
    expect(error.message).toMatch(/Redis \(REDIS_URL\) unreachable/);
    expect(error.message).not.toMatch(/state store/);
  });

  it('/readyz is 503 when STATE_DB is corrupt: its check reads the tables, not `SELECT 1`', async () => {
    const { s } = await server();
    await publishFixtureBake(s.dataDir);
    await s.services.content.reload();
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    // Everything into the main file, then every page after the header overwritten.
    const side = new Database(s.stateDb);
    side.pragma('wal_checkpoint(TRUNCATE)');
    side.close();
    const size = statSync(s.stateDb).size;
    const fd = openSync(s.stateDb, 'r+');
    writeSync(fd, Buffer.alloc(size - 4096, 0xa5), 0, size - 4096, 4096);
    closeSync(fd);
    expect((await fetch(`${s.url}/v1/guide/exhibitions/any`)).status).toBe(500); // what a client sees
    await sleep(1_100); // past the cached readiness answer
    const error = await errorOf(await fetch(`${s.url}/readyz`));
    expect(error).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
    expect(error.message).toMatch(/state store \(STATE_DB\)/);
  });
});

describe('metrics', () => {
  it('are 404 when neither METRICS_PORT nor METRICS_TOKEN is set', async () => {
    const { s } = await server();
    expect(await errorOf(await fetch(`${s.url}/metrics`))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect((await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
  });

  it('with METRICS_TOKEN: only with the bearer token; requests by route declaration and status, latency, 429s, the bake id', async () => {
    const { s } = await server({ METRICS_TOKEN: TOKEN });
    const bake = await publishFixtureBake(s.dataDir);
    await s.services.content.reload();
    expect(await errorOf(await fetch(`${s.url}/metrics`))).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    expect((await fetch(`${s.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);

    for (const id of [1, 2, 3, 999_999]) await s.get(`/v1/artworks/${id}`);
    await s.get('/v1/guide/exhibitions/nobody');
    // A key past its budget: 429s are counted as refusals.
    for (let i = 0; i < 125; i++) await s.get('/v1/rooms');

    const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    // Koa routes by their declaration; nothing labelled by a raw URL.
    expect(text).toMatch(/museum_http_requests_total\{route="\/v1\/guide\/exhibitions\/\{id\}",method="GET",status="404"\} 1/);
    expect(text).toMatch(/museum_http_requests_total\{route="\/v1\/artworks\/\{id\}",method="GET",status="404"\} 4/);
    expect(text).toMatch(/museum_http_requests_total\{route="\/v1\/rooms",method="GET",status="429"\} \d/);
    expect(text).not.toMatch(/route="[^"]*(999999|nobody)/);
    expect(text).toMatch(/museum_http_request_duration_seconds_bucket\{le="0.005",route="[^"]+",method="GET"\}/);
    expect(text).toMatch(/museum_rate_limit_refusals_total\{route="\/v1\/rooms"\} [1-9]/);
    expect(text).toContain(`museum_bake_info{bake_id="${bake.manifest.bake_id}"} 1`);
    for (const name of [
      'museum_presence_listeners',
      'museum_sse_streams_open',
      'museum_http_requests_in_flight',
      'museum_upstream_calls_total',
      'museum_upstream_failures_total',
      // prom-client's process metrics: the event-loop delay shows a long task, CPU and heap the load.
      'nodejs_eventloop_lag_max_seconds',
      'process_cpu_seconds_total',
      'nodejs_heap_size_used_bytes',
    ]) {
      expect(text).toContain(`# TYPE ${name}`);
    }
  });

  it('with METRICS_PORT: served on their own listener without a token, not on the main port', async () => {
    const { s } = await server({ METRICS_PORT: '0', METRICS_TOKEN: TOKEN });
    expect(s.metricsPort).toEqual(expect.any(Number));
    expect((await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
    const res = await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('# TYPE museum_http_requests_total counter');
    expect((await fetch(`http://127.0.0.1:${s.metricsPort}/v1`)).status).toBe(404);
  });

  it('METRICS_PORT listens on 127.0.0.1 even when HOST is every address; METRICS_HOST says otherwise', async () => {
    // A listener on 0.0.0.0 accepts 127.0.0.2; one on 127.0.0.1 refuses it.
    const { s } = await server({ HOST: '0.0.0.0', METRICS_PORT: '0' });
    expect((await fetch(`http://127.0.0.2:${s.port}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).status).toBe(200);
    const refused = await fetch(`http://127.0.0.2:${s.metricsPort}/metrics`).catch((e: Error) => (e.cause as NodeJS.ErrnoException).code);
    expect(refused).toBe('ECONNREFUSED');
    const { s: open } = await server({ HOST: '127.0.0.1', METRICS_PORT: '0', METRICS_HOST: '0.0.0.0' });
    expect((await fetch(`http://127.0.0.2:${open.metricsPort}/metrics`)).status).toBe(200);
  });

  it('count presence listeners and open event streams', async () => {
    const { s } = await server({ METRICS_TOKEN: TOKEN });
    const streams = await Promise.all(
      [1, 2, 3].map(async () => {
        const controller = new AbortController();
        const res = await fetch(`${s.url}/v1/presence/stream`, { signal: controller.signal });
        expect(res.status).toBe(200);
        return controller;
      }),
    );
    const text = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(text).toMatch(/^museum_presence_listeners 3$/m);
    expect(text).toMatch(/^museum_sse_streams_open 3$/m);
    for (const c of streams) c.abort();
  });
});
