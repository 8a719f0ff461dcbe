/**
 * Presence across instances (REDIS_URL) with a real redis-server: listeners on any instance hear the
 * arrivals, departures and Library searches of all of them with the deployment's `here`; a closing
 * instance leaves the count at once, a crashed one after the stale interval; and while Redis is down
 * each instance's listeners still hear its own events.
 */
import { mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PresenceEvent } from '../../../server/presence/broadcaster.ts';
import { RedisBroadcaster } from '../../../server/presence/redis-broadcaster.ts';
import { startRedis, type TestRedis } from '../../helpers/redis.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { openListener, type SseListener } from './sse.ts';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(() => redis.close());

const listeners: SseListener[] = [];
afterEach(() => {
  for (const l of listeners.splice(0)) l.close();
});

async function listen(server: TestServer): Promise<SseListener> {
  const l = await openListener(server.url);
  listeners.push(l);
  await l.next((e) => e.type === 'hello');
  return l;
}

/** Retry an assertion until it holds (Redis delivers asynchronously). */
async function until(assertion: () => unknown, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await assertion();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(25);
    }
  }
}

// Each ping from its own loopback address: probes in a retry loop never meet the per-IP ping limit
// (which Redis now shares between the instances).
let pings = 0;
const ping = (server: TestServer, handle: string) =>
  new Promise<{ ok: boolean; here: number }>((resolve, reject) => {
    const req = request(`${server.url}/v1/presence/ping`, {
      method: 'POST',
      agent: false,
      localAddress: `127.0.8.${1 + (pings++ % 250)}`,
      headers: { 'content-type': 'application/json' },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () =>
        res.statusCode === 200
          ? resolve((JSON.parse(text) as { data: { ok: boolean; here: number } }).data)
          : reject(new Error(`ping: ${res.statusCode} ${text}`)),
      );
    });
    req.end(JSON.stringify({ handle }));
  });

describe('two instances behind one Redis', () => {
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    const shared = mkdtempSync(join(tmpdir(), 'museum-presence-redis-'));
    const common = { env: { REDIS_URL: redis.url }, dataDir: join(shared, 'data'), stateDb: join(shared, 'state.db') };
    a = await startTestServer({ ...common, keyName: 'presence-a' });
    b = await startTestServer({ ...common, keyName: 'presence-b' });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('share arrivals, departures, searches and one count', async () => {
    const onA = await listen(a);
    expect(onA.events[0]).toMatchObject({ type: 'hello', here: 1 });
    // B has heard of A's listener, so B's newcomer counts it.
    await until(async () => expect((await ping(b, 'probe')).here).toBe(1));
    const onB = await listen(b);
    expect(onB.events[0]).toMatchObject({ type: 'hello', here: 2 });
    await onA.next((e) => e.type === 'arrived' && e.here === 2);

    expect(await ping(a, 'Ada')).toEqual({ ok: true, here: 2 });
    await onB.next((e) => e.type === 'library-search' && e.handle === 'Ada');
    await onA.next((e) => e.type === 'library-search' && e.handle === 'Ada');

    onB.close();
    await onA.next((e) => e.type === 'left' && e.here === 1);
    expect((await ping(b, 'after')).here).toBe(1);
  });

  it('keep presence on each instance while Redis is down', async () => {
    const onA = await listen(a);
    await redis.stop();
    try {
      expect((await ping(a, 'offline')).ok).toBe(true);
      await onA.next((e) => e.type === 'library-search' && e.handle === 'offline');
    } finally {
      await redis.start();
    }
    // Back: B's listeners hear A's searches again once B's subscription has reconnected.
    const onB = await listen(b);
    await until(async () => {
      await ping(a, 'back');
      await sleep(100);
      expect(onB.events.some((e) => e.type === 'library-search' && e.handle === 'back')).toBe(true);
    }, 15_000);
  }, 30_000);
});

describe('RedisBroadcaster counts', () => {
  it('forget a closed instance at once and a silent one after the stale interval', async () => {
    const log = pino({ level: 'silent' });
    const connect = () => new Redis(redis.url);
    const make = () => {
      const publisher = connect();
      return {
        publisher,
        broadcaster: new RedisBroadcaster(publisher, connect(), log, { channel: 'test:counts', heartbeatMs: 100, staleMs: 400 }),
      };
    };
    const [x, y, z] = [make(), make(), make()];
    const heard: PresenceEvent[] = [];
    x.broadcaster.subscribe((e) => heard.push(e));
    try {
      await Promise.all([x, y, z].map(({ broadcaster }) => broadcaster.ready));
      y.broadcaster.publish({ type: 'arrived', here: 3, at: 1 });
      z.broadcaster.publish({ type: 'arrived', here: 4, at: 2 });
      // x has no listener of its own: the deployment has 3 + 4, and arrived events say so.
      await until(() => expect(x.broadcaster.here(0)).toBe(7));
      expect(heard.at(-1)).toMatchObject({ type: 'arrived', here: 7 });
      await y.broadcaster.close(); // says goodbye
      await until(() => expect(x.broadcaster.here(0)).toBe(4));
      // z "crashes": no goodbye, no heartbeat.
      z.publisher.disconnect();
      await until(() => expect(x.broadcaster.here(0)).toBe(0), 3_000);
    } finally {
      for (const { publisher, broadcaster } of [x, y, z]) {
        await broadcaster.close();
        publisher.disconnect();
      }
    }
  });
});
