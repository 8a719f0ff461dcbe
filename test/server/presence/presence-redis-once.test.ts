/**
 * Presence through Redis as one server without Redis would give it, with a real redis-server of
 * this file's own (so no other test's events cross the channel): each listener hears each event
 * once — never its own arrival, not twice when Redis stalls around a PUBLISH — and the per-IP cap
 * holds across instances, a crashed instance's places expiring with its TTL.
 */
import { mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisBroadcaster } from '../../../server/presence/redis-broadcaster.ts';
import { startRedis, type TestRedis } from '../../helpers/redis.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { eventually, openListener, type PresenceFrame, type SseListener } from './sse.ts';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(() => redis.close());

const listeners: Array<{ close(): void }> = [];
afterEach(() => {
  for (const l of listeners.splice(0)) l.close();
});

// Every listener and ping from its own loopback address unless a test picks one: only the per-IP
// test meets the per-IP cap, and pings never meet their rate limit.
let addresses = 0;
const nextAddress = () => `127.0.6.${1 + (addresses++ % 250)}`;

async function listen(server: TestServer, localAddress = nextAddress()): Promise<SseListener> {
  const l = await openListener(server.url, { localAddress });
  listeners.push(l);
  expect(l.status).toBe(200);
  await l.next((e) => e.type === 'hello');
  return l;
}

function ping(server: TestServer, handle: string): Promise<{ here: number }> {
  return new Promise((resolve, reject) => {
    const req = request(`${server.url}/v1/presence/ping`, {
      method: 'POST',
      agent: false,
      localAddress: nextAddress(),
      headers: { 'content-type': 'application/json' },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () =>
        res.statusCode === 200
          ? resolve((JSON.parse(text) as { data: { here: number } }).data)
          : reject(new Error(`ping: ${res.statusCode} ${text}`)),
      );
    });
    req.end(JSON.stringify({ handle }));
  });
}

