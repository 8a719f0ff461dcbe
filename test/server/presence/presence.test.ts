/**
 * Presence over real connections: the SSE feed (hello / arrived / left / library-search with
 * counts, keepalive comments), the ping (handle cleaning, per-IP limit), capacity (503 BUSY),
 * disconnect cleanup, coalescing above the threshold, and slow listeners being dropped without
 * delaying the others. Presence cannot be exhausted by one address (issue 11): at most
 * PRESENCE_MAX_PER_IP listeners per client IP (the forwarded one behind TRUST_PROXY), and a
 * listener whose socket has not drained within the drain timeout is dropped, however little waits.
 */
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { InProcessBroadcaster } from '../../../server/presence/broadcaster.ts';
import { PresenceHub } from '../../../server/presence/hub.ts';
import { SSE_HEADERS } from '../../../server/response.ts';
import { type OpenApiDoc, validateAgainstOpenApi } from '../../helpers/openapi.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';
import { eventually, openListener, type SseListener } from './sse.ts';

const servers: TestServer[] = [];
const listeners: SseListener[] = [];
const cleanups: Array<() => void | Promise<void>> = [];

afterEach(async () => {
  for (const l of listeners.splice(0)) l.close();
  for (const s of servers.splice(0)) await s.close();
  for (const c of cleanups.splice(0)) await c();
});

async function server(env: Record<string, string> = {}): Promise<TestServer> {
  const s = await startTestServer({ env });
  servers.push(s);
  return s;
}

async function listen(s: TestServer, options: { localAddress?: string } = {}): Promise<SseListener> {
  const l = await openListener(s.url, options);
  listeners.push(l);
  await l.next((e) => e.type === 'hello');
  return l;
}

/** POST /v1/presence/ping over node:http so the source address (client IP) can be chosen. */
function ping(
  s: TestServer,
  body: string | undefined,
  options: { localAddress?: string; headers?: Record<string, string>; agent?: Agent } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; json: any }> {
  return new Promise((resolve, reject) => {
    const req = request(`${s.url}/v1/presence/ping`, {
      method: 'POST',
      agent: options.agent ?? false,
      localAddress: options.localAddress,
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, json: text ? JSON.parse(text) : null }));
    });
    req.end(body);
  });
}

const here = async (s: TestServer): Promise<number> => {
  // Each probe uses its own loopback address so probes never exhaust a ping budget.
  const res = await ping(s, undefined, { localAddress: `127.0.9.${1 + (probeCount++ % 250)}` });
  expect(res.status).toBe(200);
  return res.json.data.here as number;
};
let probeCount = 0;

describe('presence stream', () => {
  it('greets with hello, announces arrivals and departures with the count, and streams SSE headers', async () => {
    const s = await server();
    const a = await listen(s);
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(a.headers['cache-control']).toBe('no-cache, no-transform');
    expect(a.headers['x-accel-buffering']).toBe('no');
    expect(a.headers['x-request-id']).toBeTruthy();
    expect(a.headers['access-control-allow-origin']).toBe('*');
    expect(a.events[0]).toMatchObject({ type: 'hello', here: 1 });
    expect(typeof a.events[0]!.at).toBe('number');

    const b = await listen(s);
    expect(b.events[0]).toMatchObject({ type: 'hello', here: 2 });
    const arrived = await a.next((e) => e.type === 'arrived');
    expect(arrived).toMatchObject({ type: 'arrived', here: 2 });
    expect(Math.abs(arrived.at! - Date.now())).toBeLessThan(60_000);

    b.close();
    expect(await a.next((e) => e.type === 'left')).toMatchObject({ type: 'left', here: 1 });
    // The newcomer learns the count from its hello, not from its own arrival.
    expect(b.events.filter((e) => e.type === 'arrived')).toEqual([]);
  });

  it('sends a keepalive comment periodically', async () => {
    const s = await server({ PRESENCE_KEEPALIVE_MS: '100' });
    const a = await listen(s);
    await eventually(() => a.comments.filter((c) => c === 'keepalive').length >= 2);
  });

  it('answers 503 BUSY at capacity and admits again once a listener leaves', async () => {
    const s = await server({ PRESENCE_CAPACITY: '2' });
    const a = await listen(s);
    await listen(s);
    const res = await fetch(`${s.url}/v1/presence/stream`);
    expect(await errorOf(res)).toMatchObject({ status: 503, code: 'BUSY' });
    a.close();
    await eventually(async () => (await here(s)) === 1);
    const c = await listen(s);
    expect(c.events[0]).toMatchObject({ type: 'hello', here: 2 });
  });

  it('cleans up every disconnected listener', async () => {
    const s = await server();
    const many = await Promise.all(Array.from({ length: 40 }, () => listen(s)));
    expect(await here(s)).toBe(40);
    // Abrupt disconnects (socket destroyed, no clean HTTP end).
    for (const l of many.slice(0, 25)) l.response.socket.destroy();
    await eventually(async () => (await here(s)) === 15);
    for (const l of many.slice(25)) l.close();
    await eventually(async () => (await here(s)) === 0);
  });

  it('ends open streams cleanly when the server shuts down', async () => {
    const s = await server();
    const a = await listen(s);
    servers.splice(servers.indexOf(s), 1);
    await s.close();
    await a.ended;
    expect(a.response.complete).toBe(true);
  });
});

