/**
 * A hostile or broken Library (issue 11): streams that stall after a frame must time out and free
 * the upstream socket whatever the garbage collector does (forced collections run throughout);
 * floods and endless frames end in 502 `UPSTREAM` (or a clean end of a started stream) within
 * bounded memory; frames after `done` (`memory_update`, `event: shutdown`) reach the client until
 * the upstream closes.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LIBRARY_MAX_ANSWER_BYTES, LIBRARY_MAX_FRAME_CHARS } from '../../../server/upstream/library.ts';
import { type LibraryFake, SHUTDOWN_FRAME, startFakeLibrary } from '../../fakes/library.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';

const gc = (globalThis as { gc?: () => void }).gc;
let fake: LibraryFake;
/** Stream idle 300 ms, request deadline 60 s: what ends a stalled stream is the idle timeout. */
let idleServer: TestServer;
/** Request deadline 400 ms, stream idle 60 s: what ends an agentic ask is its deadline. */
let deadlineServer: TestServer;
let collections: NodeJS.Timeout | undefined;

beforeAll(async () => {
  fake = await startFakeLibrary();
  idleServer = await startTestServer({
    env: { LIBRARY_UPSTREAM_URL: fake.url, LIBRARY_STREAM_IDLE_MS: '300', UPSTREAM_TIMEOUT_MS: '60000' },
  });
  deadlineServer = await startTestServer({
    env: { LIBRARY_UPSTREAM_URL: fake.url, LIBRARY_STREAM_IDLE_MS: '60000', UPSTREAM_TIMEOUT_MS: '400' },
  });
});
afterAll(async () => {
  await idleServer?.close();
  await deadlineServer?.close();
  await fake?.close();
});
afterEach(() => {
  clearInterval(collections);
  fake.clearFaults();
  fake.answerWith(null);
});

/** Collect garbage every few milliseconds from now on (until the test ends). */
function collectGarbageContinuously(): void {
  expect(gc, 'tests run with --expose-gc (vitest.config.ts execArgv)').toBeTypeOf('function');
  collections = setInterval(() => gc!(), 5);
}

/** Read a whole SSE response; gives up (status 0) after `boundMs` so a hang fails the test instead of the suite. */
async function readStream(server: TestServer, body: unknown, boundMs = 15_000, signal?: AbortSignal) {
  const res = await server.post('/v1/library/ask/stream', body, { signal: signal ?? AbortSignal.timeout(boundMs) });
  if (!res.ok) return { status: res.status, text: await res.text(), frames: [] as string[] };
  const text = await res.text();
  return { status: res.status, text, frames: text.split(/(?<=\n\n)/).filter(Boolean) };
}

const ask = { question: 'Who drew the Atrium?' };
const framesOf = (body: { question: string; use_agentic?: boolean }) =>
  fake.framesFor({ top_k: 5, use_graph: true, use_agentic: false, ...body });

describe('stalled upstream streams time out whatever the GC does', () => {
  it('ends a stream that stalls after one frame at the idle timeout, and frees the upstream socket', async () => {
    collectGarbageContinuously();
    fake.fault('/api/ask/stream', { kind: 'stall', afterFrames: 1, times: 1 });
    const started = Date.now();
    const stream = await readStream(idleServer, ask);
    expect(stream.status).toBe(200);
    expect(stream.frames).toEqual(framesOf(ask).slice(0, 1));
    expect(Date.now() - started).toBeLessThan(10_000); // bounded wait: it ended, it did not hang
    const upstream = fake.requestsTo('/api/ask/stream').at(-1)!;
    await fake.waitFor((r) => r === upstream && r.cancelled); // the upstream connection was closed by us
  });

  it('answers an agentic ask that stalls after one frame with 502 at UPSTREAM_TIMEOUT_MS, and frees the upstream socket', async () => {
    collectGarbageContinuously();
    fake.fault('/api/ask/stream', { kind: 'stall', afterFrames: 1, times: 1 });
    const res = await deadlineServer.post('/v1/library/ask', { ...ask, use_agentic: true }, { signal: AbortSignal.timeout(15_000) });
    expect(await errorOf(res)).toEqual({ status: 502, code: 'UPSTREAM', message: 'The Library is temporarily unavailable' });
    const upstream = fake.requestsTo('/api/ask/stream').at(-1)!;
    await fake.waitFor((r) => r === upstream && r.cancelled);
  });

  it('cancels the upstream request when the client leaves a stalled stream', async () => {
    collectGarbageContinuously();
    fake.fault('/api/ask/stream', { kind: 'stall', afterFrames: 1, times: 1 });
    const client = new AbortController();
    const res = await deadlineServer.post('/v1/library/ask/stream', ask, { signal: client.signal });
    const reader = res.body!.getReader();
    await reader.read(); // the first frame
    const upstream = fake.requestsTo('/api/ask/stream').at(-1)!;
    await sleep(100); // collections run while it stalls
    client.abort();
    await fake.waitFor((r) => r === upstream && r.cancelled);
  });
});

