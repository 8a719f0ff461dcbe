/**
 * REDIS_URL: several instances share one budget per key through a real redis-server, the store keeps
 * the in-memory store's exact window, and a Redis outage never fails or hangs a request — each
 * instance limits on its own until Redis is back.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../server/config.ts';
import { MemoryRateLimitStore } from '../../../server/middleware/rate-limit.ts';
import { MAX_PENDING, RedisRateLimitStore } from '../../../server/state/rate-limit-redis.ts';
import { connectRedis, RedisOrLocal } from '../../../server/state/redis.ts';
import { capturedLogger } from '../../helpers/logs.ts';
import { startRedis, type TestRedis, unreachableRedisUrl } from '../../helpers/redis.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { expectExactSlidingWindow } from '../middleware/rate-limit-contract.ts';

const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(() => redis.close());

/** A store on a connection of its own (its keys under `prefix`), disconnected after `use`. */
async function withStore(prefix: string, use: (store: RedisRateLimitStore, client: Redis) => Promise<void>): Promise<void> {
  const client = new Redis(redis.url);
  try {
    await use(new RedisRateLimitStore(client, new MemoryRateLimitStore(), pino({ level: 'silent' }), prefix), client);
  } finally {
    client.disconnect();
  }
}

describe('RedisRateLimitStore', () => {
  it('is the same exact sliding window as the in-memory store, driven with explicit clocks', () =>
    withStore('test:window:', async (store, client) => {
      await expectExactSlidingWindow(store);
      // Idle subjects do not stay in Redis: each window expires with its last hit.
      expect(await client.pttl('test:window:k')).toBeGreaterThan(59_000);
      expect(await client.zcard('test:window:k')).toBe(1);
    }));

  it('falls back to the local window, for the whole batch, when Redis answers the script with an error', () =>
    withStore('test:hostile:', async (store, client) => {
      // A key of the wrong type makes the script fail inside Redis (WRONGTYPE).
      await client.set('test:hostile:poisoned', 'not a sorted set');
      const now = Date.now();
      const decisions = await Promise.all([
        store.hit('poisoned', 2, 60_000, now),
        store.hit('other', 2, 60_000, now),
        store.hit('poisoned', 2, 60_000, now),
        store.hit('poisoned', 2, 60_000, now),
      ]);
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(await client.exists('test:hostile:other')).toBe(0); // the batch went to the local store
    }));

  it('counts the hits of one turn in order, whatever their subjects and limits, past one batch', () =>
    withStore('test:turn:', async (store, client) => {
      const now = Date.now();
      // 700 hits issued together (two script calls): 600 on one key limited to 120, 100 on another limited to 3.
      const hits = Array.from({ length: 700 }, (_, i) =>
        i % 7 === 6 ? store.hit('ip', 3, 60_000, now) : store.hit('key', 120, 60_000, now),
      );
      const decisions = await Promise.all(hits);
      const key = decisions.filter((_, i) => i % 7 !== 6);
      const ip = decisions.filter((_, i) => i % 7 === 6);
      expect(key.filter((d) => d.allowed)).toHaveLength(120);
      expect(key.slice(0, 120).map((d) => d.remaining)).toEqual(Array.from({ length: 120 }, (_, i) => 119 - i));
      expect(key.slice(120).every((d) => !d.allowed && d.remaining === 0)).toBe(true);
      expect(ip.map((d) => d.allowed)).toEqual([true, true, true, ...Array<boolean>(97).fill(false)]);
      expect(await client.zcard('test:turn:key')).toBe(120);
    }));
});

/**
 * Run `during` with the test's redis-server stopped (SIGSTOP): connections stay open and nothing is
 * answered, as in a partition or behind a long command. The deadline only keeps a hang from leaving
 * the server stopped for the next tests; nothing is measured.
 */
async function whileStalled<T>(during: () => Promise<T>): Promise<T> {
  const admin = new Redis(redis.url);
  const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))![1]);
  admin.disconnect();
  process.kill(pid, 'SIGSTOP');
  let timer: NodeJS.Timeout | undefined;
  const safetyNet = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error('still waiting on the stalled Redis after 20 s')), 20_000)),
  );
  try {
    return await Promise.race([during(), safetyNet]);
  } finally {
    clearTimeout(timer);
    process.kill(pid, 'SIGCONT');
  }
}

/** Rate-limit script calls Redis has run so far (EVALSHA, or EVAL when the script was not cached). */
async function scriptCalls(): Promise<number> {
  const admin = new Redis(redis.url);
  try {
    const stats = await admin.info('commandstats');
    return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
  } finally {
    admin.disconnect();
  }
}