describe('presence ping', () => {
  it('broadcasts library-search with the cleaned handle only and returns the count', async () => {
    const s = await server();
    const a = await listen(s);
    const b = await listen(s);
    const cases: Array<[string | undefined, string]> = [
      [JSON.stringify({ handle: 'ada' }), 'ada'],
      [JSON.stringify({ handle: '<script>alert(1)</script>' }), 'scriptalert(1)/script'],
      [JSON.stringify({ handle: 'a\u0000b\u0007c\u001bd\u007f\u009fe\nf' }), 'abcdef'],
      [JSON.stringify({ handle: '\u202Eevil' }), 'evil'],
      [JSON.stringify({ handle: '\uFEFFa\u200Bd\u200Ca\u200D\u2060\u00AD\u200F' }), 'ada'],
      [JSON.stringify({ handle: '\u200B\u200B' }), 'anon'],
      [JSON.stringify({ handle: 'art 👩\u200D🎨' }), 'art 👩\u200D🎨'], // a joiner inside an emoji sequence stays
      [JSON.stringify({ handle: 'x'.repeat(60) }), 'x'.repeat(48)],
      [JSON.stringify({ handle: '🎨'.repeat(50) }), '🎨'.repeat(48)],
      [JSON.stringify({ handle: '   ' }), 'anon'],
      [JSON.stringify({ handle: '<<>>' }), 'anon'],
      [JSON.stringify({ handle: null }), 'anon'],
      [JSON.stringify({ handle: 'q', question: 'what is secret?' }), 'q'],
      [JSON.stringify({}), 'anon'],
      [undefined, 'anon'],
    ];
    for (const [i, [body]] of cases.entries()) {
      const res = await ping(s, body, { localAddress: `127.0.1.${i + 1}` });
      expect(res.status, `case ${i}`).toBe(200);
      expect(res.json).toEqual({ data: { ok: true, here: 2 } });
    }
    await eventually(() => b.events.filter((e) => e.type === 'library-search').length === cases.length);
    const searches = b.events.filter((e) => e.type === 'library-search');
    expect(searches.map((e) => e.handle)).toEqual(cases.map(([, handle]) => handle));
    for (const e of searches) {
      // Only the handle and the time: never the question or anything else from the body.
      expect(Object.keys(e).sort()).toEqual(['at', 'handle', 'type']);
      expect(typeof e.at).toBe('number');
    }
    await eventually(() => a.events.filter((e) => e.type === 'library-search').length === cases.length);
  });

  it('rejects bodies that are not a handle object', async () => {
    const s = await server();
    for (const [i, body] of ['{"handle": 5}', '[1,2]', '"ada"', '{bad json', '{"handle": {"x": 1}}'].entries()) {
      const res = await ping(s, body, { localAddress: `127.0.2.${i + 1}` });
      expect(res.status, body).toBe(400);
      expect(res.json.errors[0].extensions.code).toBe('BAD_REQUEST');
    }
  });

  it('limits pings to 12 per minute per client IP', async () => {
    const s = await server();
    for (let i = 0; i < 12; i++) expect((await ping(s, undefined, { localAddress: '127.0.3.1' })).status).toBe(200);
    const limited = await ping(s, undefined, { localAddress: '127.0.3.1' });
    expect(limited.status).toBe(429);
    expect(limited.json.errors[0].extensions.code).toBe('RATE_LIMITED');
    expect(limited.headers['retry-after']).toBe('60');
    // Another client has its own budget; a forged X-Forwarded-For does not escape the limit.
    expect((await ping(s, undefined, { localAddress: '127.0.3.2' })).status).toBe(200);
    const forged = await ping(s, undefined, { localAddress: '127.0.3.1', headers: { 'x-forwarded-for': '10.9.9.9' } });
    expect(forged.status).toBe(429);
  });
});