describe('the Library stream passes frames after done through until the upstream closes', () => {
  it('waits for a late memory_update and an event: shutdown frame', async () => {
    fake.answerWith({ kind: 'tail', delayMs: 150, shutdown: true });
    const stream = await readStream(idleServer, ask);
    expect(stream.frames).toEqual([...framesOf(ask), SHUTDOWN_FRAME]);
    const done = stream.frames.indexOf('data: {"done":true}\n\n');
    expect(stream.frames.slice(done + 1, done + 2)[0]).toMatch(/^data: \{"memory_update":/);
  });

  it('ends at the idle timeout when the upstream stays open silently after done', async () => {
    const all = framesOf(ask);
    const afterDone = all.indexOf('data: {"done":true}\n\n') + 1;
    fake.fault('/api/ask/stream', { kind: 'stall', afterFrames: afterDone, times: 1 });
    const stream = await readStream(idleServer, ask);
    expect(stream.frames).toEqual(all.slice(0, afterDone));
  });

  it('the non-streaming agentic ask still answers at done', async () => {
    fake.answerWith({ kind: 'tail', delayMs: 5_000 });
    const res = await idleServer.post('/v1/library/ask', { ...ask, use_agentic: true }, { signal: AbortSignal.timeout(4_000) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { answer: string } };
    expect(body.data.answer).toContain('Atrium');
  });
});

describe('a Library flooding us is cut off at bounded sizes', () => {
  it(`answers an agentic ask flooded with 1 MB content frames with 502 past ${LIBRARY_MAX_ANSWER_BYTES} bytes`, async () => {
    fake.answerWith({ kind: 'flood', frameChars: 1024 * 1024 });
    const before = process.memoryUsage().rss;
    const res = await idleServer.post('/v1/library/ask', { ...ask, use_agentic: true }, { signal: AbortSignal.timeout(30_000) });
    expect(await errorOf(res)).toEqual({ status: 502, code: 'UPSTREAM', message: 'The Library is temporarily unavailable' });
    const upstream = fake.requestsTo('/api/ask/stream').at(-1)!;
    await fake.waitFor((r) => r === upstream && r.cancelled);
    // The whole flood is not kept: a generous bound (the answer cap is 16 MB; unbounded, this grew to ~1 GB).
    expect(process.memoryUsage().rss - before).toBeLessThan(400 * 1024 * 1024);
  });

  it('ends a started stream at the answer size cap', async () => {
    fake.answerWith({ kind: 'flood', frameChars: 1024 * 1024 });
    const stream = await readStream(idleServer, ask, 30_000);
    expect(stream.status).toBe(200);
    expect(stream.text.length).toBeLessThanOrEqual(LIBRARY_MAX_ANSWER_BYTES);
    expect(stream.text.length).toBeGreaterThan(LIBRARY_MAX_ANSWER_BYTES - 2 * 1024 * 1024);
    expect(stream.frames.every((f) => f.endsWith('\n\n'))).toBe(true); // whole frames only
  });

  it(`answers 502 to a first frame that never ends (over ${LIBRARY_MAX_FRAME_CHARS} characters)`, async () => {
    fake.answerWith({ kind: 'unterminated', chars: 31 * 1024 * 1024 });
    const res = await idleServer.post('/v1/library/ask/stream', ask, { signal: AbortSignal.timeout(30_000) });
    expect(await errorOf(res)).toEqual({ status: 502, code: 'UPSTREAM', message: 'The Library is temporarily unavailable' });
    const upstream = fake.requestsTo('/api/ask/stream').at(-1)!;
    await fake.waitFor((r) => r === upstream && r.cancelled); // cut off long before the 31 MB were sent
  });

  it('ends a started stream cleanly at a frame that never ends', async () => {
    fake.answerWith({ kind: 'unterminated', chars: 31 * 1024 * 1024, before: 2 });
    const stream = await readStream(idleServer, ask, 30_000);
    expect(stream.status).toBe(200);
    expect(stream.frames).toEqual(framesOf(ask).slice(0, 2));
  });
});

describe('a client that stops reading a stream', () => {
  it('is cut off once it has read nothing for the idle timeout, and the upstream is cancelled', async () => {
    fake.answerWith({ kind: 'flood', frameChars: 64 * 1024 });
    // The server's end of our connection: it must close although our client never hangs up.
    const serverSide = new Promise<Socket>((found) => {
      const onConnection = (socket: Socket) => {
        if (socket.remotePort !== client.localPort) return;
        idleServer.server.off('connection', onConnection);
        found(socket);
      };
      idleServer.server.on('connection', onConnection);
    });
    const client = connect(idleServer.port, '127.0.0.1');
    await once(client, 'connect');
    const body = JSON.stringify(ask);
    client.write(
      `POST /v1/library/ask/stream HTTP/1.1\r\nHost: museum.test\r\nX-API-Key: ${idleServer.key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    client.pause(); // reads no further than its stream buffer: the server's writes back up
    const closed = once(await serverSide, 'close');
    try {
      await Promise.race([
        closed,
        new Promise((_, fail) => setTimeout(() => fail(new Error('the stalled client still holds its stream')), 15_000)),
      ]);
      const upstream = fake.requestsTo('/api/ask/stream').at(-1)!;
      await fake.waitFor((r) => r === upstream && r.cancelled);
    } finally {
      client.destroy();
    }
  });
});
