/**
 * Presence cannot be exhausted by one address (issue 11, item 4): at most PRESENCE_MAX_PER_IP
 * listeners per client IP (the forwarded one behind TRUST_PROXY), and a listener whose socket has
 * not drained within the drain timeout is dropped, however little waits for it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { InProcessBroadcaster } from '../../server/presence/broadcaster.ts';
import { PresenceHub, SSE_HEADERS } from '../../server/presence/hub.ts';
import { errorOf, startTestServer, type TestServer } from '../helpers/server.ts';
import { eventually, openListener, type SseListener } from './sse.ts';

const servers: TestServer[] = [];
const listeners: SseListener[] = [];
const cleanups: Array<() => void | Promise<void>> = [];

afterEach(async () => {
  for (const l of listeners.splice(0)) l.close();
  for (const s of servers.splice(0)) await s.close();
  for (const c of cleanups.splice(0)) await c();
});

async function server(env: Record<string, string>): Promise<TestServer> {
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

const streamFrom = (s: TestServer, forwardedFor?: string) =>
  fetch(`${s.url}/v1/presence/stream`, { headers: forwardedFor ? { 'x-forwarded-for': forwardedFor } : {} });

describe('PRESENCE_MAX_PER_IP', () => {
  it('answers 503 BUSY to one address past its share while others still get in, and admits it again once one leaves', async () => {
    const s = await server({ PRESENCE_MAX_PER_IP: '3' });
    const mine = [await listen(s), await listen(s), await listen(s)];
    const refused = await streamFrom(s);
    expect(await errorOf(refused)).toEqual({ status: 503, code: 'BUSY', message: 'Too many presence listeners from this address; try again shortly' });
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
    const hub = new PresenceHub({ broadcaster, capacity: 100, coalesceAbove: 1_000, coalesceMs: 50, maxBufferedBytes: 1 << 30, drainTimeoutMs });
    const http: Server = createServer((req, res) => {
      res.writeHead(200, SSE_HEADERS);
      hub.attach(req, res, req.socket.remoteAddress ?? 'unknown');
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
      await new Promise((resolve) => setTimeout(resolve, 20));
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