describe('presence contract', () => {
  it('conforms to the OpenAPI document', async () => {
    const s = await server({ PRESENCE_CAPACITY: '1' });
    const doc = (await (await fetch(`${s.url}/v1/openapi.json`)).json()) as OpenApiDoc;
    expect(doc.paths['/v1/presence/stream']!.get!.responses['200']!.content).toHaveProperty(['text/event-stream']);
    await listen(s);
    const busy = await fetch(`${s.url}/v1/presence/stream`);
    validateAgainstOpenApi(doc, 'GET', '/v1/presence/stream', busy.status, await busy.json());
    const ip = '127.0.4.1';
    const ok = await ping(s, JSON.stringify({ handle: 'ada' }), { localAddress: ip });
    validateAgainstOpenApi(doc, 'POST', '/v1/presence/ping', ok.status, ok.json);
    const bad = await ping(s, '{"handle": 1}', { localAddress: ip });
    validateAgainstOpenApi(doc, 'POST', '/v1/presence/ping', bad.status, bad.json);
    for (let i = 0; i < 12; i++) await ping(s, undefined, { localAddress: ip });
    const limited = await ping(s, undefined, { localAddress: ip });
    expect(limited.status).toBe(429);
    validateAgainstOpenApi(doc, 'POST', '/v1/presence/ping', limited.status, limited.json);
  });
});