/** A store on the production client (connectRedis: 250 ms command timeout), disconnected after `use`. */
async function withServingStore(
  prefix: string,
  use: (store: RedisRateLimitStore, client: Redis, log: ReturnType<typeof capturedLogger>) => Promise<void>,
): Promise<void> {
  const log = capturedLogger('info');
  const client = await connectRedis(redis.url, log.log);
  try {
    const store = new RedisRateLimitStore(client, new MemoryRateLimitStore(), log.log, prefix);
    // A first hit while healthy: the script is cached in Redis, the connection is ready.
    expect(await store.hit('warm', 5, 60_000, Date.now())).toMatchObject({ allowed: true, remaining: 4 });
    await use(store, client, log);
  } finally {
    client.disconnect();
  }
}

describe('a stalled Redis (up, connected, answering nothing)', () => {
  it('costs one command timeout, then hits are decided locally without a script call each', () =>
    withServingStore('test:stall:', async (store, client, log) => {
      const before = await scriptCalls();
      const now = Date.now();
      const burst = await whileStalled(async () => {
        // The first batch waits out the command timeout and is decided locally…
        expect(await store.hit('k', 5, 60_000, now)).toMatchObject({ allowed: true, remaining: 4 });
        // …and a burst of four batches' worth right after it too, all while Redis stays stopped.
        return Promise.all(Array.from({ length: 2_000 }, () => store.hit('k', 5, 60_000, now)));
      });
      expect(burst).toHaveLength(2_000);
      expect(burst.filter((d) => d.allowed)).toHaveLength(4); // the local window went on from the first hit
      await client.ping(); // answered after every command this connection sent while Redis was stopped
      // The first batch, plus at most one probe — not one call per batch (5 without the fail-fast window).
      expect((await scriptCalls()) - before).toBeLessThanOrEqual(2);
      expect(log.lines.filter((l) => /Redis does not answer/.test(String(l.msg)))).toHaveLength(1);
    }));

  it('queues at most MAX_PENDING hits for it; the hits beyond are decided locally at once', () =>
    withServingStore('test:cap:', async (store) => {
      const decided: number[] = [];
      const all = await whileStalled(async () => {
        const now = Date.now();
        const hits = Array.from({ length: MAX_PENDING + 1_000 }, (_, i) =>
          Promise.resolve(store.hit(`s${i}`, 5, 60_000, now)).then((d) => {
            decided.push(i);
            return d;
          }),
        );
        // The first batch has left (its timeout is still ahead): the queue is as long as it gets.
        await new Promise(setImmediate);
        expect(decided).toHaveLength(1_000);
        expect(Math.min(...decided)).toBe(MAX_PENDING);
        return Promise.all(hits);
      });
      // The queued ones too, once the first batch failed: every hit answered, none lost.
      expect(all).toHaveLength(MAX_PENDING + 1_000);
      expect(all.every((d) => d.allowed && d.remaining === 4)).toBe(true);
    }));

  it('counts hits in Redis again once it answers', () =>
    withServingStore('test:resume:', async (store, client, log) => {
      expect(await whileStalled(async () => store.hit('gap', 5, 60_000, Date.now()))).toMatchObject({ allowed: true, remaining: 4 });
      // Back: hits stay local until the fail-fast window ends and a probe finds Redis answering.
      const deadline = Date.now() + 10_000;
      while (!(await client.exists('test:resume:back')) && Date.now() < deadline) {
        await store.hit('back', 100, 60_000, Date.now());
        await sleep(50);
      }
      const counted = await client.zcard('test:resume:back');
      expect(counted).toBeGreaterThan(0);
      await Promise.all(Array.from({ length: 10 }, () => store.hit('back', 100, 60_000, Date.now())));
      expect(await client.zcard('test:resume:back')).toBe(counted + 10);
      expect(log.lines.some((l) => /shared through Redis again/.test(String(l.msg)))).toBe(true);
    }));

  it('RedisOrLocal (rate limits, guide sessions, seats): after one timeout, calls go local without trying Redis', async () => {
    const silent = pino({ level: 'silent' });
    const client = await connectRedis(redis.url, silent);
    try {
      const shared = new RedisOrLocal(silent, { down: 'down', back: 'back' });
      let tried = 0;
      const viaRedis = () => {
        tried++;
        return client.get('test:rol');
      };
      const answers = await whileStalled(async () => {
        expect(await shared.run(viaRedis, () => 'local')).toBe('local');
        return Promise.all(Array.from({ length: 100 }, () => shared.run(viaRedis, () => 'local')));
      });
      expect(answers.every((a) => a === 'local')).toBe(true);
      expect(tried).toBeLessThanOrEqual(2); // the first call and at most one probe (101 without the window)
    } finally {
      client.disconnect();
    }
  });
});