/** A stream request's answer when it is refused (a 200 is closed at once and reported as such). */
function streamAnswer(server: TestServer, localAddress: string): Promise<{ status: number; retryAfter?: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${server.url}/v1/presence/stream`, { agent: false, localAddress });
    req.on('error', reject);
    req.on('response', (res) => {
      if (res.statusCode === 200) {
        listeners.push({ close: () => req.destroy() });
        return resolve({ status: 200, body: '' });
      }
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body }));
    });
    req.end();
  });
}

const isSearch = (handle: string) => (e: PresenceFrame) => e.type === 'library-search' && e.handle === handle;

/** The event types a listener received strictly between two Library-search markers. */
function typesBetween(l: SseListener, from: string, to: string): string[] {
  const start = l.events.findIndex(isSearch(from));
  const end = l.events.findIndex(isSearch(to));
  expect(start).toBeGreaterThanOrEqual(0);
  expect(end).toBeGreaterThan(start);
  return l.events.slice(start + 1, end).map((e) => e.type);
}

describe('two instances behind one Redis', () => {
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    const shared = mkdtempSync(join(tmpdir(), 'museum-presence-once-'));
    const common = {
      env: { REDIS_URL: redis.url, PRESENCE_MAX_PER_IP: '2' },
      dataDir: join(shared, 'data'),
      stateDb: join(shared, 'state.db'),
    };
    a = await startTestServer({ ...common, keyName: 'presence-once-a' });
    b = await startTestServer({ ...common, keyName: 'presence-once-b' });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  /** Both instances know that nobody listens: departures of earlier tests are all delivered. */
  const nobodyListens = () => eventually(async () => (await ping(a, 'idle')).here === 0 && (await ping(b, 'idle')).here === 0);

  it('greet a newcomer with hello and never its own arrival; the others hear it once', async () => {
    await nobodyListens();
    const remote = await listen(b);
    const local = await listen(a);
    await eventually(async () => (await ping(a, 'count')).here === 2); // A knows B's listener
    await ping(a, 'before');
    await Promise.all([remote, local].map((l) => l.next(isSearch('before'))));

    const newcomer = await listen(a);
    // A's events reach every listener in the order A published them: `after` follows any echo of the arrival.
    await ping(a, 'after');
    await Promise.all([remote, local, newcomer].map((l) => l.next(isSearch('after'))));

    expect(newcomer.events.map((e) => e.type)).toEqual(['hello', 'library-search']);
    expect(newcomer.events[0]).toMatchObject({ type: 'hello', here: 3 });
    expect(typesBetween(local, 'before', 'after')).toEqual(['arrived']);
    expect(typesBetween(remote, 'before', 'after')).toEqual(['arrived']);
  });

  it('deliver an event once to each listener when Redis stalls around its PUBLISH', async () => {
    await nobodyListens();
    const onA = await listen(a);
    const onB = await listen(b);
    const leaving = await listen(a);
    await ping(a, 'stall-before');
    await Promise.all([onA, onB].map((l) => l.next(isSearch('stall-before'))));

    // Writes (PUBLISH included) wait for a second: A's PUBLISH of `left` outlives its command
    // timeout, and Redis still delivers it afterwards.
    const admin = new Redis(redis.url);
    try {
      expect(await admin.call('CLIENT', 'PAUSE', '1000', 'WRITE')).toBe('OK');
      leaving.close();
      await onB.next((e) => e.type === 'left');
    } finally {
      admin.disconnect();
    }
    // Published by B once B heard the `left`: it reaches A's subscriber after the echo of `left`.
    await ping(b, 'stall-after');
    await Promise.all([onA, onB].map((l) => l.next(isSearch('stall-after'))));

    expect(typesBetween(onA, 'stall-before', 'stall-after')).toEqual(['left']);
    expect(typesBetween(onB, 'stall-before', 'stall-after')).toEqual(['left']);
  }, 20_000);

  it('cap listeners per client IP across instances: refused on B at the cap held on A, admitted once one leaves', async () => {
    const ip = '127.0.7.1';
    const first = await listen(a, ip);
    await listen(a, ip);

    const refused = await streamAnswer(b, ip);
    expect(refused).toMatchObject({ status: 503, retryAfter: '30' });
    expect(JSON.parse(refused.body)).toEqual({ errors: [{ message: expect.any(String), extensions: { code: 'BUSY' } }] });
    expect((await streamAnswer(b, '127.0.7.2')).status).toBe(200); // another address still gets in

    first.close();
    await eventually(async () => (await streamAnswer(b, ip)).status === 200);
  });
});

describe('RedisSeats', () => {
  const log = pino({ level: 'silent' });
  const instances: Array<{ publisher: Redis; broadcaster: RedisBroadcaster }> = [];
  const instance = () => {
    const publisher = new Redis(redis.url);
    const broadcaster = new RedisBroadcaster(publisher, new Redis(redis.url), log, {
      channel: 'test:seats',
      heartbeatMs: 100,
      staleMs: 400,
    });
    instances.push({ publisher, broadcaster });
    return { publisher, seats: broadcaster.seats(3) };
  };
  afterEach(async () => {
    for (const { publisher, broadcaster } of instances.splice(0)) {
      await broadcaster.close();
      publisher.disconnect();
    }
  });

  it('admit exactly the cap from concurrent joins on several instances', async () => {
    const [x, y] = [instance(), instance()];
    const joins = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? x : y).seats.take('198.51.100.1')));
    expect(joins.filter(Boolean)).toHaveLength(3);
    joins.find(Boolean)!.release();
    await eventually(async () => (await y.seats.take('198.51.100.1')) !== null);
  });

  it('let the places of a crashed instance expire with its TTL', async () => {
    const [x, y] = [instance(), instance()];
    for (let i = 0; i < 3; i++) expect(await x.seats.take('198.51.100.2')).not.toBeNull();
    expect(await y.seats.take('198.51.100.2')).toBeNull();
    x.publisher.disconnect(); // no release, no refresh: a crash
    await eventually(async () => (await y.seats.take('198.51.100.2')) !== null);
  });
});