describe('presence at scale', () => {
  it('sends one event per change at or below the threshold and coalesces above it', async () => {
    const coalesceMs = 150;
    const s = await server({ PRESENCE_COALESCE_ABOVE: '5', PRESENCE_COALESCE_MS: String(coalesceMs) });
    const observer = await listen(s);
    for (let n = 2; n <= 5; n++) {
      await listen(s);
      await observer.next((e) => e.type === 'arrived' && e.here === n);
    }
    // Below the threshold: exactly one arrival per connection, in order.
    expect(observer.events.filter((e) => e.type === 'arrived').map((e) => e.here)).toEqual([2, 3, 4, 5]);

    const crowd = await Promise.all(Array.from({ length: 40 }, () => listen(s)));
    await observer.next((e) => e.type === 'arrived' && e.here === 45);
    const coalesced = observer.events.filter((e) => e.type === 'arrived').slice(4);
    expect(coalesced.length).toBeLessThan(40);
    // At most one event per interval, each carrying the count at that moment.
    for (let i = 1; i < coalesced.length; i++) {
      expect(coalesced[i]!.at! - coalesced[i - 1]!.at!).toBeGreaterThanOrEqual(coalesceMs - 1);
      expect(coalesced[i]!.here!).toBeGreaterThan(coalesced[i - 1]!.here!);
    }
    // Late arrivals also hear about the crowd: the last member got a coalesced event or its hello said 45.
    const last = crowd[crowd.length - 1]!;
    expect(Math.max(...last.events.map((e) => e.here ?? 0))).toBe(45);

    for (const l of crowd) l.close();
    await observer.next((e) => e.type === 'left' && e.here === 5);
    const leftEvents = observer.events.filter((e) => e.type === 'left');
    expect(leftEvents.length).toBeLessThan(40);
  });

  it('drops a listener that stops reading without delaying the others', async () => {
    const s = await server({ TRUST_PROXY: '1' });
    const slow = await listen(s);
    const fast = await listen(s);
    slow.pause();
    // Enough traffic to fill the kernel's socket buffers for the stalled listener (a few MB on
    // loopback) and then the hub's bounded per-listener buffer: pings with the largest handle.
    const handle = '🎨'.repeat(48);
    const body = JSON.stringify({ handle });
    let sent = 0;
    let dropped = false;
    void fast.next((e) => e.type === 'left' && e.here === 1, 120_000).then(() => (dropped = true));
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    const worker = async (w: number) => {
      while (!dropped && sent < 40_000) {
        const n = sent++;
        // A distinct forwarded address per ping keeps each under its per-IP budget.
        const res = await ping(s, body, { agent, headers: { 'x-forwarded-for': `10.${w}.${(n >> 8) & 255}.${n & 255}` } });
        expect(res.status).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
    agent.destroy();
    expect(dropped).toBe(true);
    // The reading listener got every broadcast while the other one was stalled.
    await eventually(() => fast.events.filter((e) => e.type === 'library-search').length === sent);
    expect(fast.events.filter((e) => e.type === 'library-search').every((e) => e.handle === handle)).toBe(true);
    // The stalled listener's connection was closed by the server: reading on reaches its end.
    slow.response.resume();
    await slow.ended;
    expect(slow.response.complete).toBe(false);
    expect(await here(s)).toBe(1);
  });
});

const streamFrom = (s: TestServer, forwardedFor?: string) =>
  fetch(`${s.url}/v1/presence/stream`, { headers: forwardedFor ? { 'x-forwarded-for': forwardedFor } : {} });

describe('PRESENCE_MAX_PER_IP', () => {
  it('answers 503 BUSY to one address past its share while others still get in, and admits it again once one leaves', async () => {
    const s = await server({ PRESENCE_MAX_PER_IP: '3' });
    const mine = [await listen(s), await listen(s), await listen(s)];
    const refused = await streamFrom(s);
    expect(await errorOf(refused)).toEqual({
      status: 503,
      code: 'BUSY',
      message: 'Too many presence listeners from this address; try again shortly',
    });
    expect(refused.headers.get('retry-after')).toBe('30');
    const other = await listen(s, { localAddress: '127.0.0.2' }); // another address is admitted
    expect(other.events[0]).toMatchObject({ type: 'hello', here: 4 });
    mine[0]!.close();
    await eventually(async () => {
      const again = await openListener(s.url);
      listeners.push(again);
      return again.status === 200;
    });
  });

  it('counts the forwarded client IP behind TRUST_PROXY', async () => {
    const s = await server({ PRESENCE_MAX_PER_IP: '2', TRUST_PROXY: '1' });
    const open: Response[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await streamFrom(s, '203.0.113.7');
      expect(res.status).toBe(200);
      open.push(res);
    }
    expect(await errorOf(await streamFrom(s, '203.0.113.7'))).toMatchObject({ status: 503, code: 'BUSY' });
    // Same socket address (the "proxy"), another client: admitted.
    const another = await streamFrom(s, '203.0.113.8');
    expect(another.status).toBe(200);
    open.push(another);
    for (const res of open) await res.body?.cancel();
  });
});

describe('listeners that do not drain', () => {
  /** A hub on a real HTTP server with a tiny drain timeout and no byte bound (so only the timeout can drop). */
  async function hubServer(drainTimeoutMs: number): Promise<{ hub: PresenceHub; broadcaster: InProcessBroadcaster; url: string }> {
    const broadcaster = new InProcessBroadcaster();
    const hub = new PresenceHub({
      broadcaster,
      capacity: 100,
      coalesceAbove: 1_000,
      coalesceMs: 50,
      maxBufferedBytes: 1 << 30,
      drainTimeoutMs,
    });
    const http: Server = createServer((req, res) => {
      res.writeHead(200, SSE_HEADERS);
      void hub.admit(req.socket.remoteAddress ?? 'unknown').then((seat) => seat && hub.attach(req, res, seat));
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      hub.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    });
    return { hub, broadcaster, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };
  }

  it('drops a listener that stopped reading once its socket has not drained within the timeout; readers stay', async () => {
    const { hub, broadcaster, url } = await hubServer(300);
    const reader = await openListener(url);
    listeners.push(reader);
    // A peer that never reads: a raw socket, paused.
    const stalled = net.connect(Number(new URL(url).port), '127.0.0.1');
    stalled.pause();
    stalled.write('GET /v1/presence/stream HTTP/1.1\r\nHost: x\r\n\r\n');
    cleanups.push(() => void stalled.destroy());
    await eventually(async () => hub.size === 2);
    // Fill the kernel's buffers until writes to the stalled socket are refused (a few MB on loopback).
    const big = 'x'.repeat(512 * 1024);
    for (let i = 0; i < 32 && hub.size === 2; i++) {
      broadcaster.publish({ type: 'library-search', handle: big, at: Date.now() });
      await sleep(20);
    }
    await eventually(async () => hub.size === 1, 10_000);
    expect(stalled.destroyed || stalled.readableEnded || (await closedSoon(stalled))).toBe(true);
    expect(reader.response.destroyed).toBe(false);
  });
});

function closedSoon(socket: net.Socket): Promise<boolean> {
  return new Promise((resolve) => {
    if (socket.destroyed) return resolve(true);
    socket.once('close', () => resolve(true));
    socket.resume(); // read what is left so the close is seen
    setTimeout(() => resolve(false), 5_000);
  });
}