describe('two instances behind one Redis', () => {
  let a: TestServer;
  let b: TestServer;
  let logA: ReturnType<typeof capturedLogger>;

  beforeAll(async () => {
    const shared = mkdtempSync(join(tmpdir(), 'museum-redis-instances-'));
    const common = { env: { REDIS_URL: redis.url }, dataDir: join(shared, 'data'), stateDb: join(shared, 'state.db') };
    logA = capturedLogger('info');
    a = await startTestServer({ ...common, keyName: 'instance-a', log: logA.log });
    b = await startTestServer({ ...common, keyName: 'instance-b' });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('give one key exactly 120 of 200 concurrent requests between them', async () => {
    const { key } = await a.services.keys.create('shared-burst');
    const responses = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).get('/v1/rooms', { key })));
    const ok = responses.filter((r) => r.status === 200);
    expect(ok).toHaveLength(120);
    expect(responses.filter((r) => r.status === 429)).toHaveLength(80);
    // Every remaining budget from 119 down to 0 was handed out exactly once, across both instances.
    expect(ok.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 120 }, (_, i) => i),
    );
    // Both answered some of each: the budget really is shared, not split.
    for (const server of [a, b]) expect(responses.some((r, i) => (i % 2 ? a : b) === server && r.status === 200)).toBe(true);
  });

  it('keep serving through a Redis outage, limiting per instance, and share again when it is back', async () => {
    const { key } = await a.services.keys.create('outage');
    expect((await a.get('/v1/rooms', { key })).headers.get('x-ratelimit-remaining')).toBe('119');
    await redis.stop();
    try {
      const started = Date.now();
      const during = await Promise.all([a, b, a, b].map((server) => server.get('/v1/collections', { key })));
      expect(during.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      for (const res of during) expect(res.headers.get('x-ratelimit-limit')).toBe('120');
      expect(Date.now() - started).toBeLessThan(5_000); // no request waits on Redis (each gives up after 0.25 s)
      // The per-instance budgets are fresh ones: each instance counts its own requests.
      expect(during.map((r) => r.headers.get('x-ratelimit-remaining')).sort()).toEqual(['118', '118', '119', '119']);
      expect(logA.lines.some((l) => /Redis does not answer: rate limits are per instance/.test(String(l.msg)))).toBe(true);
    } finally {
      await redis.start();
    }
    // Back: the shared window (empty after the restart, nothing is persisted) counts again for both.
    const deadline = Date.now() + 10_000;
    let remaining = '';
    while (Date.now() < deadline) {
      remaining = (await b.get('/v1/rooms', { key })).headers.get('x-ratelimit-remaining') ?? '';
      if (logA.lines.some((l) => /shared through Redis again/.test(String(l.msg))) || remaining === '119') break;
      await sleep(200);
    }
    const x = Number((await a.get('/v1/rooms', { key })).headers.get('x-ratelimit-remaining'));
    const y = Number((await b.get('/v1/rooms', { key })).headers.get('x-ratelimit-remaining'));
    expect(y).toBe(x - 1);
  }, 30_000);
});

describe('configuration', () => {
  it('starts and serves when Redis cannot be reached, limiting per instance', async () => {
    const url = await unreachableRedisUrl();
    const started = Date.now();
    const server = await startTestServer({ env: { REDIS_URL: url } });
    try {
      expect(Date.now() - started).toBeLessThan(5_000);
      const res = await server.get('/v1/rooms');
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-remaining')).toBe('119');
    } finally {
      await server.close();
    }
  });

  it('an unreachable Redis costs `museum serve` one warning line, not a stream of client errors', async () => {
    const url = await unreachableRedisUrl();
    const dir = mkdtempSync(join(tmpdir(), 'museum-redis-serve-'));
    const child = spawn(process.execPath, [join(ROOT, 'bin/museum.js'), 'serve'], {
      cwd: ROOT,
      env: {
        ...process.env,
        REDIS_URL: url,
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: join(dir, 'data'),
        STATE_DB: join(dir, 'state.db'),
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      const deadline = Date.now() + 15_000;
      while (!/museum: serving/.test(stderr) && Date.now() < deadline) await sleep(50);
      expect(stderr).toMatch(/museum: serving/);
      await sleep(1_500); // several reconnection attempts
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    expect(stderr.match(/Redis connection failed; retrying in the background/g)).toHaveLength(1);
    expect(stderr).not.toMatch(/Unhandled error event/);
  }, 30_000);

  it('refuses a REDIS_URL that is not a redis:// URL', () => {
    expect(() => loadConfig({ REDIS_URL: 'http://127.0.0.1:6379' })).toThrow(/REDIS_URL/);
    expect(loadConfig({ REDIS_URL: 'rediss://cache.internal:6380' }).redisUrl).toBe('rediss://cache.internal:6380');
  });
});
