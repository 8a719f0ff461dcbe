import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatSse, type SseItem, UpstreamError, UpstreamHttp } from '../../../server/upstream/http.ts';
import { type FakeServer, sendJson, startFakeServer } from '../../fakes/faults.ts';

let upstream: FakeServer;

beforeAll(async () => {
  upstream = await startFakeServer(async (req, res) => {
    if (req.path === '/json') return sendJson(res, 200, { ok: true, echo: req.query.get('q') });
    if (req.path === '/big') return sendJson(res, 200, { blob: 'x'.repeat(10_000) });
    if (req.path === '/crlf') {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      // CRLF line ends, with a CR/LF pair split across writes, and a last frame without its blank line.
      for (const part of ['data: {"n":1}\r', '\n\r\n: ping\r\n\r\ndata: {"n"', ':2}\r\n\r', '\ndata: {"n":3}']) {
        res.write(part);
        await sleep(5);
      }
      res.end();
      return;
    }
    if (req.path === '/endless') {
      // A frame that never ends, in pieces (`after` = a whole frame first, then the endless one in one write).
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (req.query.has('after')) res.write(`data: ${'x'.repeat(200)}\n\n${'y'.repeat(101)}`);
      else
        for (const part of ['event: long\r', `data: ${'x'.repeat(50)}`, 'x'.repeat(60)]) {
          res.write(part);
          await sleep(5);
        }
      return;
    }
    if (req.path === '/half-json') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"partial":'); // then nothing, without ending
      return;
    }
    if (req.path === '/silent') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n'); // then nothing, without ending
      return;
    }
    sendJson(res, 404, { error: 'no' });
  });
});
afterAll(async () => {
  await upstream?.close();
});

const client = (options: Partial<ConstructorParameters<typeof UpstreamHttp>[0]> = {}) =>
  new UpstreamHttp({ service: 'test service', baseUrl: upstream.url, timeoutMs: 1_000, ...options });

describe('UpstreamHttp', () => {
  it('reads JSON, drops empty query values and sends its headers', async () => {
    const result = await client({ headers: { 'x-api-key': 'k' } }).json('/json', { query: { q: 'a b', skip: undefined, none: null } });
    expect(result).toEqual({ status: 200, body: { ok: true, echo: 'a b' }, bytes: JSON.stringify({ ok: true, echo: 'a b' }).length });
    const seen = upstream.requestsTo('/json').at(-1)!;
    expect([...seen.query.keys()]).toEqual(['q']);
    expect(seen.headers['x-api-key']).toBe('k');
  });

  it('turns every failure into a 502 UpstreamError with a generic message', async () => {
    const closed = await startFakeServer(() => undefined);
    await closed.close(); // nothing listens on its port any more
    const failures: Array<[string, () => Promise<unknown>, string]> = [
      ['status', () => client().json('/missing'), 'status'],
      ['too large', () => client({ maxBytes: 1_000 }).json('/big'), 'body'],
      ['refused', () => client({ baseUrl: closed.url }).json('/json'), 'network'],
    ];
    for (const [name, call, reason] of failures) {
      const err = await call().catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(UpstreamError);
      expect((err as UpstreamError).reason, name).toBe(reason);
      expect((err as UpstreamError).status).toBe(502);
      expect((err as UpstreamError).code).toBe('UPSTREAM');
      expect((err as UpstreamError).message).toBe('The test service is temporarily unavailable');
    }
    expect((await client().json('/missing', { accept: [404] })).body).toBeNull();
  });

  it('stops waiting when the caller cancels', async () => {
    const controller = new AbortController();
    upstream.fault('/json', { kind: 'timeout', times: 1 });
    const pending = client({ timeoutMs: 10_000 }).json('/json', { signal: controller.signal });
    await upstream.waitFor((r) => r.fault === 'timeout');
    controller.abort();
    expect(await pending.catch((e: UpstreamError) => e.reason)).toBe('aborted');
  });

  it('parses SSE on any line ending, across chunk boundaries, and keeps a last event without its blank line', async () => {
    const stream = await client().stream('/crlf', { idleMs: 1_000 });
    const items: SseItem[] = [];
    for await (const item of stream) items.push(item);
    const data = (n: number) => ({ message: { data: `{"n":${n}}` } });
    expect(items).toEqual([data(1), { comment: 'ping' }, data(2), data(3)]);
    expect(items.map(formatSse)).toEqual(['data: {"n":1}\n\n', ': ping\n\n', 'data: {"n":2}\n\n', 'data: {"n":3}\n\n']);
  });

  it('fails a stream whose pending frame grows past maxFrameChars, however it arrives', async () => {
    for (const path of ['/endless', '/endless?after']) {
      const items: SseItem[] = [];
      const err = await (async () => {
        for await (const item of await client().stream(path, { idleMs: 1_000, maxFrameChars: 100 })) items.push(item);
      })().catch((e: unknown) => e);
      expect((err as UpstreamError).reason, path).toBe('body');
      expect(items.map(formatSse), path).toEqual(path === '/endless' ? [] : [`data: ${'x'.repeat(200)}\n\n`]);
    }
  });

  it('fails a stream that stays silent longer than the idle limit, and cancels it upstream', async () => {
    const stream = await client().stream('/silent', { idleMs: 150 });
    const frames: string[] = [];
    const err = await (async () => {
      for await (const item of stream) frames.push(formatSse(item));
    })().catch((e: unknown) => e);
    expect(frames).toEqual(['data: {"n":1}\n\n']);
    expect((err as UpstreamError).reason).toBe('timeout');
    await upstream.waitFor((r) => r.path === '/silent' && r.cancelled);
  });

  it('times out a JSON body that stalls midway, and frees the upstream socket, whatever the GC does', async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    expect(gc, 'tests run with --expose-gc (vitest.config.ts execArgv)').toBeTypeOf('function');
    const collections = setInterval(() => gc!(), 5);
    try {
      const caller = new AbortController(); // a caller signal too: the deadline is linked to it
      const err = await client({ timeoutMs: 300 })
        .json('/half-json', { signal: caller.signal })
        .catch((e: unknown) => e);
      expect((err as UpstreamError).reason).toBe('timeout');
      await upstream.waitFor((r) => r.path === '/half-json' && r.cancelled);
    } finally {
      clearInterval(collections);
    }
  });

  it('refuses a stream answered with something else than an event stream', async () => {
    expect(
      await client()
        .stream('/json', { idleMs: 1_000 })
        .catch((e: UpstreamError) => e.reason),
    ).toBe('body');
  });
});

describe('formatSse', () => {
  it('writes events (type, id, multi-line data) and comments as SSE text', () => {
    const message = { event: 'shutdown', id: '7', data: '{"a":1}\n{"b":2}' };
    expect(formatSse({ message })).toBe('event: shutdown\nid: 7\ndata: {"a":1}\ndata: {"b":2}\n\n');
    expect(formatSse({ comment: 'ping' })).toBe(': ping\n\n');
  });
});
