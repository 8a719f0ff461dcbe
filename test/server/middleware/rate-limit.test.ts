/**
 * Rate limits as decided: 120 per 60 s sliding window per key, X-RateLimit-* on every keyed response
 * (429 included), Retry-After: 60, only authenticated requests count, keys independent; and the
 * in-memory store's window and bound, driven with explicit clocks.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRateLimitStore } from '../../../server/middleware/rate-limit.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';
import { expectExactSlidingWindow } from './rate-limit-contract.ts';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

describe('per-key limit over HTTP', () => {
  it('lets exactly 120 of 200 concurrent requests with one key through; the rest are 429 with headers', async () => {
    const { key } = await server.services.keys.create('burst');
    const responses = await Promise.all(Array.from({ length: 200 }, () => server.get('/v1/rooms', { key })));
    const ok = responses.filter((r) => r.status === 200);
    const limited = responses.filter((r) => r.status === 429);
    expect(ok).toHaveLength(120);
    expect(limited).toHaveLength(80);
    for (const res of responses) {
      expect(res.headers.get('x-ratelimit-limit')).toBe('120');
      expect(res.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/);
    }
    // Every remaining budget from 119 down to 0 was handed out exactly once.
    expect(ok.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 120 }, (_, i) => i),
    );
    for (const res of limited) {
      expect(res.headers.get('retry-after')).toBe('60');
      expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(await errorOf(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    }
  });

  it('says in X-RateLimit-Reset when the oldest counted request leaves the window (seconds), on responses and on 429s', async () => {
    const key = (await server.services.keys.create('reset-header')).key;
    const first = await server.get('/v1/collections', { key });
    expect(first.headers.get('x-ratelimit-reset')).toBe('60');
    await new Promise((done) => setTimeout(done, 1_100));
    // The oldest counted request is the first, 1.1 s old: its place frees up in 59 s (rounded up).
    const later = Number((await server.get('/v1/collections', { key })).headers.get('x-ratelimit-reset'));
    expect(later).toBeGreaterThanOrEqual(50);
    expect(later).toBeLessThanOrEqual(59);
    await Promise.all(Array.from({ length: 118 }, () => server.get('/v1/rooms', { key })));
    const refused = await server.get('/v1/rooms', { key });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('x-ratelimit-reset'))).toBeLessThanOrEqual(later);
    // Per-IP budgets say it too (the presence ping).
    const ping = await server.post('/v1/presence/ping', {}, { key: null });
    expect(Number(ping.headers.get('x-ratelimit-reset'))).toBeGreaterThan(0);
  });

  it('counts every keyed route against the same budget, and keys independently', async () => {
    const a = (await server.services.keys.create('independent-a')).key;
    const b = (await server.services.keys.create('independent-b')).key;
    const first = await server.get('/v1/collections', { key: a });
    expect(first.headers.get('x-ratelimit-remaining')).toBe('119');
    const second = await server.get('/v1/artworks', { key: a });
    expect(second.headers.get('x-ratelimit-remaining')).toBe('118');
    const other = await server.get('/v1/artworks', { key: b });
    expect(other.headers.get('x-ratelimit-remaining')).toBe('119');
    await Promise.all(Array.from({ length: 118 }, () => server.get('/v1/rooms', { key: a })));
    expect((await server.get('/v1/rooms', { key: a })).status).toBe(429);
    const stillFine = await server.get('/v1/rooms', { key: b });
    expect(stillFine.status).toBe(200);
    expect(stillFine.headers.get('x-ratelimit-remaining')).toBe('118');
  });

  it('does not count unauthenticated requests, and does not put key headers on public routes', async () => {
    const { key } = await server.services.keys.create('uncounted');
    // The real key with its last hex digit changed: well-formed, and never the real one.
    const wrong = `${key.slice(0, -1)}${key.endsWith('0') ? '1' : '0'}`;
    expect(wrong).not.toBe(key);
    for (let i = 0; i < 5; i++) expect((await server.get('/v1/rooms', { key: wrong })).status).toBe(401);
    expect((await server.get('/v1/rooms', { key })).headers.get('x-ratelimit-remaining')).toBe('119');
    const open = await server.get('/v1', { key });
    expect(open.status).toBe(200);
    expect(open.headers.get('x-ratelimit-limit')).toBeNull();
  });
});

describe('MemoryRateLimitStore', () => {
  it('is an exact sliding window: a hit frees up exactly 60 s after it was made', async () => {
    await expectExactSlidingWindow(new MemoryRateLimitStore());
  });

  it('decides every hit as an exact count of the hits allowed in the last window would', async () => {
    const store = new MemoryRateLimitStore();
    const allowedAt: number[] = [];
    let now = 0;
    let seed = 7;
    for (let i = 0; i < 5_000; i++) {
      // Bursts and pauses (a deterministic LCG): runs at the budget, below it and idle.
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      now += seed % 7 === 0 ? seed % 1_500 : seed % 40;
      const inWindow = allowedAt.filter((t) => t > now - 1_000).length;
      const decision = await store.hit('k', 5, 1_000, now);
      expect(decision).toMatchObject(inWindow < 5 ? { allowed: true, remaining: 4 - inWindow } : { allowed: false, remaining: 0 });
      if (decision.allowed) allowedAt.push(now);
    }
  });

  it('never allows more than the limit in a window when the clock steps back', async () => {
    const store = new MemoryRateLimitStore();
    const allowedAt: number[] = [];
    for (const now of [10_000, 10_100, 9_000, 9_050, 10_200, 10_300, 10_950, 11_000, 11_060, 11_200]) {
      if ((await store.hit('k', 3, 1_000, now)).allowed) allowedAt.push(now);
      for (const t of allowedAt) expect(allowedAt.filter((u) => u > t - 1_000 && u <= t).length).toBeLessThanOrEqual(3);
    }
    expect(allowedAt.length).toBeGreaterThan(3);
  });

  it('stays bounded: beyond maxSubjects the least recently used subject is dropped', async () => {
    const store = new MemoryRateLimitStore(3);
    for (const s of ['a', 'b', 'c']) await store.hit(s, 2, 60_000, 0);
    await store.hit('a', 2, 60_000, 1); // a is now the most recently used
    await store.hit('d', 2, 60_000, 2); // evicts b
    expect(store.size).toBe(3);
    expect(await store.hit('a', 2, 60_000, 3)).toMatchObject({ allowed: false, remaining: 0 });
    expect(await store.hit('b', 2, 60_000, 3)).toMatchObject({ allowed: true, remaining: 1 });
  });
});
